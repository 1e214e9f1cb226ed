"""The apply use case, for a fresh plan and a saved one alike: the budget recheck (with the downloads the checks
need), the check that the servers still hold what the plan saw, the writes, and one :class:`ApplyReport`.

The CLI (``gitops apply``) and the GitHub Action call :func:`run_apply`; they only render or record its report and
pick exit codes. It never prints.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from gitops.app.budgetgates import recheck_budget, scope_error
from gitops.app.deploys import begin_watch, end_watch, keep_before_sending, record_deploy
from gitops.app.gathering import SERVER_ERRORS, run_concurrently
from gitops.app.planbuilder import probe_needs
from gitops.app.planning import check_saved_plan
from gitops.app.session import Session
from gitops.app.verifying import verify_branch, watch_after_deploy
from gitops.config.manifest import ActiveName
from gitops.core.applied import AppliedRecord
from gitops.core.apply import Outcome, apply_plan, verify_plan
from gitops.core.codeset import WireModule
from gitops.core.drift import record_from_wire, source_commit, source_text
from gitops.core.endpoints import DOWNLOAD
from gitops.core.health import Verification, worst
from gitops.core.plan import BranchPlan, Plan, VerifyStep, narrow_plan, plan_for_server
from gitops.core.planlines import applied_line, no_changes_line
from gitops.core.remote import RemoteReader, RemoteWriter
from gitops.edges.planfile import load_plan
from gitops.errors import ApplyError, ExitCode, GitopsError

NOTHING_TO_APPLY = "Nothing to apply."


@dataclass
class ApplyReport:
    """What an apply did: each step's outcome and, once every step is done, the line that says so.

    ``cancelled``: the person answered no at the confirmation (nothing was written).
    """

    plan: Plan
    outcomes: list[Outcome] = field(default_factory=list)
    applied: bool = False
    cancelled: bool = False
    #: The health check of each branch with ``verify:`` (in the plan's order), once its server's steps are done.
    verifications: list[Verification] = field(default_factory=list)

    @property
    def verify_exit_code(self) -> int:
        """The most serious verification's exit code (0: healthy, unknown, or nothing verified)."""
        return worst(v.exit_code for v in self.verifications)

    @property
    def applied_line(self) -> str | None:
        """``Applied: ...`` once every step is done; ``Nothing to apply.`` for a plan without changes."""
        if not self.plan.has_changes:
            # As old as the plan says: "Nothing to apply." alone only when every branch was verified on the server.
            return no_changes_line(self.plan, now=self.plan.created_at, head=NOTHING_TO_APPLY.rstrip("."))
        return applied_line(self.plan) if self.applied else None

    def lines(self) -> list[str]:
        """The outcome of each step, then the applied line: the text the CLI prints and the Action records."""
        out = [o.line() for o in self.outcomes]
        if self.applied_line is not None:
            out.append(self.applied_line)
        return out


def check_downloads(plan: Plan, *, saved: bool) -> dict[str, dict[str, int]]:
    """The downloads :func:`gitops.core.apply.verify_plan` makes, per server: one per payload of a saved plan (its
    stale check), and one per payload whose kept server-only modules the plan does not hold (``remote_only:
    keep``), fresh or saved. They count in the budget like the plan's own requests."""
    extra: dict[str, dict[str, int]] = {}
    for payload in plan.payloads:
        if saved or payload.missing_kept:
            needs = extra.setdefault(payload.server, {DOWNLOAD: 0})
            needs[DOWNLOAD] += 1
    return extra


def load_saved_plan(path: Path, session: Session) -> Plan:
    """A plan saved by ``gitops plan --out``, checked against the session's manifest (:class:`PlanFileError`).

    With targets (``--server``/``--branch``), only the targeted part of the plan is returned (and so applied): the
    session's manifest is already narrowed to them (:func:`gitops.core.plan.narrow_plan`).
    """
    plan = load_plan(path)
    if session.options.targets:
        plan = narrow_plan(plan, session.loaded)
    check_saved_plan(plan, session.loaded)
    return plan


def run_apply(
    session: Session,
    plan: Plan,
    *,
    saved: bool,
    confirm: Callable[[], bool] | None = None,
    progress: Callable[[Outcome], None] | None = None,
) -> ApplyReport:
    """Carry out ``plan``: recheck the budget, ask ``confirm`` (when given), verify, write; one report.

    Raises :class:`BudgetError` (exit 3) before anything is sent when the plan's requests and the check's downloads
    (:func:`check_downloads`) do not fit; :class:`PlanFileError` (a saved plan) or :class:`ServiceError` when the
    servers changed since the plan was made; :class:`ApplyError` (carrying 3 or 7 when the budget or the
    credentials stopped it) listing what was done when a write fails. ``progress`` sees each step as it is done;
    the ledgers are saved after each.
    """
    report = ApplyReport(plan)
    if not plan.has_changes:
        return report
    _recheck(session, plan, saved=saved)
    if confirm is not None and not confirm():
        report.cancelled = True
        return report
    servers = sorted({b.server for b in plan.branches if b.steps})
    readers: dict[str, RemoteReader] = {server: session.reader(server) for server in servers}
    writers: dict[str, RemoteWriter] = {server: session.writer(server) for server in servers}
    try:
        uploads = verify_plan(plan, readers, saved=saved)
        records = _records(session, plan, uploads)
        _record_pending(session, records)
    finally:
        session.save()
    _state_folder_ready(session, plan, uploads, records, servers)
    order = OrderedOutcomes(servers, progress)

    def apply_server(server: str) -> None:
        part = plan_for_server(plan, server)
        try:
            if any(b.writes_code for b in part.branches):
                _prepare_uploads(session, part, uploads, server)

            def done(outcome: Outcome) -> None:
                _record_applied(session, part, records, outcome)
                _record_history(session, part, uploads, records, outcome)
                session.save(server)
                report.outcomes.append(outcome)
                order.add(server, outcome)

            apply_plan(part, {server: writers[server]}, uploads, progress=done)
            for branch in part.branches:
                if branch.verify is not None and branch.steps:
                    verified.append(_verify(session, plan, branch, writers[server]))
        finally:
            order.finish(server)

    # The servers are written at the same time (one thread each; a player with three servers waits for the slowest
    # upload, not the sum): each server's steps in order, its outcomes shown in the servers' order whatever finishes
    # first. A failure stops that server's remaining steps; the others carry on (each branch is one whole upload,
    # never half-written), and the error lists each server that failed.
    verified: list[Verification] = []
    failures = run_each(servers, apply_server)
    labels = [b.label for b in plan.branches]
    report.verifications = sorted(verified, key=lambda v: labels.index(v.label))
    if failures:
        raise combined_failure(plan, report.outcomes, failures)
    report.applied = True
    return report


def _state_folder_ready(session: Session, plan: Plan, uploads: Uploads, records: Records, servers: list[str]) -> None:
    """Before the first write: the ledgers saved and the code to keep written beside them (what is sent, and what a
    failed verification would restore), or :class:`StateFolderError` with nothing sent. A deploy the state folder
    cannot record (full, read-only) would leave ``status``, ``history`` and ``rollback`` without it."""
    session.save_or_refuse(servers)
    for server in servers:
        sets: list[tuple[str | None, Mapping[str, WireModule]]] = []
        for (where, branch), modules in uploads.items():
            if where == server:
                made = records.get((where, branch))  # its digest, made once for the applied record
                sets.append((None if made is None else made.digest, modules))
        for b in plan.branches:
            rollback = plan.rollback(server, b.branch) if b.server == server and b.verify is not None else None
            if rollback is not None:
                sets.append((None, rollback.modules))
        keep_before_sending(session, server, sets)


def _recheck(session: Session, plan: Plan, *, saved: bool) -> None:
    """Before anything is asked or sent: the budget with the check's downloads and the probe's, and the scopes."""
    extra = check_downloads(plan, saved=saved)
    for server, needs in probe_needs(plan, session).items():
        extra.setdefault(server, {}).update(needs)
    recheck_budget(plan, session, extra)
    refused = scope_error(plan, session, probe_needs(plan, session))
    if refused is not None:
        raise refused


def _prepare_uploads(session: Session, part: Plan, uploads: Uploads, server: str) -> None:
    """The server's upload bodies, deflated in the background while the probe (if any) is asked and the first steps
    are sent; then its compression probe."""
    if session.compression(server) != "off":
        for b in part.branches:
            creates = any(step.kind == "clone-branch" for step in b.steps)
            if b.writes_code and (b.server, b.branch) in uploads:
                # The body the local read made, when it is this upload's: not encoded again.
                made = None if creates else session.body_ahead(b.server, b.branch, b.upload_digest)
                modules = uploads[(b.server, b.branch)]
                session.client(server).prepare_write(b.branch, modules, clone=creates, content=made)
    session.prepare_compression(server)


def _verify(session: Session, plan: Plan, branch: BranchPlan, writer: RemoteWriter) -> Verification:
    """Watch and judge one applied branch; restore its previous code (the upload the plan reserved) on failure."""
    rollback = plan.rollback(branch.server, branch.branch)

    def restore(modules: Mapping[str, WireModule]) -> None:
        try:
            writer.upload_code(branch.branch, dict(modules))
        finally:
            session.save(branch.server)
        record = _record(session, plan, branch.branch, modules)
        if record is not None:
            session.ledger(branch.server).record_applied(replace(record, applied_at=session.options.clock.now()))
            session.save(branch.server)

    def switch(back: str, which: list[ActiveName]) -> None:
        try:
            for name in which:
                writer.set_active_branch(back, name)
        finally:
            session.save(branch.server)

    previous = None if rollback is None else rollback.modules
    ledger = session.ledger(branch.server)
    applied = ledger.applied(branch.branch)
    step = branch.verify
    standby = None
    if step is not None and step.switch_back is not None:
        before = ledger.applied(step.switch_back)
        standby = None if before is None else frozenset(before.modules)
    # The pending record is made inside: once the ledger says pending, a signal is answered as one during the watch
    # (recorded interrupted), never with the KeyboardInterrupt that would leave a bare pending and say "aborted".
    with session.options.interrupt.verifying():
        record = begin_watch(session, branch, source_commit(plan.source), previous)
        verification = verify_branch(
            session,
            branch,
            previous,
            restore=restore,
            switch=switch,
            bot_modules=None if applied is None else frozenset(applied.modules),
            standby_modules=standby,
        )
    end_watch(session, branch.server, record, verification, interrupted=verification.interrupted)
    return verification


def verify_again_each(session: Session, plan: Plan) -> list[Verification]:
    """``apply --verify-again``: watch and judge again each branch of the plan whose last deploy is unverified or
    failing and that the plan does not change (a new deploy replaces its state instead); its record takes the new
    outcome. Nothing is undone here (``gitops rollback`` does that): a failing deploy stays failing (exit 9)."""
    changing = {(b.server, b.branch) for b in plan.branches if b.steps}
    configs = {(c.server, c.branch): c for c in session.loaded.manifest.branches}
    out: list[Verification] = []
    for note in plan.unsettled:
        if (note.server, note.branch) in changing:
            continue
        config = configs.get((note.server, note.branch)) or next(
            (c for c in session.loaded.manifest.branches if c.verify is not None and c.verify.standby == note.branch),
            None,
        )
        settings = None if config is None else config.verify
        if settings is None:
            continue
        overrides = session.options.verify
        step = VerifyStep(
            ticks=overrides.ticks if overrides is not None and overrides.ticks else settings.ticks,
            error_share=settings.error_share,
            timeout=overrides.timeout if overrides is not None and overrides.timeout else settings.timeout,
            on_failure="report",
            fail_on=list(settings.fail_on),
        )
        ledger = session.ledger(note.server)
        record = ledger.verification(note.branch)
        applied = ledger.applied(note.branch)
        if record is None:
            continue
        label = f"{note.server}/{note.branch}"
        with session.options.interrupt.verifying():
            health = watch_after_deploy(
                session, note.server, step, None if applied is None else frozenset(applied.modules)
            )
        verification = Verification(label, health, interrupted=session.options.interrupt.is_set)
        end_watch(session, note.server, record, verification, interrupted=verification.interrupted)
        out.append(verification)
    return out


class OrderedOutcomes:
    """Hands each server's outcomes to ``progress`` in the servers' order: the first server's as they come, the
    next one's (held until then) once the first has finished, and so on; thread-safe."""

    def __init__(self, servers: list[str], progress: Callable[[Outcome], None] | None) -> None:
        self._servers = servers
        self._progress = progress
        self._held: dict[str, list[Outcome]] = {server: [] for server in servers}
        self._finished: set[str] = set()
        self._next = 0
        self._lock = threading.Lock()

    def add(self, server: str, outcome: Outcome) -> None:
        with self._lock:
            self._held[server].append(outcome)
            self._flush()

    def finish(self, server: str) -> None:
        with self._lock:
            self._finished.add(server)
            self._flush()

    def _flush(self) -> None:
        while self._next < len(self._servers):
            current = self._servers[self._next]
            for outcome in self._held[current]:
                if self._progress is not None:
                    self._progress(outcome)
            self._held[current] = []
            if current not in self._finished:
                return
            self._next += 1


def run_each(servers: list[str], job: Callable[[str], None]) -> dict[str, GitopsError]:
    """``job(server)`` for every server at the same time (:func:`gitops.app.gathering.run_concurrently`); the
    :class:`GitopsError` each failed server raised (any other exception is raised once all have ended)."""
    failures: dict[str, GitopsError] = {}

    def guarded(server: str) -> None:
        try:
            job(server)
        except GitopsError as exc:
            failures[server] = exc

    run_concurrently([functools.partial(guarded, server) for server in servers])
    return {server: failures[server] for server in servers if server in failures}


def combined_failure(plan: Plan, done: list[Outcome], failures: Mapping[str, GitopsError]) -> GitopsError:
    """One error for the servers that failed, with every step of the plan in its order: done, failed, or not run
    (the other servers went on; each branch is one whole upload). The worst exit code; the first failure's hint."""
    known = {(o.branch, o.step): o for o in done}
    for exc in failures.values():
        known.update({(o.branch, o.step): o for o in getattr(exc, "outcomes", []) if o.status != "done"})
    steps = [known.get((b.label, step)) or Outcome(b.label, step, "not-run") for b in plan.branches for step in b.steps]
    head = [
        f"apply failed on server '{server}': {exc.message.splitlines()[0] if exc.message else exc}"
        if isinstance(exc, ApplyError)
        else f"apply failed on server '{server}' before its first step: {exc.message}"
        for server, exc in failures.items()
    ]
    worst = max(failures.values(), key=lambda exc: exc.exit_code)
    error = ApplyError(
        "\n".join([*head, "What was done and what was not:", *("  " + o.line() for o in steps)]),
        hint=next(iter(failures.values())).hint,
    )
    error.exit_code = ExitCode(worst.exit_code)
    error.outcomes = steps
    return error


def apply_each(
    session: Session,
    plan: Plan,
    *,
    saved: bool,
    progress: Callable[[Outcome], None] | None = None,
) -> tuple[list[ApplyReport], dict[str, GitopsError]]:
    """Apply ``plan`` one server at a time (``apply --keep-going``): a server whose apply fails with one of
    :data:`gitops.app.gathering.SERVER_ERRORS` or an :class:`ApplyError` is recorded and the others still go on.

    Returns the report of each server that was applied and the error of each that failed. No confirmation is asked
    here: the caller asks once for the whole plan.
    """
    caught: tuple[type[GitopsError], ...] = (*SERVER_ERRORS, ApplyError)
    reports: list[ApplyReport] = []
    failures: dict[str, GitopsError] = {}
    for server in plan.servers():
        part = plan_for_server(plan, server)
        try:
            reports.append(run_apply(session, part, saved=saved, progress=progress))
        except caught as exc:
            failures[server] = exc
    return reports, failures


# --- the last applied record (drift) ---------------------------------------------------------------------------

Uploads = Mapping[tuple[str, str], Mapping[str, WireModule]]


def _record(session: Session, plan: Plan, branch: str, modules: Mapping[str, WireModule]) -> AppliedRecord | None:
    try:
        return record_from_wire(
            branch,
            modules,
            at=session.options.clock.now(),
            how="upload",
            commit=source_commit(plan.source),
            source=source_text(plan.source),
        )
    except ValueError:  # not modules the tool can digest: then no record (drift is not measured for it)
        return None


Records = Mapping[tuple[str, str], AppliedRecord]


def _records(session: Session, plan: Plan, uploads: Uploads) -> dict[tuple[str, str], AppliedRecord]:
    """The record of each set about to be uploaded (made once: the pending record and, when its step is done, the
    applied one)."""
    records: dict[tuple[str, str], AppliedRecord] = {}
    # One bot uploaded to several servers is one record (its digests are made once, not per server): equal modules
    # maps, usually of the very same strings, compare quickly.
    made: list[tuple[str, Mapping[str, WireModule], AppliedRecord | None]] = []
    for (server, branch), modules in uploads.items():
        known = [record for b, m, record in made if b == branch and m == modules]
        record = known[0] if known else _record(session, plan, branch, modules)
        if not known:
            made.append((branch, modules, record))
        if record is not None:
            records[(server, branch)] = record
    return records


def _record_pending(session: Session, records: Records) -> None:
    """Before anything is sent, each set about to be uploaded: an upload whose answer is lost may have landed, and
    finding its set on the server later is no drift (saved with the verification step)."""
    for (server, _branch), record in records.items():
        session.ledger(server).record_pending(record)


def _written_branches(plan: Plan, outcome: Outcome) -> list[BranchPlan]:
    """The branch whose modules ``outcome``'s finished step wrote: its upload, or the clone of a branch created with
    its modules (no upload step); none for any other step, or one that was not done."""
    if outcome.status != "done":
        return []
    return [
        branch
        for branch in plan.branches
        if branch.label == outcome.branch
        and (
            outcome.step.kind == "upload"
            or (outcome.step.kind == "clone-branch" and not any(step.kind == "upload" for step in branch.steps))
        )
    ]


def _record_history(session: Session, plan: Plan, uploads: Uploads, records: Records, outcome: Outcome) -> None:
    """A step that wrote a branch's modules is done: a deploy in the history, its code kept (``app/deploys.py``)."""
    for branch in _written_branches(plan, outcome):
        modules = uploads.get((branch.server, branch.branch))
        if modules is not None:
            made = records.get((branch.server, branch.branch))  # its digest, computed once for the applied record
            commit, how = source_commit(plan.source), session.options.deploy_how
            digest = None if made is None else made.digest
            record_deploy(session, branch.server, branch.branch, modules, commit, how, digest)
            if branch.verify is not None:
                # Unverified from now on, not from its own watch: a kill during another branch's watch (or any step
                # before this branch's) must not leave the deployed code without a state, which plan reads as settled.
                rollback = plan.rollback(branch.server, branch.branch)
                previous = None if rollback is None else rollback.modules
                begin_watch(session, branch, commit, previous, reason="deployed; its watch has not begun")


def _record_applied(session: Session, plan: Plan, records: Records, outcome: Outcome) -> None:
    """A step that wrote a branch's modules is done: they are its last applied record (stamped now). That is the
    upload, or the clone of a branch created with its modules (no upload step)."""
    for branch in _written_branches(plan, outcome):
        record = records.get((branch.server, branch.branch))
        if record is not None:
            session.ledger(branch.server).record_applied(replace(record, applied_at=session.options.clock.now()))
