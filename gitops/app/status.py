"""``gitops status``: per branch, the code the server holds now, checked on the server where the budget allows.

The ledger says what this tool last applied (commit, time) and how its verification went; that is its word, not
the server's. So status asks each server: the branch list (the global limit only) for which branches exist and
are active, and for the code it carries (private servers, the stand-in) or its modification stamp; a download
(``GET /api/user/code``, 60 per hour) for a branch the list cannot confirm, only when it fits what is known to
remain. What it found is compared with the last applied record (``gitops.core.drift.compare``): the same code,
drift (an edit made outside Git), or, when nothing could be checked, the ledger's word labelled as such. A server
that cannot be asked (unreachable, the token refused) is shown from the ledger and makes the command fail with that
error's exit code (1 or 7), after the rows: status never exits 0 when it cannot say what runs. It never prints.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitops.app.budgetgates import check_download_budget
from gitops.app.deploys import session_names
from gitops.app.gathering import SERVER_ERRORS, learn_server
from gitops.app.session import Session
from gitops.core.deploys import BranchStatus
from gitops.core.drift import compare
from gitops.core.remote import BranchInfo, Judgement, RemoteBranch, RemoteView, how_to_learn
from gitops.errors import BudgetError, GitopsError, RateLimitedError, ScopeError
from gitops.secrets import redact


@dataclass(frozen=True, slots=True)
class StatusReport:
    """Every branch's status, and the error of each server that could not be asked (status fails with it)."""

    rows: list[BranchStatus]
    failures: dict[str, GitopsError]


def status(session: Session) -> StatusReport:
    """Per server and branch of the session: what the server holds now (checked where the budget allows), against
    the ledger's records; a server that fails is shown from the ledger, and its error is in the report."""
    rows: list[BranchStatus] = []
    failures: dict[str, GitopsError] = {}
    for server in session.servers():
        view: RemoteView | None = None
        listing: list[BranchInfo] | None = None
        unchecked = None
        try:
            view, listing, unchecked = _ask(session, server)
        except SERVER_ERRORS as exc:
            failures[server] = exc
        finally:
            session.save(server)
        rows.extend(_rows(session, server, view, listing, unchecked, failures.get(server)))
    session.save()
    return StatusReport(rows, failures)


def _ask(session: Session, server: str) -> tuple[RemoteView, list[BranchInfo] | None, str | None]:
    """The server's view of the branches with a record (the list, then the downloads that fit), the branch list
    (``None``: a token without it), and why some branches were not checked (the download budget), if so."""
    ledger = session.ledger(server)
    reader = session.reader(server)
    listing: list[BranchInfo] | None
    try:
        listing = reader.list_branches()
    except ScopeError:  # a token restricted to the code endpoints: the downloads say whether each branch exists
        listing = None
    listed_at = session.options.clock.now()
    entries = {b.name: b for b in listing or ()}
    judged: dict[str, Judgement] = {
        # The trust window of the tool's own uploads is a plan's saving; status is asked what runs now (0 s).
        name: how_to_learn(
            ledger.remembered_branch(name),
            entries.get(name),
            listing_known=listing is not None,
            refresh="auto",
            needs_content=False,
            trust_seconds=0.0,
            now=listed_at,
        )
        for name in sorted(session_names(session, server))
        if ledger.applied(name) is not None or ledger.pending(name) is not None
    }
    unchecked = None
    downloads = sum(1 for j in judged.values() if j == "download")
    try:
        check_download_budget(session, server, downloads, doing="status", instead="Wait")
    except BudgetError as exc:
        # Not a failure: the ledger's word is shown instead, labelled with why it was not checked.
        unchecked = redact(exc.message.splitlines()[-1].strip(" -"))
        judged = {name: "unverified" if j == "download" else j for name, j in judged.items()}
    try:
        view = learn_server(session, server, listing, listed_at, judged, "auto")
    except RateLimitedError as exc:
        # The server refused a download the ledger thought would fit (requests spent elsewhere): the list was read,
        # so the server answers; what it holds is then the ledger's word, labelled with the refusal.
        unchecked = redact(exc.message.splitlines()[0])
        judged = {name: "unverified" if j == "download" else j for name, j in judged.items()}
        view = learn_server(session, server, listing, listed_at, judged, "auto")
    return view, listing, unchecked


def _rows(
    session: Session,
    server: str,
    view: RemoteView | None,
    listed: list[BranchInfo] | None,
    unchecked: str | None,
    failure: GitopsError | None,
) -> list[BranchStatus]:
    ledger = session.ledger(server)
    flags = {
        b.name: tuple(w for w, on in (("world", b.active_world), ("sim", b.active_sim)) if on) for b in listed or ()
    }
    problem = None if failure is None else redact(failure.message.splitlines()[0])
    out: list[BranchStatus] = []
    for name in sorted(session_names(session, server)):
        applied = ledger.applied(name)
        record = ledger.verification(name)
        if applied is None and record is None and name not in flags:
            continue
        current: RemoteBranch | None = None if view is None else view.branches.get(name)
        pending = ledger.pending(name)
        drift = compare(current, applied, pending)
        if drift.pending_landed and pending is not None:
            ledger.record_applied(pending)  # its answer was lost, but it landed: that is the last applied code now
            applied = pending
        checked = current.current_basis if current is not None and current.verified else None
        out.append(
            BranchStatus(
                server,
                name,
                None if listed is None else name in flags,
                flags.get(name, ()),
                applied.commit if applied is not None else (record.commit if record else None),
                applied.applied_at if applied is not None else (record.applied_at if record else None),
                applied.digest if applied is not None else (record.digest if record else None),
                record,
                problem,
                drift if applied is not None else None,
                checked,
                None if checked is None or current is None else current.checked_at,
                unchecked if checked is None and failure is None else None,
            )
        )
    return out


def status_failure(report: StatusReport) -> GitopsError | None:
    """The error ``gitops status`` fails with after its rows, when a server could not be asked (the worst exit
    code of them; its hint), else ``None``."""
    if not report.failures:
        return None
    worst = max(report.failures.values(), key=lambda exc: exc.exit_code)
    names = ", ".join(f"'{s}'" for s in report.failures)
    error = GitopsError(
        f"status cannot say what runs on server {names}: {redact(worst.message.splitlines()[0])}; the rows above "
        "for it are the ledger's word, not checked on the server",
        hint=worst.hint,
    )
    error.exit_code = worst.exit_code
    return error


__all__ = ["StatusReport", "status", "status_failure"]
