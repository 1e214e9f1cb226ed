"""``gitops apply``: make the servers hold what the repository holds."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gitops.app import pipeline
from gitops.cli.common import is_terminal, options_from, plan_options, print_unlock_links, target_options, use_color
from gitops.errors import BudgetError, PlanFileError, UsageError

if TYPE_CHECKING:
    from gitops.app.pipeline import Reading
    from gitops.core.apply import Outcome
    from gitops.core.plan import Plan
    from gitops.render.outcome import Console


@click.command()
@click.argument("plan_file", required=False, type=click.Path(path_type=Path, dir_okay=False))
@plan_options
@target_options
@click.option(
    "--keep-going",
    is_flag=True,
    envvar="GITOPS_KEEP_GOING",
    help="When a server fails (unreachable, credentials refused, an error answer), still apply to the others, "
    "then report the failed ones (exit code non-zero). Without it nothing is written when planning any server "
    "fails. [env: GITOPS_KEEP_GOING]",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the outcome as one JSON document on stdout (the plan as 'gitops plan --json' has it, each step's "
    "outcome, whether everything was applied); the question, if any, goes to stderr.",
)
@click.option(
    "--no-verify",
    is_flag=True,
    envvar="GITOPS_NO_VERIFY",
    help="Skip the health check after apply that the manifest's verify: asks for (and reserve no rollback "
    "upload). [env: GITOPS_NO_VERIFY]",
)
@click.option(
    "--verify-ticks",
    type=click.IntRange(1, 1000),
    envvar="GITOPS_VERIFY_TICKS",
    help="Ticks to watch, instead of each branch's verify.ticks. [env: GITOPS_VERIFY_TICKS]",
)
@click.option(
    "--verify-timeout",
    type=click.FloatRange(0.1, 3600),
    envvar="GITOPS_VERIFY_TIMEOUT",
    help="Seconds to wait for those ticks, instead of each branch's verify.timeout. [env: GITOPS_VERIFY_TIMEOUT]",
)
@click.option(
    "--verify-again",
    is_flag=True,
    help="Watch and judge again each branch whose last deploy is unverified (its watch was interrupted or never "
    "ended) or failing and that this plan does not change; its recorded state takes the new outcome. Nothing is "
    "undone ('gitops rollback' does that).",
)
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
    full: bool,
    yes: bool,
    servers: tuple[str, ...],
    branches: tuple[str, ...],
    keep_going: bool,
    as_json: bool,
    no_verify: bool,
    verify_ticks: int | None,
    verify_timeout: float | None,
    verify_again: bool,
) -> int:
    """Make the servers hold what the repository holds.

    Without PLAN_FILE: make a fresh plan, show it, and apply it once confirmed (at a terminal, or by --yes).
    With PLAN_FILE (saved by 'gitops plan --out'): apply exactly that plan, after checking that the servers
    still hold what it was made from and that the manifest is unchanged. With --server/--branch, only that part
    of the saved plan is applied.

    A branch whose last deploy is unverified or failing (exit 12) is shown; a plan that changes it deploys anew
    (the new deploy replaces its state), --verify-again judges it again, 'gitops rollback' undoes it.
    """
    overrides = None
    if no_verify or verify_ticks is not None or verify_timeout is not None:
        from gitops.core.health import VerifyOverrides  # noqa: PLC0415 (boundary: the first request)

        overrides = VerifyOverrides(not no_verify, verify_ticks, verify_timeout)
    saved = plan_file is not None
    options = options_from(
        ctx,
        manifest=manifest,
        ref=ref,
        refresh=refresh,
        max_wait=max_wait,
        state_dir=state_dir,
        servers=servers,
        branches=branches,
        verify=overrides,
        unattended_apply=yes and not saved,
    )
    _check_it_can_be_confirmed(saved=saved, yes=yes)
    reading: Reading | None = None
    if plan_file is None:
        reading = pipeline.read_ahead(options)  # its child reads the code while the planning is imported
    try:
        with pipeline.open_session(options, reading) as session:
            result = pipeline.make_or_load(session, isolate=keep_going, reading=reading, plan_file=plan_file)
            # Imported once the plan is made: make_plan imports the plan's renderer while it waits for the servers.
            from gitops.cli import applyshow  # noqa: PLC0415 (boundary: after the servers)

            console = applyshow.text_console(as_json, color=use_color(no_color) and not as_json, full=full)
            console.plan(result, now=options.clock.now())
            _refuse_failed_servers(result, keep_going=keep_going)
            lines = _Lines(as_json, console)
            ask = None if saved or yes else lines.confirm
            if keep_going:
                each = pipeline.apply_each(session, result, saved=saved, confirm=ask, progress=lines.step)
                return applyshow.show_each(each)
            try:
                applied = pipeline.apply(
                    session, result, saved=saved, confirm=ask, progress=lines.step, verify_again=verify_again
                )
            except BudgetError as refusal:
                print_unlock_links(refusal)
                raise
            if as_json:
                applyshow.print_document(result, lines.outcomes, applied, now=options.clock.now())
            told = result.has_changes or verify_again  # else the plan above has said what is still unsettled
            applyshow.show_ended(console, applied, told=told)
            if reading is not None and not result.failed and applied.exit_code == 0:
                reading.remember_read()  # the servers hold the code as read: a hint for the next run's imports
        return applied.exit_code
    finally:
        if reading is not None:
            reading.cancel()  # a child still reading: the run failed before it planned (after it, nothing)


def _check_it_can_be_confirmed(*, saved: bool, yes: bool) -> None:
    """A fresh plan is applied once confirmed: at a terminal, or by --yes. Said before planning, so that no download
    is spent on a run that cannot go on."""
    if not saved and not yes and not (is_terminal(sys.stdin) and is_terminal(sys.stdout)):
        raise UsageError(
            "apply needs confirmation and there is no terminal to ask at",
            hint="Pass --yes (or set GITOPS_YES=1) to apply without asking, e.g. in CI.",
        )


def _refuse_failed_servers(result: Plan, *, keep_going: bool) -> None:
    """Without --keep-going nothing is written when planning any server failed."""
    if result.failed and not keep_going:
        raise PlanFileError(
            "the saved plan leaves out servers whose planning failed ("
            + ", ".join(f.server for f in result.failed)
            + "); nothing was applied",
            hint="Apply the rest with --keep-going, or plan again once the servers answer.",
        )


class _Lines:
    """The question and each step's line (on stderr with --json: stdout holds only the document)."""

    def __init__(self, as_json: bool, console: Console) -> None:
        self.as_json = as_json
        self.console = console
        self.outcomes: list[Outcome] = []

    def confirm(self) -> bool:
        return click.confirm("Apply this plan?", default=False, err=self.as_json)

    def step(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
        self.console.step(outcome)
