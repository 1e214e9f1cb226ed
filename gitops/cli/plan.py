"""``gitops plan``: what apply would change, and the requests it would spend."""

from __future__ import annotations

from pathlib import Path

import click

from gitops.app import pipeline
from gitops.cli.common import chosen_format, format_options, options_from, plan_options, target_options, use_color
from gitops.edges.outfile import check_out_path


@click.command()
@plan_options
@target_options
@format_options("the plan")
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    envvar="GITOPS_PLAN_OUT",
    help="Save the plan (with the exact content to upload) for 'gitops apply FILE'. [env: GITOPS_PLAN_OUT]",
)
@click.pass_context
def plan(
    ctx: click.Context,
    manifest: Path,
    ref: str | None,
    refresh: str,
    max_wait: float,
    state_dir: Path | None,
    no_color: bool,
    full: bool,
    fmt: str,
    as_json: bool,
    as_markdown: bool,
    out: Path | None,
    servers: tuple[str, ...],
    branches: tuple[str, ...],
) -> int:
    """Show what apply would change on the servers.

    Exit code 0: no changes; 2: changes to apply; 12: a branch's last deploy is unverified (its watch was
    interrupted or never ended) or failing, with or without changes; 3: the plan does not fit the rate-limit
    budget; other codes: errors (gitops help exit-codes). A server that fails (unreachable, credentials refused,
    an error answer) does not stop the others: they are planned and shown, the failed one is marked, and the exit
    code is the worst failure's (or 3 when that is higher and the budget does not fit), never 0 or 2.
    """
    fmt = chosen_format(fmt, as_json, as_markdown)
    if out is not None:
        check_out_path(out, what="plan")  # before any request is spent (the plan file's own check, without its models)
    options = options_from(
        ctx,
        manifest=manifest,
        ref=ref,
        refresh=refresh,
        max_wait=max_wait,
        state_dir=state_dir,
        servers=servers,
        branches=branches,
    )
    reading = pipeline.read_ahead(options)  # its child reads the code while the planning is imported
    try:
        with pipeline.open_session(options, reading) as session:
            result = pipeline.make_or_load(session, isolate=True, reading=reading)
            if not result.has_changes and not result.failed:
                reading.remember_read()  # the servers hold the code as read: a hint for the next run's imports
            # Imported once the plan is made (make_plan has the renderer imported while it waits for the servers).
            from gitops.cli import planshow  # noqa: PLC0415 (boundary: after the servers)

            planshow.show(result, fmt, now=options.clock.now(), color=use_color(no_color), full=full)
            planned = pipeline.weigh(session, result)
            planshow.report(planned, out)
    finally:
        reading.cancel()  # a child still reading: the run failed before it planned (after it, nothing)
    return planned.exit_code
