"""Renderers of a rehearsal (``gitops rehearse``): terminal text and Markdown (the Action's plan comment).

Both read the comparisons of ``gitops.core.rehearsal``, so the terminal and the pull request say the same; the
JSON document is the use case's (:meth:`gitops.app.rehearsal.Rehearsal.document`). No I/O, no decision: the verdict
is the judge's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gitops.core.health import Status
from gitops.core.rehearsal import Comparison, CpuStats, ErrorSite, Side
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
        ("CPU per tick, mean", *both(lambda s: _cpu(s.cpu, "mean"))),
        ("CPU per tick, p95", *both(lambda s: _cpu(s.cpu, "p95"))),
        ("CPU per tick, max", *both(lambda s: _cpu(s.cpu, "max"))),
        ("CPU-limit terminations", *both(lambda s: s.cpu_terminations)),
        ("Memory at the end", _memory(b), _memory(h)),
    ]


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
        else:
            out += [f"  {what:<{width}}  {head}" for what, _, head in rows]
        for e in c.head.errors[:SHOWN_ERRORS]:
            new = c.base is not None and e in c.new_errors
            out.append(f"  {'new error' if new else 'error'}: {_error_line(e)}")
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


def _number(value: float) -> str:
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
        *("    line [" + ", ".join(_number(v) for v in line) + "]" for line in series),
        "```",
    ]


__all__ = ["cpu_chart", "markdown", "text"]
