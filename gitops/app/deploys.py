"""Deployment state (issue 39): the verification state of each branch's last deploy and the history of deploys,
kept in each server's ledger (``gitops.core.deploys`` decides, ``edges/ledger/`` and ``edges/codestore.py``
keep). ``app/applying.py`` records through here; ``plan``, ``apply``, ``drift``, ``status``, ``history`` and
``rollback`` read through here. It never prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gitops.app.session import Session, state_folder_error
from gitops.core.codeset import CodeSet, WireModule
from gitops.core.deploys import (
    Deploy,
    DeployHow,
    UnsettledDeploy,
    VerifyRecord,
    kept_digests,
    outcome_state,
    rollback_target,
    short_reason,
)
from gitops.edges.codestore import folder_for, is_kept, keep, kept, prune, write_kept
from gitops.errors import UsageError
from gitops.secrets import redact

if TYPE_CHECKING:  # types only: planning reads the records before the plan models and the judge are imported
    from gitops.core.health import Verification
    from gitops.core.plan import BranchPlan


def session_names(session: Session, server: str) -> set[str]:
    """The session's branch names on ``server`` (after ``--server``/``--branch``), with their standby branches."""
    names: set[str] = set()
    for config in session.loaded.manifest.branches:
        if config.server == server:
            names.add(config.branch)
            if config.verify is not None and config.verify.standby:
                names.add(config.verify.standby)
    return names


def _code_folder(session: Session, server: str) -> Path:
    return folder_for(session.ledger(server).path)


def unsettled(session: Session, servers: list[str] | None = None) -> list[UnsettledDeploy]:
    """Every branch of the session whose last deploy is unverified (pending, interrupted) or failing."""
    out: list[UnsettledDeploy] = []
    for server in servers if servers is not None else session.servers():
        names = session_names(session, server)
        for record in session.ledger(server).verifications():
            if record.unsettled and record.branch in names:
                out.append(
                    UnsettledDeploy(
                        server,
                        record.branch,
                        record.state,
                        record.reason,
                        record.commit,
                        record.applied_at,
                        record.undo,
                    )
                )
    return out


def record_deploy(
    session: Session,
    server: str,
    branch: str,
    modules: Mapping[str, WireModule],
    commit: str | None,
    how: DeployHow,
    digest: str | None = None,
) -> None:
    """``branch`` on ``server`` now holds ``modules`` (whose set digest is ``digest``, when the caller has it): a
    deploy in the history (its code kept, the oldest code no longer needed removed), and its old verification state
    replaced (a deploy without ``verify:`` leaves none)."""
    ledger = session.ledger(server)
    if digest is None:
        try:
            digest = CodeSet.from_wire(dict(modules)).digest
        except ValueError:
            digest = None
    now = session.options.clock.now()
    ledger.record_deploy(Deploy(0, branch, digest, commit, now, how))
    ledger.forget_verification(branch)
    folder = _code_folder(session, server)
    if digest is not None:
        keep(folder, digest, modules)
    prune(folder, kept_digests(ledger.history(), ledger.verifications()))


def keep_before_sending(
    session: Session, server: str, sets: Iterable[tuple[str | None, Mapping[str, WireModule]]]
) -> None:
    """Keep each module set ``apply`` is about to send to ``server`` (and each it would restore on a failed
    verification), given with its set digest when known, beside the ledger now, before anything is sent:
    :class:`StateFolderError` when the state folder cannot hold it (full, read-only), so that a deploy is never made
    whose code ``gitops rollback`` could not restore. :func:`record_deploy` then finds it kept."""
    folder = _code_folder(session, server)
    for known, modules in sets:
        digest = known
        if digest is None:
            try:
                digest = CodeSet.from_wire(dict(modules)).digest
            except ValueError:
                continue  # not modules the tool can digest: never kept (the history keeps no digest for them)
        try:
            write_kept(folder, digest, modules)
        except OSError as exc:
            raise state_folder_error(exc, folder) from None


def begin_watch(
    session: Session,
    branch: BranchPlan,
    commit: str | None,
    previous: Mapping[str, WireModule] | None,
    *,
    reason: str = "the watch began and has not ended",
) -> VerifyRecord:
    """Before the watch (and as soon as the branch's code is deployed): the branch's verification is ``pending``,
    with what is needed to undo it (the code to restore kept beside the ledger, or the standby branch), saved at once
    (a kill leaves it)."""
    server = branch.server
    ledger = session.ledger(server)
    now = session.options.clock.now()
    step = branch.verify
    assert step is not None
    applied = ledger.applied(branch.branch)
    undo: VerifyRecord = VerifyRecord(
        branch.branch,
        "pending",
        applied.digest if applied is not None else branch.upload_digest,
        commit,
        applied.applied_at if applied is not None else now,
        now,
        reason,
    )
    if step.reserves_upload and previous is not None:
        with_code = dict(previous)
        digest = CodeSet.from_wire(with_code).digest
        keep(_code_folder(session, server), digest, with_code)
        undo = replace(undo, undo="restore", restore_digest=digest)
    elif step.reserved_activations and step.switch_back is not None:
        undo = replace(undo, undo="standby", standby=step.switch_back, standby_for=tuple(step.switch_for))
    ledger.record_verification(undo)
    session.save(server)
    return undo


def end_watch(
    session: Session, server: str, record: VerifyRecord, verification: Verification, *, interrupted: bool
) -> None:
    """The verification's outcome replaces its ``pending`` record, saved at once."""
    after = None if verification.after is None else verification.after.status
    state = outcome_state(verification.result, after, interrupted=interrupted)
    reason = verification.health.reason
    if verification.result == "rolled-back":
        shown = "not judged" if verification.after is None else verification.after.status
        reason = f"rolled back ({verification.undo}); after the rollback: {shown}"
    elif verification.result == "undo-failed":
        reason = f"rollback failed: {verification.undo_error}"
    if interrupted:
        reason = f"interrupted by {session.options.interrupt.signal_name or 'a signal'} during the watch ({reason})"
    ledger = session.ledger(server)
    ledger.record_verification(
        replace(record, state=state, reason=short_reason(redact(reason)), recorded_at=session.options.clock.now())
    )
    session.save(server)


# --- history ------------------------------------------------------------------------------------------


def history(session: Session) -> dict[str, list[tuple[Deploy, bool]]]:
    """Per server, the recorded deploys of the session's branches, newest first, each with whether its code is
    kept (so that ``gitops rollback --to N`` can restore it)."""
    out: dict[str, list[tuple[Deploy, bool]]] = {}
    for server in session.servers():
        names = session_names(session, server)
        folder = _code_folder(session, server)
        deploys = [d for d in session.ledger(server).history() if d.branch in names]
        out[server] = [(d, d.digest is not None and is_kept(folder, d.digest)) for d in reversed(deploys)]
    return out


# --- rollback ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RollbackChoice:
    server: str
    branch: str
    deploy: Deploy
    code: CodeSet


def choose_rollback(session: Session, to: int | None) -> RollbackChoice:
    """The deploy ``gitops rollback`` restores, and its code: on the session's one branch (``--server``/``--branch``
    narrow it), deploy ``to`` of the history, else the code its verification record would restore, else its
    newest earlier deploy. :class:`UsageError` (exit 4) when the branch is not one, the deploy is not in the
    history or its code is no longer kept."""
    configs = session.loaded.manifest.branches
    if len(configs) != 1:
        labels = ", ".join(f"{c.server}/{c.branch}" for c in configs)
        raise UsageError(
            f"rollback undoes one branch at a time; the manifest has {len(configs)} here ({labels})",
            hint="Name it with --server NAME --branch NAME.",
        )
    config = configs[0]
    server = config.server
    ledger = session.ledger(server)
    record = ledger.verification(config.branch)
    branch = record.branch if record is not None else config.branch
    # rollback: standby records the pair's other branch; the manifest's branch is where the restored code goes.
    current = ledger.applied(config.branch)
    try:
        deploy = rollback_target(
            ledger.history(),
            config.branch,
            to,
            None if current is None else current.digest,
            record.restore_digest if record is not None and branch == config.branch else None,
        )
    except ValueError as exc:
        raise UsageError(
            f"cannot roll back {server}/{config.branch}: {exc}", hint="See the recorded deploys with 'gitops history'."
        ) from None
    modules = None if deploy.digest is None else kept(_code_folder(session, server), deploy.digest)
    if modules is None:
        raise UsageError(
            f"cannot roll back {server}/{config.branch} to deploy {deploy.n}: its code is not kept (the ledger keeps "
            "the code of each branch's last few deploys only, and of the code a verification would restore)",
            hint="Check out that commit and run 'gitops apply' instead.",
        )
    return RollbackChoice(server, config.branch, deploy, CodeSet.from_wire(modules))


__all__ = [
    "RollbackChoice",
    "begin_watch",
    "choose_rollback",
    "end_watch",
    "history",
    "keep_before_sending",
    "record_deploy",
    "session_names",
    "unsettled",
]
