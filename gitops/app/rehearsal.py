"""The rehearsal use case: run each branch's code in a throwaway world of the real private server and judge it.

The code is read and built exactly as ``plan`` reads it (:func:`gitops.app.localcode.read_code`: the working tree,
or ``--ref``; the base commit's with ``--base``). One world runs the head's bots (a user of its own each, with a room
and a spawn); with ``--base`` a second world from the same database runs the base's, each in the same room as its
head, side by side, so both sides start alike and tick under the same load; the worlds' life cycle is
``gitops.edges.privateserver``'s, the figures and the comparison ``gitops.core.rehearsal``'s, and the verdict the
verify judge's (``gitops.core.health``). It never prints: ``say`` gets the progress lines.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from gitops.app.localcode import check_syntax, read_code
from gitops.app.targets import Targets, select
from gitops.config.manifest import LoadedManifest
from gitops.core.colony import Colony
from gitops.core.health import SETTLE_TICKS, ConsoleEvent, Health, Thresholds, console_event, group_ticks
from gitops.core.local import LocalBranch, LocalCode
from gitops.core.rehearsal import DEFAULT_TICKS, Side, compare, side
from gitops.core.rehearsalresult import RehearsalResult
from gitops.core.sourcemap import SourceMap, SourceMapError
from gitops.edges.build import SKIP_BUILD_VARIABLE
from gitops.edges.codesetfile import read_codeset
from gitops.edges.privateserver import (
    DEFAULT_BUCKET,
    DEFAULT_CPU,
    Bot,
    Recording,
    World,
    WorldLost,
    launched_worlds,
    ready_worlds,
    run_worlds,
    running_worlds,
)
from gitops.edges.serverinstall import find_install, ready_install
from gitops.edges.worldseed import plant_colony
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
    #: ``--from-server``: the account's colony (:func:`gitops.app.colonycopy.copy_colony`), copied for every bot.
    colony: Colony | None = None
    #: Each bot's CPU limit and its bucket at the start (``--cpu``, ``--bucket``); ``None``: its server's ``cpu:``
    #: in the manifest, else :data:`DEFAULT_CPU` and :data:`DEFAULT_BUCKET`.
    cpu: int | None = None
    bucket: int | None = None


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
    # The world first, when its install is there already: node starts it (about half a second, on the other core of
    # two) while this process reads and checks the code. Stopped on every way out, an error in the code included.
    install = ready_install(env, request.server_dir)
    with contextlib.ExitStack() as stack:
        early = None
        if install is not None:
            count = 1 if request.base is None and request.base_codeset is None else 2
            early = stack.enter_context(launched_worlds(install, env, count, rooms=len(loaded.manifest.branches)))
        head, base = _read_sides(loaded, request, env)
        if install is None:
            install = find_install(env, request.server_dir, say=say)
        base_by_label = {b.label: b for b in base.branches if "main" in b.code} if base is not None else {}
        # Two worlds from the same database when there is a base: each base bot in the same room, with the same
        # neighbours and spawn place, as its head (core/rehearsalworld.py); they tick side by side.
        worlds = 2 if base_by_label else 1
        launched = [] if early is None else [_launched(early, worlds, len(head.branches))]

        def in_worlds() -> _WorldRun:
            first = launched.pop() if launched else None  # a second run (a world lost) starts fresh worlds
            return _run_in_worlds(install, env, worlds, loaded, request, head, base_by_label, say, first)

        seeded, recordings, problem, timeout = once_more_if_lost(in_worlds, say)
    comparisons = []
    for branch, head_bot, base_branch, base_bot in seeded:
        thresholds = _thresholds(loaded, branch, request.ticks)
        head_side = _side("head", branch, recordings[head_bot.user_id], thresholds, problem, timeout, head)
        base_side = None
        if base_branch is not None and base_bot is not None and base is not None:
            base_side = _side("base", base_branch, recordings[base_bot.user_id], thresholds, problem, timeout, base)
        elif base is not None and any(b.label == branch.label for b in base.branches):
            base_side = _no_main("base", thresholds, base)
        comparisons.append(compare(branch.label, head_side, base_side))
    return Rehearsal(
        ticks=request.ticks,
        head_source=head.source.describe(),
        base_source=base.source.describe() if base is not None else None,
        branches=tuple(comparisons),
        seconds=now() - started,
    )


def _read_sides(
    loaded: LoadedManifest, request: RehearsalRequest, env: Mapping[str, str]
) -> tuple[LocalCode, LocalCode | None]:
    """The head's code and the base's (``None`` without a base), read and built as ``plan`` would, and validate's
    checks on them: code that does not parse, or a head with no main, is the bot's (exit 6)."""
    head = read_code(loaded, request.ref, env)
    # The base commit is never the working tree that an earlier `gitops build` built (GITOPS_SKIP_BUILD): it is
    # built in its temporary checkout, without credentials, as every build.
    base_env = {name: value for name, value in env.items() if name != SKIP_BUILD_VARIABLE}
    base = _read_base(loaded, request.base, base_env) if request.base is not None else None
    if request.base_codeset is not None:  # built in a job of its own: nothing of the repository runs here
        base = read_codeset(request.base_codeset, loaded, base_of=request.base_commit)
    check_syntax(head)
    _require_main(head)
    if base is not None:
        check_syntax(base)
    return head, base


def _launched(early: list[World], worlds: int, rooms: int) -> list[World] | None:
    """The worlds launched before the code was read, as many as the rehearsal runs (a base without main runs in
    none: its world stops now), or ``None`` when they were made for another number of bots (fresh ones start)."""
    if len(early) < worlds or early[0].rooms != rooms:
        for world in early:
            world.stop()
        return None
    for spare in early[worlds:]:
        spare.stop()
    return early[:worlds]


_T = TypeVar("_T")

#: What a run in the worlds gives back: each branch's bots, their recordings, why ``enough`` was not reached, and the
#: timeout it had.
_Seeded = list[tuple[LocalBranch, Bot, LocalBranch | None, Bot | None]]
_WorldRun = tuple[_Seeded, dict[str, Recording], str | None, float]


def once_more_if_lost(run: Callable[[], _T], say: Callable[[str], None]) -> _T:
    """``run()``, and once more in fresh worlds when a world's server stopped answering (:class:`WorldLost`: its
    admin CLI refused or reset the connection, seen once in a few hundred starts on a loaded machine): the worlds are
    throwaway, and a second loss is the verdict's (exit 14)."""
    try:
        return run()
    except WorldLost as exc:
        say(f"rehearse: {exc.message}; starting fresh throwaway world(s), once")
    return run()


def _run_in_worlds(
    install: Path,
    env: Mapping[str, str],
    worlds: int,
    loaded: LoadedManifest,
    request: RehearsalRequest,
    head: LocalCode,
    base_by_label: Mapping[str, LocalBranch],
    say: Callable[[str], None],
    launched: list[World] | None = None,
) -> _WorldRun:
    """Start ``worlds`` worlds (or wait for those ``launched`` already), seed each head branch (and its base) as a
    bot, copy the colony, tick until every bot has its ticks or the timeout passes; the worlds are stopped on the
    way out."""
    wanted = SETTLE_TICKS + request.ticks + 1  # the last one only closes the one before (its error may follow it)
    with contextlib.ExitStack() as stack:
        if launched is None:
            opened = stack.enter_context(running_worlds(install, env, worlds, rooms=len(head.branches)))
        else:
            opened = launched
            for world in opened:
                stack.callback(world.stop)
            ready_worlds(opened)
        seeded: _Seeded = []
        for slot, branch in enumerate(head.branches):
            cpu, bucket = cpu_of(loaded, branch, request)
            head_bot = opened[0].seed(branch.code.wire(), slot, cpu=cpu, bucket=bucket)
            base_branch = base_by_label.get(branch.label)
            base_bot = None
            if base_branch is not None:
                base_bot = opened[-1].seed(base_branch.code.wire(), slot, cpu=cpu, bucket=bucket)
            seeded.append((branch, head_bot, base_branch, base_bot))
        if request.colony is not None:  # every bot, head and base, on its own identical copy
            for world in opened:
                for bot in list(world.bots):
                    plant_colony(world, bot, request.colony, tag=bot.user_id)
            say(f"rehearse: the colony of {request.colony.describe()} copied for each bot")
        bots = sum(len(world.bots) for world in opened)
        timeout = request.timeout if request.timeout is not None else default_timeout(request.ticks, len(head.branches))
        where = " and ".join(f"127.0.0.1:{world.cli_port}" for world in opened)
        say(
            f"rehearse: {bots} bot(s) in {'two throwaway worlds' if worlds == 2 else 'a throwaway world'} on {where}"
            f"{', head and base in the same room of each' if worlds == 2 else ''}; {request.ticks} ticks each"
        )

        def enough(recordings: dict[str, Recording]) -> bool:
            return all(_console_ticks(r) >= wanted for r in recordings.values())

        recordings, problem = run_worlds(opened, enough, timeout)
    return seeded, recordings, problem, timeout


def _read_base(loaded: LoadedManifest, ref: str, env: Mapping[str, str]) -> LocalCode:
    try:
        return read_code(loaded, ref, env)
    except SourceError as exc:  # its words name --ref: here the ref came from --base
        raise SourceError(exc.message.replace(f"--ref {ref}", f"--base {ref}"), hint=exc.hint) from None


def cpu_of(loaded: LoadedManifest, branch: LocalBranch, request: RehearsalRequest) -> tuple[int, int]:
    """The CPU limit and bucket of ``branch``'s bots: the command line's, else its server's ``cpu:`` in the
    manifest, else (the limit, with ``--from-server``) the account's own as its server states it, else
    :data:`DEFAULT_CPU` and :data:`DEFAULT_BUCKET` (docs/rehearsal.md)."""
    server = loaded.manifest.servers.get(branch.server)
    config = server.cpu if server is not None else None
    account = request.colony.cpu if request.colony is not None else None
    fallback = account if account is not None else DEFAULT_CPU
    limit = request.cpu if request.cpu is not None else config.limit if config is not None else fallback
    bucket = request.bucket if request.bucket is not None else config.bucket if config is not None else DEFAULT_BUCKET
    return limit, bucket


def _require_main(local: LocalCode) -> None:
    """:class:`SourceError` (exit 6, as validate's check) for a branch whose code has no module ``main``: the server
    would run nothing, and every tick would say so. The bot's fault, found before any bot runs."""
    for branch in local.branches:
        if "main" not in branch.code:
            raise SourceError(
                f"{branch.label}: the code from the {local.source.describe()} has no module 'main': the server runs "
                "main's loop, so this bot's code would not run at all (the bot's fault, not the server's)",
                hint="Add main.js (or the build's output named main) to the branch's files.",
            )


def _no_main(label: str, thresholds: Thresholds, local: LocalCode) -> Side:
    """The base's side when its code has no ``main``: failing, without a world (it could run nothing)."""
    reason = "no module 'main': the base's code does not run (the bot's fault, not the server's)"
    return Side(label, Health("failing", reason), thresholds.ticks, thresholds.ticks, commit=local.source.commit)


def source_maps(branch: LocalBranch) -> dict[str, SourceMap]:
    """The branch's uploaded source maps (modules ``NAME.js.map``) that can be read, by module name."""
    maps: dict[str, SourceMap] = {}
    for module in branch.code:
        if module.name.endswith(".js.map") and module.text is not None:
            try:
                maps[module.name] = SourceMap.parse(module.text)
            except SourceMapError:
                continue  # a map this reader cannot read: the bundle's own lines are shown
    return maps


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
    # One cpu message a tick that ran (a tick not run for an empty bucket has none), published before the tick's
    # console message: the ticks that ran, by position.
    window = recording.cpu[SETTLE_TICKS : SETTLE_TICKS + len(ticks)]
    cpu: list[float | None] = [
        float(m["cpu"]) if isinstance(m, dict) and isinstance(m.get("cpu"), int | float) else None for m in window
    ]
    sizes = [float(m["memory"]) for m in window if isinstance(m, dict) and isinstance(m.get("memory"), int)]
    memory = int(sizes[-1]) if sizes else None
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
        maps=source_maps(branch),
        memory=sizes,
    )


__all__ = [
    "DEFAULT_TICKS",
    "Rehearsal",
    "RehearsalRequest",
    "cpu_of",
    "default_timeout",
    "rehearse",
    "source_maps",
]
