"""The watch use case: deploy on every change, debounced, coalesced and paced under the day's upload limit.

``gitops watch`` (:func:`gitops.cli.watch.watch_command`) gives :func:`deploy_on_save` a :class:`ChangeSource`
(watchfiles, :mod:`gitops.edges.watching`), the run's options (whose clock paces the uploads) and a ``say`` callback;
tests give it a stop event and the stand-in's clock. :func:`classify` decides what a changed file means: a branch's
code (under the root of a branch without ``build``), a build's own output (not a change, else every build would
trigger the next), a source of the builds (anything else Git does not ignore), or the manifest (loaded again).

Each burst of changes becomes one plan and one apply through the same use cases as ``gitops apply``, so a save
deploys exactly what ``apply`` would. Uploads are paced (:class:`gitops.core.pace.Pacer`) so that the day's limit is
never spent; what waits is shown with the time it may go. Errors that need the person (credentials, the manifest)
end the watch; errors of the server or the network, a refused budget and bad local code are reported and retried at
the next change or after a backoff.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from gitops.app import pipeline
from gitops.app.applying import run_apply
from gitops.app.budgetgates import budget_error
from gitops.app.options import Options
from gitops.app.session import open_session
from gitops.app.targets import select
from gitops.config.manifest import LoadedManifest, load_manifest
from gitops.core.endpoints import UPLOAD
from gitops.core.pace import Pacer, default_uploads_per_hour
from gitops.edges.ignored import IgnoredFiles
from gitops.errors import AuthError, ExitCode, GitopsError, ManifestError, SourceError, UsageError
from gitops.render.outcome import (
    WATCH_MANIFEST_CHANGED,
    SaveDeployed,
    files_text,
    watch_deployed,
    watch_not_deployed,
    watch_nothing,
    watch_retrying,
    watch_started,
    watch_waiting,
)

if TYPE_CHECKING:
    from gitops.edges.ledger import Ledger

#: Default quiet time (seconds) that ends a burst of changes.
DEFAULT_DEBOUNCE = 1.0
#: First wait (seconds) after a failed deploy before it is tried again without a new change; doubles up to the max.
FIRST_BACKOFF = 15.0
MAX_BACKOFF = 300.0
#: How often (seconds) the loop looks at the clock while nothing changes.
POLL = 0.2
#: Exit codes that end the watch: the person must fix something before any deploy can work.
_NEEDS_THE_PERSON = (ExitCode.MANIFEST, ExitCode.CREDENTIALS)


class ChangeSource(Protocol):
    """Where changed files come from (watchfiles in the CLI; a queue in unit tests)."""

    def changes(self, timeout: float) -> set[Path]:
        """The paths changed since the last call, waiting up to ``timeout`` seconds for one; empty if none."""
        ...


@dataclass(frozen=True)
class WatchSettings:
    """``--debounce``, ``--max-uploads-per-hour`` (``None``: from the catalogue and ``budget.reserve``)."""

    debounce: float = DEFAULT_DEBOUNCE
    max_uploads_per_hour: int | None = None
    first_backoff: float = FIRST_BACKOFF
    max_backoff: float = MAX_BACKOFF
    poll: float = POLL


@dataclass
class WatchState:
    """What the loop knows between iterations (exposed for tests and for the final line)."""

    pending: set[str] = field(default_factory=set)
    last_change: float = 0.0
    retry_at: float | None = None
    backoff: float = 0.0
    waiting_shown: tuple[int, float] | None = None
    #: A deploy that needs more uploads than fit now waits until then (service clock).
    not_before: float = 0.0
    deploys: int = 0
    #: Upload requests sent (``POST /api/user/code``, retries included), whatever came of them; and of those, the
    #: ones whose deploy failed. Both count against the pace: the server may have counted every one.
    uploads: int = 0
    failed_uploads: int = 0
    deploying: bool = False


def classify(path: Path, loaded: LoadedManifest, ignored: IgnoredFiles, state_dir: Path | None) -> str | None:
    """What a changed path means: ``"manifest"``, ``"code"`` (deploy), or ``None`` (not a change to deploy)."""
    base = loaded.base_dir
    try:
        rel = path.resolve().relative_to(base).as_posix() if path.is_absolute() else path.as_posix()
    except ValueError:
        return None
    if path.is_absolute() and path.resolve() == loaded.path:
        return "manifest"
    if rel == ".git" or rel.startswith(".git/"):
        return None
    if state_dir is not None:
        try:
            path.resolve().relative_to(state_dir.resolve())
            return None
        except ValueError:
            pass
    manifest = loaded.manifest
    built = False
    for branch in manifest.branches:
        has_build = (branch.build if branch.build is not None else manifest.build) is not None
        built = built or has_build
        root = branch.root.strip("/")
        inside = root in ("", ".") or rel == root or rel.startswith(root + "/")
        if not inside or root in ("", "."):
            continue
        if has_build:
            return None  # the build's output
        if ignored.covers(root) or not ignored.covers(rel):
            return "code"
        return None
    if ignored.covers(rel):
        return None
    if built:
        return "code"  # a source of the builds
    # No build: only the roots count; a root "." (flat layout) takes every file Git does not ignore.
    return "code" if any(b.root.strip("/") in ("", ".") for b in manifest.branches) else None


def deploy_on_save(
    options: Options,
    source: ChangeSource,
    say: Callable[[str], None],
    *,
    settings: WatchSettings | None = None,
    stop: threading.Event | None = None,
    monotonic: Callable[[], float] = time.monotonic,
    state: WatchState | None = None,
) -> WatchState:
    """Deploy on every change until ``stop`` is set (or Ctrl-C); returns what it did.

    Raises :class:`ManifestError` (5), :class:`AuthError` (7: credentials missing or refused) and
    :class:`UsageError` (4: a pace of 0) — the problems the person must fix. A ``KeyboardInterrupt`` while idle
    ends the watch normally (it returns); during a deploy it is raised again (the deploy may be incomplete).
    """
    settings = settings or WatchSettings()
    state = state or WatchState()
    loaded = select(load_manifest(options.manifest), options.targets)
    per_hour = settings.max_uploads_per_hour
    if per_hour is None:
        per_hour = default_uploads_per_hour(loaded.manifest.budget.reserve or {})
    if per_hour < 1:
        raise UsageError(
            "watch may make no upload: budget.reserve keeps the whole day's POST /api/user/code limit",
            hint="Lower budget.reserve in the manifest, or give --max-uploads-per-hour.",
        )
    pacer = Pacer(per_hour)
    ignored = IgnoredFiles.ask_git(loaded.base_dir)
    labels = [f"{b.server}/{b.branch}" for b in loaded.manifest.branches]
    say(watch_started(loaded.base_dir, labels, per_hour, settings.debounce))
    state.pending.add("(start)")  # the first round deploys what is not on the server yet
    state.last_change = monotonic() - settings.debounce
    try:
        while stop is None or not stop.is_set():
            for path in source.changes(settings.poll):
                kind = classify(path, loaded, ignored, options.state_dir)
                if kind == "manifest":
                    loaded = select(load_manifest(options.manifest), options.targets)
                    say(WATCH_MANIFEST_CHANGED)
                if path.name == ".gitignore":
                    ignored = IgnoredFiles.ask_git(loaded.base_dir)
                if kind is not None:
                    state.pending.add(_relative(path, loaded))
                    state.last_change = monotonic()
                    state.retry_at = None  # a new change retries at once (after the debounce)
            if not state.pending or monotonic() - state.last_change < settings.debounce:
                continue
            if state.retry_at is not None and monotonic() < state.retry_at:
                continue
            now = options.clock.now()
            slot = max(pacer.next_slot(now), state.not_before)
            if slot > now:
                shown = (len(state.pending), slot)
                if state.waiting_shown != shown:
                    state.waiting_shown = shown
                    say(watch_waiting(state.pending, per_hour, slot, now))
                continue
            _deploy_round(options, loaded, pacer, state, settings, say, monotonic)
    except KeyboardInterrupt:
        if state.deploying:
            raise
    return state


def _relative(path: Path, loaded: LoadedManifest) -> str:
    try:
        return path.resolve().relative_to(loaded.base_dir).as_posix()
    except ValueError:
        return path.as_posix()


def _deploy_round(
    options: Options,
    loaded: LoadedManifest,
    pacer: Pacer,
    state: WatchState,
    settings: WatchSettings,
    say: Callable[[str], None],
    monotonic: Callable[[], float],
) -> None:
    """One plan and apply of what is pending; its outcome is one line."""
    changed = files_text(state.pending - {"(start)"}) or "start of watch"
    state.deploying = True
    try:
        with open_session(options, loaded) as session:
            plan = pipeline.make_or_load(session, isolate=False)
            if not plan.has_changes:
                state.pending.clear()
                say(watch_nothing(changed))
                return
            now = options.clock.now()
            slot = pacer.next_slot(now, plan.uploads_needed)
            if slot > now:
                state.not_before = slot  # shown by the loop at its next turn, with the time
                return
            refusal = budget_error(plan, session)
            if refusal is not None:
                raise refusal
            before = {
                id(session.ledger(server)): (session.ledger(server), session.ledger(server).sequence)
                for server in session.servers()
            }
            try:
                report = run_apply(session, plan, saved=False)
            except BaseException:
                sent = _uploads_sent(before)
                pacer.record(options.clock.now(), sent)
                state.uploads += sent
                state.failed_uploads += sent
                raise
            sent = _uploads_sent(before)
            pacer.record(options.clock.now(), sent)
            state.deploys += 1
            state.uploads += sent
            now = options.clock.now()
            deployed = SaveDeployed(
                at=now,
                labels=[b.label for b in plan.branches if b.has_changes],
                changed=changed,
                sent=sent,
                budget=plan.budget,
                not_rate_limited=plan.not_rate_limited,
                left_this_hour=pacer.left(now),
                complete=report.applied,
            )
            say(watch_deployed(deployed))
        state.pending.clear()
        state.retry_at = None
        state.backoff = 0.0
        state.waiting_shown = None
        state.not_before = 0.0
    except (ManifestError, AuthError):
        raise
    except SourceError as exc:
        # The person is editing: wait for the next change (no backoff retry of the same broken code).
        state.pending.clear()
        say(watch_not_deployed(changed, exc.message))
    except GitopsError as exc:
        if exc.exit_code in _NEEDS_THE_PERSON:  # an apply stopped by refused credentials
            raise
        _retry_later(state, settings, monotonic, say, exc)
    finally:
        state.deploying = False


def _uploads_sent(before: dict[int, tuple[Ledger, int]]) -> int:
    """The upload requests the ledgers recorded since ``before`` (ledger -> its request number then)."""
    return sum(ledger.sent_after(UPLOAD, sequence) for ledger, sequence in before.values())


def _retry_later(
    state: WatchState,
    settings: WatchSettings,
    monotonic: Callable[[], float],
    say: Callable[[str], None],
    exc: GitopsError,
) -> None:
    state.backoff = min(settings.max_backoff, max(settings.first_backoff, state.backoff * 2))
    state.retry_at = monotonic() + state.backoff
    say(watch_retrying(exc.message, state.backoff))
