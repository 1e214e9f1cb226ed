"""The rehearsal use case: run each branch's code in a throwaway world of the real private server and judge it.

The code is read and built exactly as ``plan`` reads it (:func:`gitops.app.localcode.read_code`: the working tree,
or ``--ref``; the base commit's with ``--base``). One world runs every bot at once (each branch's head, and its base,
as a user of its own with a room and a spawn), so both sides tick under the same load; the world's life cycle is
``gitops.edges.privateserver``'s, the figures and the comparison ``gitops.core.rehearsal``'s, and the verdict the
verify judge's (``gitops.core.health``). It never prints: ``say`` gets the progress lines.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gitops.app.localcode import read_code
from gitops.app.targets import Targets, select
from gitops.app.verifying import SETTLE_TICKS
from gitops.config.manifest import LoadedManifest
from gitops.core.health import ConsoleEvent, Thresholds, group_ticks
from gitops.core.local import LocalBranch, LocalCode
from gitops.core.rehearsal import DEFAULT_TICKS, Side, compare, side
from gitops.core.rehearsalresult import RehearsalResult
from gitops.edges.build import SKIP_BUILD_VARIABLE
from gitops.edges.codesetfile import read_codeset
from gitops.edges.privateserver import Bot, Recording, find_install, running_world
from gitops.edges.socket import console_event
from gitops.errors import ExitCode, SourceError


@dataclass(frozen=True, slots=True)
class RehearsalRequest:
    """What to rehearse: the code at ``ref`` (``None``: the working tree), compared with ``base`` if given."""

    ticks: int = DEFAULT_TICKS
    ref: str | None = None
    base: str | None = None
    #: Seconds the world may tick (``None``: :func:`default_timeout`).
    timeout: float | None = None
    #: An installed server (``--server-dir``); else ``$GITOPS_PRIVATE_SERVER``, else the cache's.
    server_dir: Path | None = None
    #: The base's code from a code set file (``--base-codeset``), built elsewhere, instead of ``base``; and the
    #: commit it must have been built from (the Action: the pull request's base.sha; empty: any).
    base_codeset: Path | None = None
    base_commit: str = ""
    targets: Targets = field(default_factory=Targets)


@dataclass(frozen=True, slots=True)
class Rehearsal(RehearsalResult):
    """A rehearsal that ran: what it found (what the result file holds: :mod:`gitops.core.rehearsalresult`), and
    how long it took."""

    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        return {"healthy": ExitCode.OK, "failing": ExitCode.UNHEALTHY, "unknown": ExitCode.REHEARSAL_UNKNOWN}[
            self.result
        ]

    def document(self) -> dict[str, object]:
        """``--json``: the verdict, the first branch's ``head`` and ``base`` at the top, and every branch."""
        first = self.branches[0] if self.branches else None
        return {
            "result": self.result,
            "ticks": self.ticks,
            "head_source": self.head_source,
            "base_source": self.base_source,
            "head": None if first is None else first.head.to_json(),
            "base": None if first is None or first.base is None else first.base.to_json(),
            "branches": [c.to_json() for c in self.branches],
        }


def default_timeout(ticks: int, bots: int) -> float:
    """How long the world may take for ``ticks`` ticks of ``bots`` bots: generous (a tick of a small bot takes
    ~0.1 s on a 2-core machine), and bounded."""
    return 60.0 + ticks * 0.5 * max(1, bots)


def rehearse(
    loaded: LoadedManifest,
    request: RehearsalRequest,
    env: Mapping[str, str],
    *,
    say: Callable[[str], None] = lambda _: None,
    clock: Callable[[], float] | None = None,
) -> Rehearsal:
    """Read (and build) the code as ``plan`` would, run it in one throwaway world, and judge each branch."""
    now = clock or time.monotonic
    started = now()
    loaded = select(loaded, request.targets)
    head = read_code(loaded, request.ref, env)
    # The base commit is never the working tree that an earlier `gitops build` built (GITOPS_SKIP_BUILD): it is
    # built in its temporary checkout, without credentials, as every build.
    base_env = {name: value for name, value in env.items() if name != SKIP_BUILD_VARIABLE}
    base = _read_base(loaded, request.base, base_env) if request.base is not None else None
    if request.base_codeset is not None:  # built in a job of its own: nothing of the repository runs here
        base = read_codeset(request.base_codeset, loaded, base_of=request.base_commit)
    install = find_install(env, request.server_dir, say=say)
    base_by_label = {b.label: b for b in base.branches} if base is not None else {}
    wanted = SETTLE_TICKS + request.ticks + 1  # the last one only closes the one before (its error may follow it)
    with running_world(install, env) as world:
        seeded: list[tuple[LocalBranch, Bot, LocalBranch | None, Bot | None]] = []
        for branch in head.branches:
            head_bot = world.seed(branch.code.wire())
            base_branch = base_by_label.get(branch.label)
            base_bot = world.seed(base_branch.code.wire()) if base_branch is not None else None
            seeded.append((branch, head_bot, base_branch, base_bot))
        bots = len(world.bots)
        timeout = request.timeout if request.timeout is not None else default_timeout(request.ticks, bots)
        say(f"rehearse: {bots} bot(s) in a throwaway world on 127.0.0.1:{world.port}; {request.ticks} ticks each")

        def enough(recordings: dict[str, Recording]) -> bool:
            return all(_console_ticks(r) >= wanted for r in recordings.values())

        recordings, problem = world.run(enough, timeout)
    comparisons = []
    for branch, head_bot, base_branch, base_bot in seeded:
        thresholds = _thresholds(loaded, branch, request.ticks)
        head_side = _side("head", branch, recordings[head_bot.user_id], thresholds, problem, timeout, head)
        base_side = None
        if base_branch is not None and base_bot is not None and base is not None:
            base_side = _side("base", base_branch, recordings[base_bot.user_id], thresholds, problem, timeout, base)
        comparisons.append(compare(branch.label, head_side, base_side))
    return Rehearsal(
        ticks=request.ticks,
        head_source=head.source.describe(),
        base_source=base.source.describe() if base is not None else None,
        branches=tuple(comparisons),
        seconds=now() - started,
    )


def _read_base(loaded: LoadedManifest, ref: str, env: Mapping[str, str]) -> LocalCode:
    try:
        return read_code(loaded, ref, env)
    except SourceError as exc:  # its words name --ref: here the ref came from --base
        raise SourceError(exc.message.replace(f"--ref {ref}", f"--base {ref}"), hint=exc.hint) from None


def _console_ticks(recording: Recording) -> int:
    return sum(1 for message in recording.console if isinstance(message, dict) and "messages" in message)


def _thresholds(loaded: LoadedManifest, branch: LocalBranch, ticks: int) -> Thresholds:
    """The branch's ``verify:`` thresholds (the defaults without one), for ``ticks`` ticks."""
    for config in loaded.manifest.branches:
        if config.server == branch.server and config.branch == branch.branch and config.verify is not None:
            return Thresholds(ticks=ticks, error_share=config.verify.error_share, fail_on=tuple(config.verify.fail_on))
    return Thresholds(ticks=ticks)


def _side(
    label: str,
    branch: LocalBranch,
    recording: Recording,
    thresholds: Thresholds,
    problem: str | None,
    timeout: float,
    local: LocalCode,
) -> Side:
    events: list[ConsoleEvent] = [e for e in (console_event(m) for m in recording.console) if e is not None]
    ticks = group_ticks(events)[SETTLE_TICKS:][: thresholds.ticks]
    # One cpu message a tick, published before the tick's console message: the same ticks, by position.
    window = recording.cpu[SETTLE_TICKS : SETTLE_TICKS + len(ticks)]
    cpu: list[float | None] = [
        float(m["cpu"]) if isinstance(m, dict) and isinstance(m.get("cpu"), int | float) else None for m in window
    ]
    memory = next(
        (m["memory"] for m in reversed(window) if isinstance(m, dict) and isinstance(m.get("memory"), int)), None
    )
    modules = [m.name for m in branch.code]
    return side(
        label,
        ticks,
        cpu,
        memory,
        thresholds,
        modules,
        problem=problem,
        timeout=timeout,
        commit=local.source.commit,
    )


__all__ = ["DEFAULT_TICKS", "Rehearsal", "RehearsalRequest", "default_timeout", "rehearse"]
