"""What ``gitops apply`` shows once the plan is made: the console it tells the run to, the JSON document of
``--json``, the end of the run, and ``--keep-going``'s summary.

The command imports this module once the plan is made (the boundary "after the servers" of
``docs/architecture.md``): the presenters and the plan's document, which the local read's worker has imported
while the servers answered, are imported here at the top and never before the first request.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from gitops.cli.common import echo_json, print_unlock_links
from gitops.render.outcome import Ended, TextConsole, line_shown
from gitops.render.plan import plan_document, unsettled_document

if TYPE_CHECKING:
    from gitops.app.pipeline import Applied, AppliedEach
    from gitops.core.apply import Outcome
    from gitops.core.plan import Plan
    from gitops.render.outcome import Console


def text_console(as_json: bool, *, color: bool, full: bool) -> TextConsole:
    """The run's console: with ``--json`` the person's text goes to stderr (stdout holds only the document, printed
    at the end)."""
    return TextConsole(
        lambda line: click.echo(line, err=as_json),
        err=lambda line: click.echo(line, err=True),
        color=color,
        full=full,
    )


def show_ended(console: Console, applied: Applied, *, told: bool) -> None:
    """The end of the run: the applied line, each verification, and (when ``told``: the plan above has not said it)
    what is still unsettled."""
    report = applied.report
    console.ended(Ended(report.cancelled, report.applied_line, applied.verifications, applied.left if told else []))


def print_document(plan: Plan, outcomes: list[Outcome], applied: Applied, *, now: float) -> None:
    """``gitops apply --json``: ``{"format_version": 1, "applied", "outcomes": [...], "plan": {...}, "verify": [...],
    "unsettled": [...]}`` (``unsettled``: the deploys still unverified or failing after this run)."""
    document = {
        "format_version": 1,
        "applied": applied.report.applied,
        "outcomes": [
            {"branch": o.branch, "step": o.step.describe(), "status": o.status, "detail": o.detail} for o in outcomes
        ],
        "plan": plan_document(plan, now=now),
        "verify": [v.document() for v in applied.verifications],
        "unsettled": [unsettled_document(n) for n in applied.left],
    }
    echo_json(json.dumps(document, indent=2) + "\n")


def show_each(each: AppliedEach) -> int:
    """``--keep-going``: each server's result, the failed ones, and the deploys still unsettled."""
    # Its summary goes to stdout, as it always did (--keep-going writes no JSON document).
    console = TextConsole(click.echo, err=lambda line: click.echo(line, err=True))
    if each.cancelled:
        console.ended(Ended(cancelled=True, applied_line=None))
        return each.exit_code
    for note in each.left:  # unverified or failing from an earlier run (issue 39)
        console.say(note.line())
    for report in each.reports:
        shown = report.applied_line is not None and report.plan.has_changes
        line = f"{', '.join(report.plan.servers())}: {report.applied_line}" if shown else None
        console.ended(Ended(cancelled=False, applied_line=line, verifications=report.verifications))
    for failure in each.plan.failed:
        click.echo(line_shown(f"Error: server '{failure.server}' was not planned: {failure.message}"), err=True)
    for server, exc in each.failures.items():
        print_unlock_links(exc)
        click.echo(line_shown(f"Error: server '{server}' failed: {exc}"), err=True)
    if not each.plan.has_changes and not each.plan.failed:
        console.say("Nothing to apply.")
    return each.exit_code
