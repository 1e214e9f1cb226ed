"""``gitops watch``: deploy on every change (debounced, paced under the day's upload limit) until Ctrl-C.

Deploy on save is for iterating on a bot: no health watch after each deploy and no upload reserved for a rollback.
The use case (:func:`gitops.app.watch.deploy_on_save`) plans and applies as ``gitops apply`` does; this module gives
it the file watcher (the optional extra ``serve``'s watchfiles, checked before it is imported) and the presenter
(:class:`gitops.render.outcome.TextConsole`) that prints its lines.
The command's function is :func:`watch_command`; its name on the command line is ``watch``.
"""

from __future__ import annotations

import threading
from pathlib import Path

import click

from gitops.app.watch import DEFAULT_DEBOUNCE, WatchSettings, deploy_on_save
from gitops.cli.common import manifest_option, max_wait_option, options_from, state_dir_option, target_options
from gitops.cli.extras import require_serve_extra
from gitops.config.manifest import load_manifest
from gitops.core.health import VerifyOverrides
from gitops.errors import ExitCode
from gitops.render.outcome import TextConsole, watch_stopped


@click.command("watch")
@manifest_option
@target_options
@click.option(
    "--max-uploads-per-hour",
    type=click.IntRange(min=1),
    default=None,
    envvar="GITOPS_MAX_UPLOADS_PER_HOUR",
    help="Pace: at most this many POST /api/user/code an hour [default: the day's limit less budget.reserve, "
    "over 24 hours: 10 with no reserve]. [env: GITOPS_MAX_UPLOADS_PER_HOUR]",
)
@click.option(
    "--debounce",
    type=click.FloatRange(min=0),
    default=DEFAULT_DEBOUNCE,
    show_default=True,
    envvar="GITOPS_DEBOUNCE",
    help="Seconds without a change that end a burst of changes (one deploy per burst). [env: GITOPS_DEBOUNCE]",
)
@state_dir_option
@max_wait_option
@click.pass_context
def watch_command(
    ctx: click.Context,
    manifest: Path,
    servers: tuple[str, ...],
    branches: tuple[str, ...],
    max_uploads_per_hour: int | None,
    debounce: float,
    max_wait: float,
    state_dir: Path | None,
) -> int:
    """Deploy on every change of the code (and rebuild when a build's sources change), until Ctrl-C.

    Watches the manifest's folder: a change under the root of a branch without a build (rollup -cw writing dist/)
    deploys it; a change elsewhere that Git does not ignore re-runs the builds, then deploys. Bursts of changes
    become one deploy once nothing changed for --debounce seconds; uploads are paced (--max-uploads-per-hour) so
    that the day's limit is never spent, and what waits is shown with the time it may go. One line per deploy.

    Stops with exit code 0 on Ctrl-C (130 when Ctrl-C interrupts a deploy in progress); 5 or 7 when the manifest
    or the credentials need fixing. Server and network errors are reported and retried.
    """
    require_serve_extra("watch")
    # After the check: watchfiles is the optional extra's.
    from gitops.edges.watching import file_changes  # noqa: PLC0415 (boundary: the serve extra)

    options = options_from(
        ctx,
        manifest=manifest,
        ref=None,
        refresh="auto",
        max_wait=max_wait,
        state_dir=state_dir,
        servers=servers,
        branches=branches,
        # Deploy on save is for iterating: no health watch after each save, and no upload reserved for a rollback.
        verify=VerifyOverrides(enabled=False),
    )
    settings = WatchSettings(debounce=debounce, max_uploads_per_hour=max_uploads_per_hour)
    # The manifest's own folder, as loading finds it (a bad -m is a manifest error here, before anything starts).
    folder = load_manifest(manifest).base_dir
    stop = threading.Event()

    console = TextConsole(click.echo)  # a deploy's outcome may quote the server: redacted and inert
    with file_changes(folder, settings.poll, stop) as source:
        state = deploy_on_save(options, source, console.say, settings=settings, stop=stop)
    # Ctrl-C while idle is how a watch ends: exit 0. Ctrl-C during a deploy is re-raised by the use case and ends
    # as every interrupted command does (gitops.cli.run: "interrupted.", exit 130).
    console.say(watch_stopped(state.deploys, state.uploads, state.failed_uploads))
    return ExitCode.OK
