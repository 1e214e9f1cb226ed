"""What ``gitops plan`` shows once the plan is made: the plan in the chosen format, each failed server's error, the
budget's refusal, and the saved plan file.

The command imports this module once the servers have answered (the boundary "after the servers" of
``docs/architecture.md``): the renderer and the plan file's models, which the local read's worker has imported
while the servers answered, are imported here at the top and never before the first request.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from gitops.cli.common import echo_json, print_unlock_links
from gitops.edges.planfile import save_plan
from gitops.inert import inert
from gitops.render.plan import render_json, render_markdown, render_text
from gitops.secrets import redact

if TYPE_CHECKING:
    from gitops.app.pipeline import Planned
    from gitops.core.plan import Plan


def show(result: Plan, fmt: str, *, now: float, color: bool, full: bool) -> None:
    """The plan in the chosen format, and each failed server's error."""
    if fmt == "json":
        echo_json(render_json(result, now=now))
    elif fmt == "markdown":
        click.echo(redact(render_markdown(result, now=now)), nl=False)
    else:
        click.echo(redact(render_text(result, now=now, color=color, full=full)), nl=False)
    for failure in result.failed:
        click.echo(inert(redact(f"Error: {failure.message}")), err=True)


def report(planned: Planned, out: Path | None) -> None:
    """The budget's refusal (raised when no server failed: its exit code is the run's), and the saved plan."""
    result, refusal = planned.plan, planned.refusal
    if refusal is not None:
        print_unlock_links(refusal)
        if result.failure_code is None:
            raise refusal
        click.echo(inert(redact(f"Error: {refusal}")), err=True)
    if out is not None and refusal is None:
        save_plan(result, out)
        click.echo(f"Plan saved to {out}; apply it with: gitops apply {out}", err=True)
        if result.failed:
            click.echo("(the plan leaves out the failed servers: apply it with --keep-going)", err=True)
