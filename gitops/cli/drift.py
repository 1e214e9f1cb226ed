"""``gitops drift``: which branches were changed on the servers outside Git since this tool applied them.

Code edited in the game's own editor, or uploaded by another tool, is removed by the next apply without a word:
drift says so first. It downloads each branch this tool applied (budgeted like a plan) and compares it with what
was applied (:mod:`gitops.app.drift`); the exit code lets a scheduled CI job open an issue when something
drifted. The report is text, Markdown or JSON (:mod:`gitops.render.drift`).
"""

from __future__ import annotations

from pathlib import Path

import click

from gitops.app.drift import check_drift, drift_exit_code
from gitops.app.session import open_session
from gitops.cli.common import (
    chosen_format,
    echo_json,
    format_options,
    manifest_option,
    max_wait_option,
    options_from,
    print_unlock_links,
    state_dir_option,
    target_options,
)
from gitops.errors import BudgetError
from gitops.inert import inert
from gitops.render.drift import render_json, render_markdown, render_text
from gitops.secrets import redact


@click.command()
@manifest_option
@target_options
@max_wait_option
@state_dir_option
@format_options("the report")
@click.pass_context
def drift(
    ctx: click.Context,
    manifest: Path,
    servers: tuple[str, ...],
    branches: tuple[str, ...],
    max_wait: float,
    state_dir: Path | None,
    fmt: str,
    as_json: bool,
    as_markdown: bool,
) -> int:
    """Show the branches changed on the servers outside Git since this tool applied them.

    Downloads each branch this tool applied (budgeted like plan) and compares it with the ledger's last applied
    record. A branch never applied by this tool is "no record", not drift. Exit code 0: no drift; 2: drift;
    12: a branch's last deploy is unverified or failing (before 2); 3: the downloads do not fit the rate-limit
    budget; other codes: errors (gitops help exit-codes).
    """
    fmt = chosen_format(fmt, as_json, as_markdown)
    options = options_from(
        ctx,
        manifest=manifest,
        ref=None,
        refresh="always",
        max_wait=max_wait,
        state_dir=state_dir,
        servers=servers,
        branches=branches,
    )
    # The session is narrowed to the targets (gitops.app.targets): its manifest holds the chosen branches only.
    with open_session(options) as session:
        try:
            report = check_drift(session)
        except BudgetError as exc:
            print_unlock_links(exc)
            raise
    if fmt == "json":
        echo_json(render_json(report))
    elif fmt == "markdown":
        click.echo(redact(render_markdown(report)), nl=False)
    else:
        click.echo(inert(redact(render_text(report))), nl=False)
    return drift_exit_code(report)
