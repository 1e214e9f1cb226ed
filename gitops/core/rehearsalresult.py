"""The rehearsal result file: what a rehearsal found, handed from the job that ran it to the job that comments.

The rehearse job runs the pull request's bots (in the private server's sandbox) and holds no secret; the comment job
holds the GitHub token that may write, and runs nothing of the pull request. Between them goes this file: numbers
and texts, never Markdown. The comment job reads it with :func:`result_from_data`, which takes only what it knows,
of the types it knows, within bounds, and renders the comment itself (``gitops.render.rehearsal``), so a file made
by a job the pull request's code ran in cannot put anything into the comment that the renderer would not write.
Pure: no I/O (``gitops.edges.rehearsalfile`` reads and writes the bytes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast, get_args

from gitops.core.health import Health, Status
from gitops.core.rehearsal import MAX_ERRORS, Change, Comparison, CpuStats, ErrorSite, Side, overall

#: The ``format`` field of every rehearsal result file.
FORMAT = "screeps-gitops-rehearsal"
FORMAT_VERSION = 1
#: Bounds of what is read: a rehearsal runs at most 10,000 ticks, a comment shows a few errors of each side.
MAX_BRANCHES = 500
MAX_TICKS = 10_001
MAX_TEXT = 4_000
MAX_ERROR_TEXT = 20_000
_STATUSES = frozenset(get_args(Status))


class ResultProblem(ValueError):
    """The file cannot be used; the text completes "the rehearsal result file ..."."""


@dataclass(frozen=True, slots=True)
class RehearsalResult:
    """What a rehearsal found: the ticks each bot ran, where the head's and the base's code came from, each branch's
    comparison; or why it stopped."""

    ticks: int
    head_source: str
    base_source: str | None
    branches: tuple[Comparison, ...]
    #: Why the rehearsal stopped (the world could not run, a code set was refused) and its exit code; ``None`` when
    #: it ran. The comment job shows it in place of a table, so the pull request never keeps an older result.
    error: str | None = None
    error_code: int = 0

    @property
    def result(self) -> Status:
        return overall(c.result for c in self.branches)


def result_data(result: RehearsalResult) -> dict[str, Any]:
    """The JSON-able content of the file: each side as its ``to_json`` says it, with the CPU of every tick."""

    def side(s: Side) -> dict[str, object]:
        return {**s.to_json(), "cpu_values": list(s.cpu_values)}

    def change(c: Change | None) -> dict[str, object] | None:
        return None if c is None else {**c.to_json(), "floor": c.floor}

    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "ticks": result.ticks,
        "head_source": result.head_source,
        "base_source": result.base_source,
        "error": result.error,
        "exit_code": result.error_code,
        "branches": [
            {
                "branch": c.branch,
                "head": side(c.head),
                "base": None if c.base is None else side(c.base),
                "new_errors": [e.to_json() for e in c.new_errors],
                "gone_errors": [e.to_json() for e in c.gone_errors],
                "new_caught_errors": [e.to_json() for e in c.new_caught],
                "gone_caught_errors": [e.to_json() for e in c.gone_caught],
                "new_console_lines": [{"pattern": p, "ticks": n} for p, n in c.new_lines],
                "cpu_change": change(c.cpu),
                "memory_change": change(c.memory),
            }
            for c in result.branches
        ],
    }


def result_from_data(data: Any) -> RehearsalResult:
    """The checked content of a parsed result file; :class:`ResultProblem` naming the first thing wrong."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ResultProblem(f"is not a screeps-gitops rehearsal result (no 'format: {FORMAT}')")
    if data.get("format_version") != FORMAT_VERSION:
        raise ResultProblem(
            f"has format_version {str(data.get('format_version'))[:20]!r}; this gitops reads version "
            f"{FORMAT_VERSION} (rehearse and comment with the same gitops version)"
        )
    branches = _list(data.get("branches"), "branches", MAX_BRANCHES)
    base_source = data.get("base_source")
    error = data.get("error")
    return RehearsalResult(
        ticks=_count(data.get("ticks"), "ticks", MAX_TICKS),
        head_source=_text(data.get("head_source"), "head_source"),
        base_source=None if base_source is None else _text(base_source, "base_source"),
        branches=tuple(_comparison(raw, f"branches[{i}]") for i, raw in enumerate(branches)),
        error=None if error is None else _text(error, "error", MAX_ERROR_TEXT),
        error_code=_count(data.get("exit_code", 0), "exit_code", 255),
    )


def _comparison(raw: Any, where: str) -> Comparison:
    if not isinstance(raw, dict):
        raise ResultProblem(f"has {where} that is not an object")
    base = raw.get("base")
    lines = _list(raw.get("new_console_lines", []), f"{where}.new_console_lines", MAX_ERRORS)
    return Comparison(
        branch=_text(raw.get("branch"), f"{where}.branch"),
        head=_side(raw.get("head"), f"{where}.head"),
        base=None if base is None else _side(base, f"{where}.base"),
        new_errors=_errors(raw, "new_errors", where),
        gone_errors=_errors(raw, "gone_errors", where),
        new_caught=_errors(raw, "new_caught_errors", where),
        gone_caught=_errors(raw, "gone_caught_errors", where),
        new_lines=tuple(_line(line, f"{where}.new_console_lines[{i}]") for i, line in enumerate(lines)),
        cpu=_change(raw.get("cpu_change"), f"{where}.cpu_change"),
        memory=_change(raw.get("memory_change"), f"{where}.memory_change"),
    )


def _errors(raw: dict[str, Any], key: str, where: str) -> tuple[ErrorSite, ...]:
    found = _list(raw.get(key, []), f"{where}.{key}", MAX_ERRORS)
    return tuple(_error(e, f"{where}.{key}[{i}]") for i, e in enumerate(found))


def _line(raw: Any, where: str) -> tuple[str, int]:
    if not isinstance(raw, dict):
        raise ResultProblem(f"has {where} that is not an object")
    return _text(raw.get("pattern"), f"{where}.pattern"), _count(raw.get("ticks"), f"{where}.ticks", MAX_TICKS)


def _change(raw: Any, where: str) -> Change | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ResultProblem(f"has {where} that is not an object")
    delta, low, high = (_signed(raw.get(k), f"{where}.{k}") for k in ("delta", "low", "high"))
    return Change(delta, low, high, floor=_number(raw.get("floor", 0.0), f"{where}.floor"))


def _side(raw: Any, where: str) -> Side:
    if not isinstance(raw, dict):
        raise ResultProblem(f"has {where} that is not an object")
    if raw.get("result") not in _STATUSES:
        raise ResultProblem(f"has {where}.result that is not healthy, failing or unknown")
    status = cast(Status, raw["result"])
    ticks = _count(raw.get("ticks"), f"{where}.ticks", MAX_TICKS)
    failed = _count(raw.get("failed_ticks"), f"{where}.failed_ticks", MAX_TICKS)
    errors = _list(raw.get("errors", []), f"{where}.errors", MAX_ERRORS)
    commit = raw.get("commit")
    memory = raw.get("memory_bytes")
    cpu = raw.get("cpu")
    values = _list(raw.get("cpu_values", []), f"{where}.cpu_values", MAX_TICKS)
    caught = _list(raw.get("caught_errors", []), f"{where}.caught_errors", MAX_ERRORS)
    return Side(
        label=_text(raw.get("label"), f"{where}.label"),
        health=Health(status=status, reason=_text(raw.get("reason"), f"{where}.reason"), failed_ticks=failed),
        ticks=ticks,
        failed_ticks=failed,
        errors=tuple(_error(e, f"{where}.errors[{i}]") for i, e in enumerate(errors)),
        cpu=None if cpu is None else _cpu(cpu, f"{where}.cpu"),
        cpu_terminations=_count(raw.get("cpu_terminations", 0), f"{where}.cpu_terminations", MAX_TICKS),
        memory_bytes=None if memory is None else _count(memory, f"{where}.memory_bytes", 2**53),
        commit=None if commit is None else _text(commit, f"{where}.commit"),
        cpu_values=tuple(_number(v, f"{where}.cpu_values[{i}]") for i, v in enumerate(values)),
        caught=tuple(_error(e, f"{where}.caught_errors[{i}]") for i, e in enumerate(caught)),
        caught_ticks=_count(raw.get("caught_error_ticks", 0), f"{where}.caught_error_ticks", MAX_TICKS),
    )


def _cpu(raw: Any, where: str) -> CpuStats:
    if not isinstance(raw, dict):
        raise ResultProblem(f"has {where} that is not an object")
    return CpuStats(
        samples=_count(raw.get("samples"), f"{where}.samples", MAX_TICKS),
        mean=_number(raw.get("mean"), f"{where}.mean"),
        p95=_number(raw.get("p95"), f"{where}.p95"),
        max=_number(raw.get("max"), f"{where}.max"),
    )


def _error(raw: Any, where: str) -> ErrorSite:
    if not isinstance(raw, dict):
        raise ResultProblem(f"has {where} that is not an object")
    place = raw.get("where")
    return ErrorSite(
        message=_text(raw.get("message"), f"{where}.message"),
        where=None if place is None else _text(place, f"{where}.where"),
        count=_count(raw.get("count"), f"{where}.count", MAX_TICKS),
    )


def _list(raw: Any, where: str, most: int) -> Sequence[Any]:
    if not isinstance(raw, list):
        raise ResultProblem(f"has {where} that is not a list")
    if len(raw) > most:
        raise ResultProblem(f"has {len(raw)} entries in {where}, more than a rehearsal makes ({most})")
    return raw


def _text(raw: Any, where: str, most: int = MAX_TEXT) -> str:
    if not isinstance(raw, str):
        raise ResultProblem(f"has {where} that is not a text")
    if len(raw) > most:
        raise ResultProblem(f"has {where} of {len(raw):,} characters, more than a rehearsal writes ({most:,})")
    return raw


def _count(raw: Any, where: str, most: int) -> int:
    if not isinstance(raw, int) or isinstance(raw, bool) or not 0 <= raw <= most:
        raise ResultProblem(f"has {where} that is not a whole number from 0 to {most}")
    return raw


def _signed(raw: Any, where: str) -> float:
    if not isinstance(raw, int | float) or isinstance(raw, bool) or not math.isfinite(raw):
        raise ResultProblem(f"has {where} that is not a finite number")
    return float(raw)


def _number(raw: Any, where: str) -> float:
    if not isinstance(raw, int | float) or isinstance(raw, bool) or not math.isfinite(raw) or raw < 0:
        raise ResultProblem(f"has {where} that is not a finite number, 0 or more")
    return float(raw)


__all__ = ["FORMAT", "FORMAT_VERSION", "RehearsalResult", "ResultProblem", "result_data", "result_from_data"]
