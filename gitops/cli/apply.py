"""``gitops apply``: make the servers hold what the repository holds."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from gitops.cli.common import is_terminal, options_from, plan_options, print_unlock_links, use_color
from gitops.errors import BudgetError, UsageError

#: The person answered no at the confirmation: nothing was applied (an error for scripts that expected a deploy).
EXIT_CANCELLED = 1


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
    from gitops.app import workflow
    from gitops.core.apply import Outcome, apply_plan, verify_plan
    from gitops.core.plan import DOWNLOAD
    from gitops.edges.planfile import load_plan
    from gitops.render.plan import applied_line, render_text

    options = options_from(ctx, manifest=manifest, ref=ref, refresh=refresh, max_wait=max_wait, state_dir=state_dir)
    saved = plan_file is not None
    if not saved and not yes and not (is_terminal(sys.stdin) and is_terminal(sys.stdout)):
        # Said before planning, so that no download is spent on a run that cannot go on.
        raise UsageError(
            "apply needs confirmation and there is no terminal to ask at",
            hint="Pass --yes (or set GITOPS_YES=1) to apply without asking, e.g. in CI.",
        )
    with workflow.session(options) as s:
        if plan_file is not None:
            result = load_plan(plan_file)
            workflow.check_saved_plan(result, s.loaded)
        else:
            result, _ = workflow.plan(options, s)
        now = options.clock.now()
        click.echo(render_text(result, now=now, color=use_color(no_color)), nl=False)
        if not result.has_changes:
            click.echo("Nothing to apply.")
            return 0
        try:
            # A saved plan is checked against the servers first: one download per branch it uploads to.
            extra: dict[str, dict[str, int]] = {}
            if saved:
                for p in result.payloads:
                    extra.setdefault(p.server, {DOWNLOAD: 0})[DOWNLOAD] += 1
            workflow.recheck_budget(result, s, extra)
        except BudgetError as refusal:
            print_unlock_links(refusal)
            raise
        if not saved and not yes and not click.confirm("Apply this plan?", default=False):
            click.echo("Apply cancelled; nothing was changed.", err=True)
            return EXIT_CANCELLED
        writers = {b.server: s.client(b.server) for b in result.branches if b.steps}
        uploads = verify_plan(result, writers, saved=saved)

        def progress(outcome: Outcome) -> None:
            click.echo(outcome.line())

        apply_plan(result, writers, uploads, progress=progress)
        click.echo(applied_line(result))
    return 0
