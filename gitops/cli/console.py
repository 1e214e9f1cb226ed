"""``gitops console``: stream an account's console (what players use the Node CLI for), redacted, until Ctrl-C.

The console is how a player sees the code they deployed run: log lines, results, and the errors of failing ticks.
It is the account's, not a branch's, so the command needs one server; the socket is opened with the same credentials
as a deploy (:mod:`gitops.app.console`, :mod:`gitops.edges.socket`). Every line is redacted and made inert before
it is printed: a bot may log anything, tokens and terminal escapes included.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from gitops.app.console import pick_server, stream_console
from gitops.app.session import open_session
from gitops.cli.common import manifest_option, options_from, state_dir_option, target_options
from gitops.errors import ExitCode
from gitops.inert import inert
from gitops.secrets import redact


@click.command()
@manifest_option
@target_options
@state_dir_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object a line: {type, text, shard}.")
@click.option(
    "--seconds",
    type=click.FloatRange(0.1, 365 * 24 * 3600),
    default=None,
    help="Stop after this many seconds (default: until Ctrl-C).",
)
@click.pass_context
def console(
    ctx: click.Context,
    manifest: Path,
    servers: tuple[str, ...],
    branches: tuple[str, ...],
    state_dir: Path | None,
    as_json: bool,
    seconds: float | None,
) -> int:
    """Stream the console of the account a branch is deployed with (log lines, results, and the errors of ticks
    whose code failed), over the game's websocket, until Ctrl-C (exit 0) or --seconds.

    The console is the account's, not a branch's: --server or --branch picks the server when the manifest has
    several. Tokens never appear in the output.
    """
    options = options_from(
        ctx,
        manifest=manifest,
        ref=None,
        refresh="never",
        max_wait=60.0,
        state_dir=state_dir,
        servers=servers,
        branches=branches,
    )
    with open_session(options) as session:
        server = pick_server(session)
        try:
            for line in stream_console(session, server, seconds=seconds):
                text = json.dumps(line.document(), ensure_ascii=False) if as_json else line.line()
                click.echo(inert(redact(text)))
        except KeyboardInterrupt:
            click.echo("Stopped.", err=True)
    return ExitCode.OK
