"""Carrying out a plan: per branch, a clone-branch holding the modules (a new branch) or one upload of the whole
module set, then activation.

``apply`` is the second reader of the plan's steps (the renderers are the first). It first checks, without writing
anything, that a saved plan is still true of the servers; then it writes; on the first failure it stops and raises
:class:`ApplyError` listing what was done and what was not. An upload replaces the whole branch at once on the
server, so a branch is never half-written, and running ``gitops apply`` again plans afresh and converges.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from gitops.core.codeset import CodeSet, WireModule
from gitops.core.plan import BranchPlan, Payload, Plan, Step
from gitops.core.planseal import server_problems
from gitops.core.remote import RemoteReader, RemoteWriter
from gitops.errors import ApplyError, AuthError, BudgetError, GitopsError, PlanFileError, ServiceError, UsageError


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one step."""

    branch: str
    step: Step
    status: Literal["done", "failed", "not-run"]
    detail: str | None = None

    def line(self) -> str:
        mark = {"done": "done   ", "failed": "FAILED ", "not-run": "not run"}[self.status]
        text = f"{mark} {self.branch}: {self.step.describe()}"
        return text + (f": {self.detail}" if self.detail else "")


def verify_plan(
    plan: Plan, readers: Mapping[str, RemoteReader], *, saved: bool
) -> dict[tuple[str, str], Mapping[str, WireModule]]:
    """Check that the servers still hold what the plan saw, before anything is written.

    For a saved plan (``saved``) every branch that the plan uploads to is downloaded again and compared with the
    state the plan was made from; any difference makes the plan stale. Server-only modules that the plan keeps but
    does not hold are taken from this download. Returns the module sets to upload, per (server, branch): read-only,
    so that a body encoded from one of them ahead of its write (the client's ``prepare_write``) stays its body.
    """
    stale: list[str] = []
    edited: list[str] = []
    uploads: dict[tuple[str, str], Mapping[str, WireModule]] = {}
    for branch in plan.branches:
        if branch.steps and branch.remote.how == "unknown":
            # Never write blind: cloning onto a branch that exists after all would reset it.
            error = PlanFileError if saved else UsageError
            raise error(
                f"{branch.label} cannot be applied: the plan was made without any knowledge of it on the server "
                "(--refresh=never with an empty ledger), so a clone-branch could overwrite a branch that exists",
                hint="Plan with --refresh=auto (the default), which asks the server.",
            )
        payload = plan.payload(branch.server, branch.branch)
        if payload is None:
            continue
        modules = dict(payload.modules)
        if saved or payload.missing_kept:
            current = readers[branch.server].get_code(branch.branch)
            now_digest = current.digest if current is not None else None
            if now_digest != branch.remote.digest:
                stale.append(_stale_reason(branch, current))
                continue
            if current is not None:
                _fill_kept(modules, payload, current)
                edited += server_problems(branch, payload, current) if saved else []
        uploads[(branch.server, branch.branch)] = MappingProxyType(dict(sorted(modules.items())))
    if edited:
        # The seal (checked when the file was loaded) cannot cover the modules planned as unchanged, nor bind the
        # shown diffs to the payload; the download can.
        raise PlanFileError(
            "plan file was edited after it was made: what it would upload is not what the plan shows, nothing was "
            "applied:\n" + "\n".join(f"  - {e}" for e in edited),
            hint="Make the plan again with 'gitops plan --out FILE', review it, and apply that file unchanged.",
        )
    if stale and saved:
        raise PlanFileError(
            "plan is stale: the server changed since the plan was made, nothing was applied:\n"
            + "\n".join(f"  - {s}" for s in stale),
            hint="Make a fresh plan ('gitops plan --out FILE') and review it, or run 'gitops apply' without a file.",
        )
    if stale:
        raise ServiceError(
            "the server changed while the plan was being made, nothing was applied:\n"
            + "\n".join(f"  - {s}" for s in stale),
            hint="Run 'gitops apply' again: it plans afresh.",
        )
    return uploads


def _stale_reason(branch: BranchPlan, current: CodeSet | None) -> str:
    if current is None:
        return f"{branch.label}: the branch no longer exists on the server"
    if not branch.remote.exists:
        return f"{branch.label}: the branch was created on the server after the plan was made"
    return f"{branch.label}: the branch's modules changed on the server after the plan was made"


def _fill_kept(modules: dict[str, WireModule], payload: Payload, current: CodeSet) -> None:
    for name in payload.missing_kept:
        module = current.modules.get(name)
        if module is not None:
            modules[name] = module.wire()


def apply_plan(
    plan: Plan,
    writers: Mapping[str, RemoteWriter],
    uploads: Mapping[tuple[str, str], Mapping[str, WireModule]],
    *,
    progress: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Carry out the plan's steps in order; raise :class:`ApplyError` on the first failure.

    The plan counts each upload once. On a server where it also reserved an upload for a rollback, an upload whose
    answer was lost is not sent again: the server counts every upload it receives, so a resend would spend the
    upload the rollback was promised (the budget check let the plan through only with it). The upload then fails
    with its outcome unknown; the branch's record is dropped and the next plan downloads it. Elsewhere a lost
    answer is retried once (the manifest's ``reserve`` absorbs that upload).
    """
    todo = [(b, step) for b in plan.branches for step in b.steps]
    keep_reserve = {b.server for b in plan.branches if b.verify is not None and b.verify.reserves_upload}
    outcomes: list[Outcome] = []
    for index, (branch, step) in enumerate(todo):
        writer = writers[branch.server]
        try:
            if step.kind == "clone-branch":
                writer.clone_branch(branch.branch, modules=uploads.get((branch.server, branch.branch)))
            elif step.kind == "upload":
                writer.upload_code(
                    branch.branch,
                    uploads[(branch.server, branch.branch)],
                    resend_if_lost=branch.server not in keep_reserve,
                )
            else:
                assert step.which is not None
                writer.set_active_branch(branch.branch, step.which)
        except GitopsError as exc:
            outcomes.append(Outcome(branch.label, step, "failed", exc.message))
            outcomes.extend(Outcome(b.label, s, "not-run") for b, s in todo[index + 1 :])
            error = ApplyError(_failure_report(outcomes, index, len(todo)), hint=_retry_hint(exc))
            error.outcomes = list(outcomes)
            if isinstance(exc, BudgetError | AuthError):
                error.exit_code = exc.exit_code  # 3 or 7: the CI's unlock or credentials path applies
            raise error from exc
        outcome = Outcome(branch.label, step, "done")
        outcomes.append(outcome)
        if progress is not None:
            progress(outcome)
    return outcomes


def _failure_report(outcomes: list[Outcome], index: int, total: int) -> str:
    failed = outcomes[index]
    lines = [f"apply stopped at step {index + 1} of {total} ({failed.branch}: {failed.step.describe()})."]
    lines.append("What was done and what was not:")
    lines.extend("  " + o.line() for o in outcomes)
    return "\n".join(lines)


def _retry_hint(exc: GitopsError) -> str:
    base = "Each upload replaces a whole branch, so no branch is half-written. "
    base += "Run 'gitops apply' again once the cause is fixed: it plans afresh and converges."
    return f"{exc.hint}\n{base}" if exc.hint else base
