"""A rehearsal's figures and its comparison with the base (pure: no I/O, no clock).

``gitops rehearse`` runs a branch's code in a throwaway world of the real private server (``app/rehearsal.py``)
and gets back what the game published for the bot: its console messages (judged by
:func:`gitops.core.health.judge_ticks`, the same judge as ``verify``) and its ``cpu`` messages (``{"cpu": N,
"memory": BYTES}`` every tick, ``"error"`` for a tick the server terminated). This module turns them into one
:class:`Side`: failed ticks, the distinct errors with the bot's file and line, the CPU used per tick (mean, 95th
percentile, max) and the memory size at the end; and weighs the head against the base (:class:`Comparison`).
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from gitops.core.health import Health, Status, Thresholds, Tick, judge_ticks

#: Ticks a rehearsal runs unless told (``--ticks``, the Action's ``rehearse-ticks``).
DEFAULT_TICKS = 100
#: How many distinct errors a side keeps.
MAX_ERRORS = 10
#: One frame's place in a stack line: ``at f (main:12:5)``, ``at main:12:5``, ``at loop (src/main.ts:12:5)``.
_FRAME = re.compile(r"^\s*at (?:.*? \()?(?P<file>[^\s()]+?):(?P<line>\d+)(?::\d+)?\)?\s*$")
#: Places that are the game's runtime, never the bot's.
_RUNTIME = ("<", "@screeps", "node_modules", "__mainLoop", "evalmachine", "internal/")


@dataclass(frozen=True, slots=True)
class CpuStats:
    """CPU used per tick (milliseconds, as the game counts it), over the ticks that reported a number."""

    samples: int
    mean: float
    p95: float
    max: float

    def to_json(self) -> dict[str, object]:
        return {"samples": self.samples, "mean": round(self.mean, 3), "p95": round(self.p95, 3), "max": self.max}


@dataclass(frozen=True, slots=True)
class ErrorSite:
    """One distinct error: its first line, where in the bot's code it came from (``main:12``), how many ticks."""

    message: str
    where: str | None
    count: int

    def to_json(self) -> dict[str, object]:
        return {"message": self.message, "where": self.where, "count": self.count}


@dataclass(frozen=True, slots=True)
class Side:
    """What one side (``head`` or ``base``) of a rehearsal did."""

    label: str
    health: Health
    ticks: int
    failed_ticks: int
    errors: tuple[ErrorSite, ...] = ()
    cpu: CpuStats | None = None
    #: Ticks the server terminated (``cpu: "error"``: the CPU limit, or a run that timed out).
    cpu_terminations: int = 0
    #: ``JSON.stringify(Memory).length`` after the last tick, from its cpu message.
    memory_bytes: int | None = None
    commit: str | None = None
    #: The CPU used in each tick that reported a number, in tick order (the comment's chart, base against head).
    cpu_values: tuple[float, ...] = field(default=(), repr=False)

    @property
    def status(self) -> Status:
        return self.health.status

    def to_json(self) -> dict[str, object]:
        return {
            "label": self.label,
            "commit": self.commit,
            "result": self.status,
            "reason": self.health.reason,
            "ticks": self.ticks,
            "failed_ticks": self.failed_ticks,
            "errors": [e.to_json() for e in self.errors],
            "cpu": None if self.cpu is None else self.cpu.to_json(),
            "cpu_terminations": self.cpu_terminations,
            "memory_bytes": self.memory_bytes,
        }


@dataclass(frozen=True, slots=True)
class Comparison:
    """One branch's rehearsal: the head, and the base when ``--base`` was given."""

    branch: str
    head: Side
    base: Side | None = None
    new_errors: tuple[ErrorSite, ...] = field(default_factory=tuple)

    @property
    def result(self) -> Status:
        return self.head.status

    @property
    def cpu_change(self) -> float | None:
        """The head's mean CPU per tick minus the base's (``None`` without both)."""
        if self.base is None or self.base.cpu is None or self.head.cpu is None:
            return None
        return self.head.cpu.mean - self.base.cpu.mean

    def to_json(self) -> dict[str, object]:
        change = self.cpu_change
        return {
            "branch": self.branch,
            "result": self.result,
            "head": self.head.to_json(),
            "base": None if self.base is None else self.base.to_json(),
            "new_errors": [e.to_json() for e in self.new_errors],
            "cpu_mean_change": None if change is None else round(change, 3),
        }


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by the nearest-rank method: a value that occurred. ``values`` not empty."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def cpu_stats(values: Iterable[float]) -> CpuStats | None:
    """Mean, 95th percentile and max of the CPU used per tick; ``None`` when no tick reported a number."""
    numbers = [float(v) for v in values]
    if not numbers:
        return None
    return CpuStats(len(numbers), sum(numbers) / len(numbers), percentile(numbers, 95), max(numbers))


def bot_frame(error: str, modules: Iterable[str]) -> str | None:
    """``file:line`` of the top stack frame in the bot's own code (one of its ``modules``, or a source file a
    source map names), or ``None`` when the stack has none (then the error is the server's, not the bot's)."""
    names = set(modules)
    for line in html.unescape(error).splitlines()[1:]:
        match = _FRAME.match(line)
        if match is None:
            continue
        place = match.group("file")
        if place in names or (not place.startswith(_RUNTIME) and re.search(r"\.(?:[cm]?[jt]s|rs|wasm)$", place)):
            return f"{place}:{match.group('line')}"
    return None


def distinct_errors(ticks: Sequence[Tick], modules: Iterable[str]) -> tuple[ErrorSite, ...]:
    """The ticks' errors, one per first line and place, most frequent first (at most :data:`MAX_ERRORS`)."""
    names = tuple(modules)
    counts: dict[tuple[str, str | None], int] = {}
    for tick in ticks:
        for error in tick.errors:
            text = html.unescape(error).strip()
            first = text.splitlines()[0] if text else "(empty error)"
            key = (first, bot_frame(text, names))
            counts[key] = counts.get(key, 0) + 1
    ordered = sorted(counts.items(), key=lambda item: -item[1])  # stable: first seen first among equals
    return tuple(ErrorSite(message, where, count) for (message, where), count in ordered[:MAX_ERRORS])


def side(
    label: str,
    ticks: Sequence[Tick],
    cpu: Sequence[float | None],
    memory_bytes: int | None,
    thresholds: Thresholds,
    modules: Iterable[str],
    *,
    problem: str | None = None,
    timeout: float = 0.0,
    commit: str | None = None,
) -> Side:
    """One side's figures: ``ticks`` judged by the verify judge, ``cpu`` per tick (``None``: a terminated tick)."""
    names = frozenset(modules)
    # The verify judge with the bot's module names: an error with no frame of the bot's is the world's (issue 39).
    health = judge_ticks(list(ticks), thresholds, problem=problem, timeout=timeout, bot_modules=names)
    return Side(
        label=label,
        health=health,
        ticks=len(ticks),
        failed_ticks=health.failed_ticks,
        errors=distinct_errors(ticks, names),
        cpu=cpu_stats(v for v in cpu if v is not None),
        cpu_terminations=sum(1 for v in cpu if v is None),
        memory_bytes=memory_bytes,
        commit=commit,
        cpu_values=tuple(v for v in cpu if v is not None),
    )


def compare(branch: str, head: Side, base: Side | None) -> Comparison:
    """The head weighed against the base: the errors the base did not have."""
    if base is None:
        return Comparison(branch, head)
    known = {(e.message, e.where) for e in base.errors}
    new = tuple(e for e in head.errors if (e.message, e.where) not in known)
    return Comparison(branch, head, base, new)


def overall(results: Iterable[Status]) -> Status:
    """Failing when any branch fails, else unknown when any is unknown, else healthy (nothing: unknown)."""
    seen = list(results)
    if "failing" in seen:
        return "failing"
    if "unknown" in seen or not seen:
        return "unknown"
    return "healthy"


__all__ = [
    "DEFAULT_TICKS",
    "Comparison",
    "CpuStats",
    "ErrorSite",
    "Side",
    "bot_frame",
    "compare",
    "cpu_stats",
    "distinct_errors",
    "overall",
    "percentile",
    "side",
]
