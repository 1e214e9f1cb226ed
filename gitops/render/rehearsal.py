"""Renderers of a rehearsal (``gitops rehearse``): terminal text and Markdown (the Action's plan comment).

Both read the comparisons of ``gitops.core.rehearsal``, so the terminal and the pull request say the same; the
JSON document is the use case's (:meth:`gitops.app.rehearsal.Rehearsal.document`). No I/O, no decision: the verdict
is the judge's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gitops.core.health import Status
from gitops.core.rehearsal import Change, Comparison, CpuStats, ErrorSite, Side
from gitops.render.plan import md_code

#: How many distinct errors a side lists under its table.
SHOWN_ERRORS = 5
#: Points a chart's line holds at most: longer rehearsals are shown as the means of equal runs of ticks.
CHART_POINTS = 100
#: Branches that get a chart (a manifest of many branches gets its first ones; the table has them all).
CHARTED_BRANCHES = 5
#: The chart's two lines: the base first, then the pull request (xychart-beta draws no legend, so the caption names
#: the colours; GitHub renders Mermaid in comments and job summaries).
_PALETTE = ("#8b949e", "#cf222e")


def _cpu(cpu: CpuStats | None, pick: str) -> str:
    if cpu is None:
        return "-"
    value: float = getattr(cpu, pick)
    return f"{value:.2f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))


def _memory(side: Side | None) -> str:
    if side is None or side.memory_bytes is None:
        return "-"
    size = side.memory_bytes
    return f"{size} B" if size < 10_000 else f"{size / 1024:.1f} KiB"


def _rows(c: Comparison) -> list[tuple[str, str, str]]:
    """(what, base, head) rows of one branch."""
    b, h = c.base, c.head

    def both(f: object) -> tuple[str, str]:
        assert callable(f)
        return ("-" if b is None else str(f(b))), str(f(h))

    return [
        ("result", *both(lambda s: s.status.upper())),
        ("failed ticks", *both(lambda s: f"{s.failed_ticks} of {s.ticks}")),
        ("distinct errors", *both(lambda s: len(s.errors))),
        ("ticks with caught errors", *both(lambda s: f"{s.caught_ticks} of {s.ticks}")),
        ("CPU per tick, mean", *both(lambda s: _cpu(s.cpu, "mean"))),
        ("CPU per tick, p95", *both(lambda s: _cpu(s.cpu, "p95"))),
        ("CPU per tick, max", *both(lambda s: _cpu(s.cpu, "max"))),
        ("CPU-limit terminations", *both(lambda s: s.cpu_terminations)),
        ("Memory at the end", _memory(b), _memory(h)),
    ]


def _number(value: float, unit: str) -> str:
    text = f"{value:+.2f}".rstrip("0").rstrip(".")
    return f"{text}{unit}"


def change_line(what: str, c: Change | None, unit: str = "") -> str | None:
    """``CPU per tick: +0.4 (99 % interval -0.3 to +1.1): no significant change``."""
    if c is None:
        return None
    verdict = "significant" if c.significant else "no significant change"
    return (
        f"{what}: {_number(c.delta, unit)} (99 % interval {_number(c.low, unit)} to {_number(c.high, unit)}): {verdict}"
    )


def _changes(c: Comparison) -> list[str]:
    lines = [change_line("CPU per tick", c.cpu), change_line("Memory per tick", c.memory, " B")]
    return [line for line in lines if line is not None]


def _findings(c: Comparison) -> list[str]:
    """The comparison's lists, one line each: new and gone errors (uncaught and caught), new console lines."""
    out: list[str] = []
    out += [f"new caught error: {_error_line(e)}" for e in c.new_caught[:SHOWN_ERRORS]]
    out += [f"gone error: {_error_line(e)}" for e in c.gone_errors[:SHOWN_ERRORS]]
    out += [f"gone caught error: {_error_line(e)}" for e in c.gone_caught[:SHOWN_ERRORS]]
    out += [f"new console line: {p} ({n} tick{'s' if n != 1 else ''})" for p, n in c.new_lines[:SHOWN_ERRORS]]
    return out


def _error_line(e: ErrorSite) -> str:
    where = f" at {e.where}" if e.where else " (no frame in the bot's code: the server's?)"
    return f"{e.message}{where} ({e.count} tick{'s' if e.count != 1 else ''})"


def text(
    comparisons: Sequence[Comparison], result: Status, ticks: int, head_source: str, base_source: str | None
) -> list[str]:
    """The terminal report, one line each."""
    out = [f"rehearse: {result.upper()} ({ticks} ticks each in a throwaway world of the real private server)"]
    out.append(f"  head: {head_source}" + (f"; base: {base_source}" if base_source else ""))
    for c in comparisons:
        out.append("")
        out.append(f"{c.branch}: {c.result.upper()}: {c.head.health.reason}")
        rows = _rows(c)
        width = max(len(r[0]) for r in rows)
        if c.base is not None:
            left = max(len("base"), *(len(r[1]) for r in rows))
            out.append(f"  {'':<{width}}  {'base':<{left}}  head")
            out += [f"  {what:<{width}}  {base:<{left}}  {head}" for what, base, head in rows]
            change = c.cpu_change
            if change is not None:
                out.append(f"  {'CPU mean change':<{width}}  {change:+.2f}")
            out += [f"  {line}" for line in _changes(c)]
        else:
            out += [f"  {what:<{width}}  {head}" for what, _, head in rows]
        for e in c.head.errors[:SHOWN_ERRORS]:
            new = c.base is not None and e in c.new_errors
            out.append(f"  {'new error' if new else 'error'}: {_error_line(e)}")
        if c.base is None:
            out += [f"  caught error: {_error_line(e)}" for e in c.head.caught[:SHOWN_ERRORS]]
        out += [f"  {line}" for line in _findings(c)]
    return out


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")


def markdown(
    comparisons: Sequence[Comparison], result: Status, ticks: int, head_source: str, base_source: str | None
) -> str:
    """One table for every branch (errors and CPU, base vs pull request), and the pull request's errors below it."""
    icon = {"healthy": "✅", "failing": "❌", "unknown": "❔"}[result]
    lines = [
        f"### {icon} Rehearsal: {result}",
        "",
        f"{ticks} ticks each in a throwaway world of the real Screeps private server. Pull request: {head_source}"
        + (f"; base: {base_source}." if base_source else "."),
        "",
        "| branch | | base | pull request |",
        "| --- | --- | --- | --- |",
    ]
    for c in comparisons:
        for i, (what, base, head) in enumerate(_rows(c)):
            label = md_code(c.branch, table=True) if i == 0 else ""
            lines.append(f"| {label} | {what} | {_cell(base)} | {_cell(head)} |")
    changes = [(c, line) for c in comparisons for line in _changes(c)]
    if changes:
        lines += ["", "Changes, with their noise band:", ""]
        lines += [f"- {md_code(c.branch)}: {_cell(line)}" for c, line in changes]
    for c in [c for c in comparisons if c.head.cpu_values][:CHARTED_BRANCHES]:
        lines += ["", *cpu_chart(c, md_code(c.branch))]
    errors = [(c, e) for c in comparisons for e in c.head.errors[:SHOWN_ERRORS]]
    if errors:
        lines += ["", "Errors of the pull request's code:", ""]
        for c, e in errors:
            new = " **new**" if c.base is not None and e in c.new_errors else ""
            # The bot's own text (a pull request's): a code span no backtick, line break or bidirectional control
            # of it can end or turn, as the terminal report shows it.
            lines.append(f"- {md_code(c.branch)}{new}: {md_code(_error_line(e))}")
    found = [(c, line) for c in comparisons for line in _findings(c)]
    found += [(c, f"caught error: {_error_line(e)}") for c in comparisons if c.base is None for e in c.head.caught[:5]]
    if found:
        lines += ["", "Compared with the base:" if any(c.base for c, _ in found) else "Caught errors:", ""]
        lines += [f"- {md_code(c.branch)}: {md_code(line)}" for c, line in found]
    return "\n".join(lines) + "\n"


def _points(values: Sequence[float]) -> list[float]:
    """At most :data:`CHART_POINTS` finite values: the means of equal runs of ticks when there are more."""
    finite = [v for v in values if math.isfinite(v)]
    if len(finite) <= CHART_POINTS:
        return finite
    runs = [
        finite[len(finite) * i // CHART_POINTS : len(finite) * (i + 1) // CHART_POINTS] for i in range(CHART_POINTS)
    ]
    return [sum(run) / len(run) for run in runs]


def _point(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")


def cpu_chart(c: Comparison, label: str) -> list[str]:
    """A Mermaid ``xychart-beta`` of the CPU used per tick, base against pull request, under a caption naming the
    branch (``label``: Markdown the caller made inert). Only numbers and fixed words go inside the chart: nothing of
    the bot's or the manifest's text can reach Mermaid's parser."""
    head = _points(c.head.cpu_values)
    base = _points(c.base.cpu_values) if c.base is not None else []
    ticks = max(len(c.head.cpu_values), len(c.base.cpu_values) if c.base is not None else 0)
    top = max([*head, *base, 0.0])
    ceiling = max(1, math.ceil(top * 1.1))
    colours = _PALETTE if base else _PALETTE[1:]
    caption = "grey: base, red: pull request" if base else "red: pull request"
    series = [line for line in (base, head) if line]
    return [
        f"CPU per tick of {label} ({caption}):",
        "",
        "```mermaid",
        '%%{init: {"themeVariables": {"xyChart": {"plotColorPalette": "' + ", ".join(colours) + '"}}}}%%',
        "xychart-beta",
        '    x-axis "tick" 1 --> ' + str(max(ticks, 2)),
        f'    y-axis "CPU (ms)" 0 --> {ceiling}',
        *("    line [" + ", ".join(_point(v) for v in line) + "]" for line in series),
        "```",
    ]


__all__ = ["change_line", "cpu_chart", "markdown", "text"]
