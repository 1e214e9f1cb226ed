"""A rehearsal's figures and its comparison with the base (pure: no I/O, no clock).

``gitops rehearse`` runs a branch's code in a throwaway world of the real private server (``app/rehearsal.py``)
and gets back what the game published for the bot: its console messages (judged by
:func:`gitops.core.health.judge_ticks`, the same judge as ``verify``) and its ``cpu`` messages (``{"cpu": N,
"memory": BYTES}`` every tick). This module turns them into one :class:`Side`: failed ticks, the distinct errors
with the bot's file and line (uncaught, and the ones the bot caught and logged itself: ``core.rehearsallog``), the
CPU used per tick (mean, 95th percentile, max), the memory size, the ticks the server terminated for their CPU;
and weighs the head against the base (:class:`Comparison`): new and gone errors, new console lines, and each
change of CPU and memory with its noise band (:func:`change`).

The rules (docs/rehearsal.md, "How it judges"):

* **uncaught errors**: the verify judge's (``error_share`` of the ticks, ``fail_on`` lines).
* **caught errors**: a side fails when the ticks with a caught error reach ``error_share`` of its ticks; with a
  base, only caught errors the base did not log count against the head (:func:`compare`, the slot for rules
  relative to the base).
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from gitops.core.health import Health, Status, Thresholds, Tick, is_cpu_termination, judge_ticks
from gitops.core.rehearsallog import Caught, caught_errors, log_patterns, new_patterns, normalise, place
from gitops.core.sourcemap import SourceMap

#: Ticks a rehearsal runs unless told (``--ticks``, the Action's ``rehearse-ticks``).
DEFAULT_TICKS = 100
#: How many distinct errors a side keeps.
MAX_ERRORS = 10
#: The two-sided 99 % quantile of the normal distribution: the noise band of a change is its 99 % interval (at 95 %,
#: one A/A run in twenty would report a change that is not there; a busy machine adds drift between the worlds).
Z99 = 2.576
#: The smallest memory change that is reported as significant: 1 % of the base's size, at least 64 bytes.
MEMORY_FLOOR_SHARE = 0.01
MEMORY_FLOOR_BYTES = 64.0
#: How many runs of consecutive ticks a side's per-tick values are cut into before a change is weighed.
BATCHES = 10


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

    @property
    def key(self) -> tuple[str, str | None]:
        """What makes two errors the same: the line with its numbers and ids replaced, and the place."""
        return normalise(self.message), self.where

    def to_json(self) -> dict[str, object]:
        return {"message": self.message, "where": self.where, "count": self.count}


@dataclass(frozen=True, slots=True)
class Change:
    """A change of a per-tick figure, head minus base, with its 99 % interval (the noise band); ``significant``
    when the interval does not hold 0."""

    delta: float
    low: float
    high: float
    #: The smallest change that counts (memory: a few names of other lengths are not a change).
    floor: float = 0.0

    @property
    def significant(self) -> bool:
        return (self.low > 0 or self.high < 0) and abs(self.delta) >= self.floor

    def to_json(self) -> dict[str, object]:
        return {
            "delta": round(self.delta, 3),
            "low": round(self.low, 3),
            "high": round(self.high, 3),
            "significant": self.significant,
        }


@dataclass(frozen=True, slots=True)
class Side:
    """What one side (``head`` or ``base``) of a rehearsal did."""

    label: str
    health: Health
    ticks: int
    failed_ticks: int
    errors: tuple[ErrorSite, ...] = ()
    cpu: CpuStats | None = None
    #: Ticks the server terminated for their CPU (its messages: ``core.health.CPU_LIMIT_TEXTS``).
    cpu_terminations: int = 0
    #: ``JSON.stringify(Memory).length`` after the last tick, from its cpu message.
    memory_bytes: int | None = None
    commit: str | None = None
    #: The errors the bot caught and logged itself, most ticks first; ``caught_ticks``: ticks with one.
    caught: tuple[ErrorSite, ...] = ()
    caught_ticks: int = 0
    #: The verify judge's verdict on the uncaught errors alone (``health`` adds the caught-errors rule).
    uncaught: Health | None = None
    #: Per tick: CPU used, memory size, the caught errors' keys; the log lines' patterns (for the comparison).
    cpu_values: tuple[float, ...] = field(default=(), repr=False)
    memory_values: tuple[float, ...] = field(default=(), repr=False)
    caught_keys: tuple[frozenset[tuple[str, str | None]], ...] = field(default=(), repr=False)
    patterns: Mapping[str, int] = field(default_factory=dict, repr=False)
    error_share: float = 0.5

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
            "caught_errors": [e.to_json() for e in self.caught],
            "caught_error_ticks": self.caught_ticks,
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
    gone_errors: tuple[ErrorSite, ...] = field(default_factory=tuple)
    new_caught: tuple[ErrorSite, ...] = field(default_factory=tuple)
    gone_caught: tuple[ErrorSite, ...] = field(default_factory=tuple)
    #: The head's console lines (as patterns) the base never logged, and on how many ticks.
    new_lines: tuple[tuple[str, int], ...] = field(default_factory=tuple)
    cpu: Change | None = None
    memory: Change | None = None

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
            "gone_errors": [e.to_json() for e in self.gone_errors],
            "new_caught_errors": [e.to_json() for e in self.new_caught],
            "gone_caught_errors": [e.to_json() for e in self.gone_caught],
            "new_console_lines": [{"pattern": p, "ticks": n} for p, n in self.new_lines],
            "cpu_mean_change": None if change is None else round(change, 3),
            "cpu_change": None if self.cpu is None else self.cpu.to_json(),
            "memory_change": None if self.memory is None else self.memory.to_json(),
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


def bot_frame(error: str, modules: Iterable[str], maps: Mapping[str, SourceMap] | None = None) -> str | None:
    """``file:line`` of the top stack frame in the bot's own code (one of its ``modules``, or a source file a
    source map names; through the module's uploaded source map when ``maps`` has it), or ``None`` when the stack has
    none (then the error is the server's, not the bot's)."""
    return place(error, modules, maps)


def _first_line(error: str) -> str:
    text = html.unescape(error).strip()
    return text.splitlines()[0] if text else "(empty error)"


def distinct_errors(
    ticks: Sequence[Tick], modules: Iterable[str], maps: Mapping[str, SourceMap] | None = None
) -> tuple[ErrorSite, ...]:
    """The ticks' errors, one per first line and place, most frequent first (at most :data:`MAX_ERRORS`)."""
    names = tuple(modules)
    counts: dict[tuple[str, str | None], int] = {}
    for tick in ticks:
        for error in tick.errors:
            key = (_first_line(error), bot_frame(error, names, maps))
            counts[key] = counts.get(key, 0) + 1
    ordered = sorted(counts.items(), key=lambda item: -item[1])  # stable: first seen first among equals
    return tuple(ErrorSite(message, where, count) for (message, where), count in ordered[:MAX_ERRORS])


def _caught_sites(per_tick: Sequence[frozenset[Caught]]) -> tuple[ErrorSite, ...]:
    counts: dict[tuple[str, str | None], tuple[str, int]] = {}
    for tick in per_tick:
        for one in tick:
            key = (normalise(one.message), one.where)
            message, count = counts.get(key, (one.message, 0))
            counts[key] = (message, count + 1)
    ordered = sorted(counts.items(), key=lambda item: -item[1][1])
    return tuple(ErrorSite(message, key[1], count) for key, (message, count) in ordered[:MAX_ERRORS])


def caught_rule(
    uncaught: Health,
    keys: Sequence[frozenset[tuple[str, str | None]]],
    share: float,
    known: frozenset[object] | None = None,
) -> Health:
    """The verdict with the caught-errors rule: failing when the ticks with a caught error reach ``share`` of the
    ticks; with ``known`` (the base's caught errors), only errors not in it count. The uncaught judge's verdict
    stands when it already failed or could not judge."""
    if uncaught.status != "healthy" or not keys:
        return uncaught
    counted = sum(1 for tick in keys if any(known is None or k not in known for k in tick))
    if counted == 0 or counted < share * len(keys):
        return uncaught
    which = "caught errors" if known is None else "new caught errors (not in the base)"
    return replace(
        uncaught,
        status="failing",
        reason=f"{counted} of {len(keys)} ticks logged {which} (threshold {share:.0%}); no uncaught error",
        failed_ticks=max(uncaught.failed_ticks, counted),
    )


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
    maps: Mapping[str, SourceMap] | None = None,
    memory: Sequence[float] = (),
) -> Side:
    """One side's figures: ``ticks`` judged by the verify judge and the caught-errors rule, ``cpu`` per tick
    (``None``: no number), ``memory`` per tick; ``maps``: the bot's source maps by module name."""
    names = frozenset(modules)
    ordered = sorted(names)
    # The verify judge with the bot's module names: an error with no frame of the bot's is the world's (issue 39).
    uncaught = judge_ticks(list(ticks), thresholds, problem=problem, timeout=timeout, bot_modules=names)
    per_tick = caught_errors(ticks, ordered, maps)
    keys = tuple(frozenset((normalise(c.message), c.where) for c in tick) for tick in per_tick)
    health = caught_rule(uncaught, keys, thresholds.error_share)
    return Side(
        label=label,
        health=health,
        ticks=len(ticks),
        failed_ticks=health.failed_ticks,
        errors=distinct_errors(ticks, ordered, maps),
        cpu=cpu_stats(v for v in cpu if v is not None),
        cpu_terminations=sum(1 for t in ticks if any(is_cpu_termination(e) for e in t.errors)),
        memory_bytes=memory_bytes,
        commit=commit,
        caught=_caught_sites(per_tick),
        caught_ticks=sum(1 for tick in per_tick if tick),
        uncaught=uncaught,
        cpu_values=tuple(v for v in cpu if v is not None),
        memory_values=tuple(memory),
        caught_keys=keys,
        patterns=log_patterns(ticks),
        error_share=thresholds.error_share,
    )


def batch_medians(values: Sequence[float]) -> list[float]:
    """The medians of :data:`BATCHES` runs of consecutive values (fewer when there are fewer than 3 values a run;
    the values left over at the end are dropped)."""
    count = min(BATCHES, len(values) // 3)
    size = len(values) // count if count else 0
    medians = []
    for i in range(count):
        run = sorted(values[i * size : (i + 1) * size])
        middle = len(run) // 2
        medians.append(run[middle] if len(run) % 2 else (run[middle - 1] + run[middle]) / 2)
    return medians


def _t995(df: float) -> float:
    """The 99.5 % quantile of Student's t with ``df`` degrees of freedom (Cornish-Fisher: within 0.02 from 10
    degrees on)."""
    z = Z99
    if not math.isfinite(df) or df <= 0:
        return z
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def change(base: Sequence[float], head: Sequence[float], *, floor: float = 0.0) -> Change | None:
    """Head minus base of the per-tick values, with its 99 % interval; significant outside it and at least
    ``floor``; ``None`` with fewer than 2 batches a side.

    Each side's ticks are cut into :data:`BATCHES` runs of consecutive ticks, each run stands for its median (a
    tick's CPU has spikes, garbage collection and the machine's other work, that say nothing of the code), and the
    change is the difference of the medians' means, its interval Welch's with Student's t. Runs, not ticks: ticks
    close in time share the machine's load, so single ticks would make the interval too narrow (batch means)."""
    b, h = batch_medians(base), batch_medians(head)
    if len(b) < 2 or len(h) < 2:
        return None

    def mean_var(values: Sequence[float]) -> tuple[float, float]:
        mean = sum(values) / len(values)
        return mean, sum((v - mean) ** 2 for v in values) / (len(values) - 1) / len(values)

    (mb, vb), (mh, vh) = mean_var(b), mean_var(h)
    delta = mh - mb
    spread = vb + vh
    df = spread**2 / (vb**2 / (len(b) - 1) + vh**2 / (len(h) - 1)) if spread > 0 else math.inf
    half = _t995(df) * math.sqrt(spread)
    return Change(delta, delta - half, delta + half, floor)


def memory_floor(base: Sequence[float]) -> float:
    """The smallest memory change that counts: :data:`MEMORY_FLOOR_SHARE` of the base's size, at least
    :data:`MEMORY_FLOOR_BYTES`. The same code on the same start writes memory of slightly other sizes (a creep's
    random name, a timestamp): 75 bytes of 11.9 kB on an 89-module bot, main against main."""
    size = sum(base) / len(base) if base else 0.0
    return max(MEMORY_FLOOR_BYTES, MEMORY_FLOOR_SHARE * size)


def compare(branch: str, head: Side, base: Side | None) -> Comparison:
    """The head weighed against the base: new and gone errors (uncaught and caught), the head's new console lines,
    CPU and memory changes with their noise bands; and the caught-errors rule again, counting only the caught
    errors the base did not log (the rules relative to the base)."""
    if base is None:
        return Comparison(branch, head)
    known = {e.key for e in base.errors}
    theirs = {e.key for e in head.errors}
    known_caught = frozenset(k for tick in base.caught_keys for k in tick)
    mine_caught = frozenset(k for tick in head.caught_keys for k in tick)
    if head.uncaught is not None:
        head = replace(head, health=caught_rule(head.uncaught, head.caught_keys, head.error_share, known_caught))
        head = replace(head, failed_ticks=head.health.failed_ticks)
    return Comparison(
        branch,
        head,
        base,
        new_errors=tuple(e for e in head.errors if e.key not in known),
        gone_errors=tuple(e for e in base.errors if e.key not in theirs),
        new_caught=tuple(e for e in head.caught if e.key not in known_caught),
        gone_caught=tuple(e for e in base.caught if e.key not in mine_caught),
        new_lines=new_patterns(head.patterns, base.patterns),
        cpu=change(base.cpu_values, head.cpu_values),
        memory=change(base.memory_values, head.memory_values, floor=memory_floor(base.memory_values)),
    )


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
    "Change",
    "Comparison",
    "CpuStats",
    "ErrorSite",
    "Side",
    "batch_medians",
    "bot_frame",
    "caught_rule",
    "change",
    "compare",
    "cpu_stats",
    "distinct_errors",
    "memory_floor",
    "overall",
    "percentile",
    "side",
]
