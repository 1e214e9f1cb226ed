"""``gitops apply``: make the servers hold what the repository holds."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from gitops.cli.common import is_terminal, options_from, plan_options, print_unlock_links, use_color
from gitops.errors import BudgetError, ExitCode, UsageError


@click.command()
@click.argument("plan_file", required=False, type=click.Path(path_type=Path, dir_okay=False))
@plan_options
@click.option(
    "-y",
    "--yes",
    is_flag=True,
    envvar="GITOPS_YES",
    help="Apply without asking; required when there is no terminal. [env: GITOPS_YES]",
)
@click.pass_context
def apply(
    ctx: click.Context,
    plan_file: Path | None,
    manifest: Path,
    ref: str | None,
    refresh: str,
    max_wait: float,
    state_dir: Path | None,
    no_color: bool,
    yes: bool,
) -> int:
    """Make the servers hold what the repository holds.

    Without PLAN_FILE: make a fresh plan, show it, and apply it once confirmed (at a terminal, or by --yes).
    With PLAN_FILE (saved by 'gitops plan --out'): apply exactly that plan, after checking that the servers
    still hold what it was made from and that the manifest is unchanged.
    """
    from gitops.app.applying import load_saved_plan, run_apply
    from gitops.app.planning import make_plan
    from gitops.app.session import open_session
    from gitops.core.apply import Outcome
    from gitops.render.plan import render_text

    options = options_from(ctx, manifest=manifest, ref=ref, refresh=refresh, max_wait=max_wait, state_dir=state_dir)
    saved = plan_file is not None
    if not saved and not yes and not (is_terminal(sys.stdin) and is_terminal(sys.stdout)):
        # Said before planning, so that no download is spent on a run that cannot go on.
        raise UsageError(
            "apply needs confirmation and there is no terminal to ask at",
            hint="Pass --yes (or set GITOPS_YES=1) to apply without asking, e.g. in CI.",
        )
    with open_session(options) as s:
        result = load_saved_plan(plan_file, s) if plan_file is not None else make_plan(s)
        click.echo(render_text(result, now=options.clock.now(), color=use_color(no_color)), nl=False)

        def confirm() -> bool:
            return click.confirm("Apply this plan?", default=False)

        def progress(outcome: Outcome) -> None:
            click.echo(outcome.line())

        try:
            report = run_apply(s, result, saved=saved, confirm=None if saved or yes else confirm, progress=progress)
        except BudgetError as refusal:
            print_unlock_links(refusal)
            raise
        if report.cancelled:
            click.echo("Apply cancelled; nothing was changed.", err=True)
            # The person answered no: nothing was applied (an error for scripts that expected a deploy).
            return ExitCode.FAILURE
        if report.applied_line is not None:
            click.echo(report.applied_line)
    return ExitCode.OK
