"""Renderers of ``gitops drift``'s report: terminal text, Markdown (the Action's job summary and issue) and JSON.

The report is decided by the use case (:func:`gitops.app.drift.check_drift`); these only show it, so the CLI and
the Action cannot disagree. The JSON document is versioned by ``format_version``
(``gitops.core.drift.DRIFT_FORMAT_VERSION``) and documented in docs/commands.md ("Drift"). No I/O.
"""

from __future__ import annotations

import json
from typing import Any

from gitops.core.drift import DRIFT_FORMAT_VERSION, BranchDrift, DriftReport
from gitops.core.planlines import age
from gitops.render.plan import (
    MARKDOWN_DRIFT_NAMES,
    drift_document,
    drift_text,
    md_code,
    md_text,
    printable,
    unsettled_document,
)


def branch_line(entry: BranchDrift, now: float, *, limit: int | None = None) -> str:
    """One branch's finding in words (``limit``: at most that many module names)."""
    drift = entry.drift
    when = "" if drift.applied_at is None else f" {age(now - drift.applied_at)}"
    if drift.status == "drifted":
        return f"DRIFTED: {drift_text(drift, now, limit=limit)}"
    if drift.status == "none":
        if drift.equals_repository:
            return f"no drift: the server holds the repository's code ({drift.repository})"
        landed = " (an upload whose answer was lost had landed)" if drift.pending_landed else ""
        return f"no drift: the server holds what this tool applied{when}{landed}"
    if drift.status == "unknown":
        return "unknown: the server's code could not be read"
    return "no record: this tool never applied this branch here, so there is nothing to compare with (not drift)"


def summary_line(report: DriftReport) -> str:
    drifted = report.drifted
    if drifted:
        return f"Drift: {len(drifted)} of {len(report.branches)} branch(es) changed outside Git."
    return "No drift: every branch this tool applied holds what it applied."


def render_text(report: DriftReport) -> str:
    now = report.checked_at
    out = [f"warning: {w}" for w in report.warnings]
    out.extend(f"{entry.label}: {branch_line(entry, now)}" for entry in report.branches)
    out.extend(note.line() for note in report.unsettled)
    out.append("")
    out.append(summary_line(report))
    return printable("\n".join(out) + "\n")


def render_markdown(report: DriftReport, *, title: str = "screeps-gitops drift") -> str:
    now = report.checked_at
    lines = [f"### {title}", "", md_text(summary_line(report)), ""]
    lines.append("| server | branch | drift | changed outside Git |")
    lines.append("|---|---|---|---|")
    for entry in report.branches:
        d = entry.drift
        modules = d.modules_text(MARKDOWN_DRIFT_NAMES) if d.drifted else ""
        lines.append(
            f"| {md_code(entry.server, table=True)} | {md_code(entry.branch, table=True)} | {d.status} | "
            f"{md_code(modules, table=True) if modules else '-'} |"
        )
    lines.append("")
    lines.extend(
        f"- {md_code(entry.label)}: {md_text(branch_line(entry, now, limit=MARKDOWN_DRIFT_NAMES))}"
        for entry in report.branches
    )
    if report.unsettled:
        lines.extend(["", "**Unverified or failing deploys** (exit 12)", ""])
        lines.extend(f"- {md_text(n.line())}" for n in report.unsettled)
    if report.warnings:
        lines.extend(["", "**Warnings**", ""])
        lines.extend(f"- {md_text(w)}" for w in report.warnings)
    lines.append("")
    return printable("\n".join(lines))


def drift_json(report: DriftReport) -> dict[str, Any]:
    """The documented JSON document of ``gitops drift --json``."""
    now = report.checked_at
    return {
        "format_version": DRIFT_FORMAT_VERSION,
        "drifted": report.has_drift,
        "checked_at": now,
        "branches": [{"server": e.server, "branch": e.branch, **drift_document(e.drift, now)} for e in report.branches],
        "warnings": list(report.warnings),
        "unsettled": [unsettled_document(n) for n in report.unsettled],
    }


def render_json(report: DriftReport) -> str:
    return json.dumps(drift_json(report), indent=2) + "\n"
