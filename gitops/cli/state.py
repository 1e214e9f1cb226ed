"""``gitops status``, ``gitops history`` and ``gitops rollback``: the deployment state the ledgers keep (issue 39).

Their work is in ``gitops.app.deploys``; ``rollback`` plans through the pipeline's plan stage
(``app.pipeline.make_or_load``) and applies through its apply stage (``app.pipeline.apply``) like ``apply`` (the
code of the chosen deploy in place of the repository's), so that a rollback is budget checked, shown and verified
exactly as a deploy is.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from gitops.app import pipeline
from gitops.app.deploys import choose_rollback, history
from gitops.app.session import open_session
from gitops.app.status import status, status_failure
from gitops.cli.common import (
    echo_json,
    is_terminal,
    manifest_option,
    max_wait_option,
    options_from,
    print_unlock_links,
    state_dir_option,
    target_options,
)
from gitops.core.budget import utc
from gitops.core.local import SourceInfo
from gitops.errors import BudgetError, ExitCode, UsageError
from gitops.inert import inert
from gitops.render.deploys import history_json, history_text, status_json, status_text
from gitops.render.outcome import Ended, TextConsole
from gitops.secrets import redact


@click.command(name="status")
@manifest_option
@target_options
@state_dir_option
@click.option("--json", "as_json", is_flag=True, help="One JSON document: {format_version, branches: [...]}.")
@click.pass_context
def status_(
    ctx: click.Context,
    manifest: Path,
    servers: tuple[str, ...],
    branches: tuple[str, ...],
    state_dir: Path | None,
    as_json: bool,
) -> int:
    """What runs where: per server and branch, the commit and time this tool applied, whether the branch is active
    and whether the server still holds that code (the branch list, and a download where the list cannot say and
    the budget allows; else the ledger's word, labelled), drift seen, and the verification state.

    Exit code 0; 12 when a branch's last deploy is unverified or failing; 1 (unreachable, an error) or 7 (the
    credentials refused) when a server could not be asked, after the ledger's rows.
    """
    options = options_from(
        ctx, manifest=manifest, ref=None, refresh="never", max_wait=60.0, state_dir=state_dir, servers=servers,
        branches=branches,
    )  # fmt: skip
    with open_session(options) as session:
        report = status(session)
    rows = report.rows
    if as_json:
        echo_json(status_json(rows))  # a failure below is then the Error line alone, not a second JSON document
    else:
        click.echo(inert(redact(status_text(rows))), nl=False)
    failure = status_failure(report)
    if failure is not None:
        raise failure  # after the rows: what the ledger says is shown, but status cannot say what runs there
    unsettled_rows = [r for r in rows if r.verification is not None and r.verification.unsettled]
    return ExitCode.UNVERIFIED if unsettled_rows else ExitCode.OK


@click.command(name="history")
@manifest_option
@target_options
@state_dir_option
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True, help="Deploys shown per server.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document: {format_version, servers: {NAME: [...]}}.")
@click.pass_context
def history_(
    ctx: click.Context,
    manifest: Path,
    servers: tuple[str, ...],
    branches: tuple[str, ...],
    state_dir: Path | None,
    limit: int,
    as_json: bool,
) -> int:
    """The deploys this tool recorded, newest first (number, time, branch, commit, apply or rollback, verification
    state, whether the code is still kept for 'gitops rollback --to N'). From the ledgers only: no request."""
    options = options_from(
        ctx, manifest=manifest, ref=None, refresh="never", max_wait=60.0, state_dir=state_dir, servers=servers,
        branches=branches,
    )  # fmt: skip
    with open_session(options) as session:
        found = history(session)
    text = history_json(found, limit) if as_json else inert(history_text(found, limit))
    click.echo(redact(text), nl=False)
    return ExitCode.OK


@click.command()
@manifest_option
@target_options
@max_wait_option
@state_dir_option
@click.option(
    "--to",
    "to",
    type=click.IntRange(1),
    default=None,
    help="The deploy to restore, by its number in 'gitops history' (default: the code the last verification would "
    "restore, else the branch's newest earlier deploy).",
)
@click.option("-y", "--yes", is_flag=True, envvar="GITOPS_YES", help="Roll back without asking. [env: GITOPS_YES]")
@click.pass_context
def rollback(
    ctx: click.Context,
    manifest: Path,
    servers: tuple[str, ...],
    branches: tuple[str, ...],
    max_wait: float,
    state_dir: Path | None,
    to: int | None,
    yes: bool,
) -> int:
    """Undo a deploy on request: upload again the code of an earlier deploy of one branch (kept beside the
    ledger), planned and applied as 'gitops apply' does (budget checked first; verify: as the manifest says).

    Refused, with nothing sent, when the code of that deploy is no longer kept (exit 4) or the plan does not fit
    the budget (exit 3). Exit codes otherwise as apply's.
    """
    if not yes and not (is_terminal(sys.stdin) and is_terminal(sys.stdout)):
        raise UsageError(
            "rollback needs confirmation and there is no terminal to ask at",
            hint="Pass --yes (or set GITOPS_YES=1) to roll back without asking, e.g. in CI.",
        )
    options = options_from(
        ctx, manifest=manifest, ref=None, refresh="auto", max_wait=max_wait, state_dir=state_dir, servers=servers,
        branches=branches, deploy_how="rollback",
    )  # fmt: skip
    with open_session(options) as session:
        choice = choose_rollback(session, to)
        deploy = choice.deploy
        what = f"deploy #{deploy.n}" if deploy.n else "the code it held before this tool's first deploy"
        commit = f" (commit {deploy.commit[:12]}, applied {utc(deploy.applied_at)})" if deploy.commit else ""
        console = TextConsole(click.echo, err=lambda line: click.echo(line, err=True), what="Rollback")
        console.say(f"Rolling back {choice.server}/{choice.branch} to {what}{commit}.")
        # Recorded under the commit it restores (history, status, the applied record), not the checked-out one.
        restored = f"deploy #{deploy.n}" if deploy.n else "the code before the first deploy"
        source = SourceInfo("rollback", restored, deploy.commit, None)
        code = {(choice.server, choice.branch): choice.code}
        plan = pipeline.make_or_load(session, isolate=False, code=code, source=source)
        console.plan(plan, now=options.clock.now())

        def confirm() -> bool:
            return click.confirm("Roll back with this plan?", default=False)

        try:
            applied = pipeline.apply(
                session, plan, saved=False, confirm=None if yes else confirm, progress=console.step
            )
        except BudgetError as refusal:
            print_unlock_links(refusal)
            raise
        report = applied.report
        console.ended(Ended(report.cancelled, report.applied_line, report.verifications, applied.left))
    return applied.exit_code
