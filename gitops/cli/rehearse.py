"""``gitops rehearse``: run each branch's code in a throwaway world of the real private server, and judge it.

A deploy's verification judges the code on the live server, after the upload: a rehearsal judges it before, in a
world of its own on loopback where a failing bot costs nothing. The code is read and built as a plan reads it and
judged by the same judge as apply's verify, so a rehearsal and a deploy cannot disagree on what healthy means
(:mod:`gitops.app.rehearsal`, :mod:`gitops.render.rehearsal`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from gitops.app.colonycopy import copy_colony
from gitops.app.options import DEFAULT_MAX_WAIT, DEFAULT_REFRESH
from gitops.app.rehearsal import DEFAULT_TICKS, RehearsalRequest, rehearse
from gitops.app.targets import Targets
from gitops.cli.common import (
    chosen_format,
    echo_json,
    format_options,
    manifest_option,
    options_from,
    state_dir_option,
    target_options,
)
from gitops.config.manifest import load_manifest
from gitops.edges.codesetfile import CODESET_VARIABLE
from gitops.edges.outfile import check_out_path
from gitops.edges.privateserver import DEFAULT_BUCKET, DEFAULT_CPU
from gitops.edges.rehearsalfile import WHAT, write_result
from gitops.edges.serverinstall import INSTALL_ENV
from gitops.errors import UsageError
from gitops.inert import inert
from gitops.render.rehearsal import markdown, text
from gitops.secrets import redact

F = TypeVar("F", bound=Callable[..., Any])


def _file_option(name: str, help_text: str) -> Callable[[F], F]:
    """An option naming a file (a code set to read, the result to write)."""
    return click.option(name, type=click.Path(path_type=Path, dir_okay=False), default=None, help=help_text)


@click.command("rehearse")
@manifest_option
@click.option(
    "--ref",
    envvar="GITOPS_REF",
    default=None,
    metavar="REF",
    help="Rehearse the code of this Git ref (built in a temporary checkout, as plan --ref does) instead of the "
    "working tree. [env: GITOPS_REF]",
)
@click.option(
    "--base",
    default=None,
    metavar="REF",
    help="Also rehearse this commit's code (e.g. the pull request's base) in a second world of the same start, and "
    "compare: failed ticks, errors, caught errors, console lines, CPU per tick, memory.",
)
@click.option(
    "--ticks",
    type=click.IntRange(1, 10_000),
    default=DEFAULT_TICKS,
    show_default=True,
    help="Ticks each bot runs (judged after the first, which may still be the world's start).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(1, 3600),
    default=None,
    metavar="SECONDS",
    help="How long the world may tick before the verdict is unknown. [default: 60 + ticks/2 per bot]",
)
@click.option(
    "--cpu",
    "cpu_limit",
    type=click.IntRange(1, 300),
    default=None,
    help="Each bot's CPU limit per tick (Game.cpu.limit): your account's, for numbers like your own. [default: the "
    f"server's cpu: limit in the manifest, else with --from-server the account's own, else {DEFAULT_CPU}]",
)
@click.option(
    "--bucket",
    type=click.IntRange(0, 10_000),
    default=None,
    help="Each bot's CPU bucket at the start (Game.cpu.bucket); a tick may use up to min(500, bucket + limit). "
    f"[default: the server's cpu: bucket in the manifest, else {DEFAULT_BUCKET}]",
)
@click.option(
    "--server-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    envvar=INSTALL_ENV,
    help="An installed private server (e.g. .private-server of 'bash scripts/private-server.sh install') instead "
    f"of the one the tool installs into its cache folder on first use. [env: {INSTALL_ENV}]",
)
@click.option(
    "--from-server",
    "from_server",
    default=None,
    metavar="NAME",
    help="Start every bot on a copy of the colony of this server's account (a server of the manifest): its "
    "Memory and owned rooms (terrain, structures, creeps, sources, controller), read with read-only requests "
    "checked against the token's budget first (exit 3 when they do not fit). docs/rehearsal.md.",
)
@state_dir_option
@_file_option(
    "--codeset",
    "Rehearse the code of this code set file (`gitops build --out`, made in a job without secrets) instead of "
    "reading and building the working tree: nothing of the repository runs here but the bots in the world.",
)
@_file_option(
    "--base-codeset",
    "Compare with the base's code from this code set file (`gitops build --ref BASE --out FILE`) instead of "
    "building --base here.",
)
@_file_option(
    "--result-out",
    "Also write the result (figures and texts, no Markdown) to this file, for a job that comments from it "
    "(the Action's command: comment).",
)
@target_options
@format_options("the rehearsal")
@click.pass_context
def rehearse_command(
    ctx: click.Context,
    manifest: Path,
    ref: str | None,
    base: str | None,
    ticks: int,
    timeout: float | None,
    cpu_limit: int | None,
    bucket: int | None,
    server_dir: Path | None,
    from_server: str | None,
    state_dir: Path | None,
    codeset: Path | None,
    base_codeset: Path | None,
    result_out: Path | None,
    servers: tuple[str, ...],
    branches: tuple[str, ...],
    fmt: str,
    as_json: bool,
    as_markdown: bool,
) -> int:
    """Run each branch's code in a throwaway world of the real Screeps private server, and judge it.

    The code is read and built exactly as plan reads it. Each branch's bot gets a room and a spawn in a world of its
    own on 127.0.0.1 (no account, no token: nothing leaves this machine), runs --ticks ticks, and is judged by the
    same judge as apply's verify, and by the errors it catches and logs itself. With --base, that commit's code runs
    in a second world of the same start (the same room, the same spawn place), and the two are compared: new and
    gone errors, new console lines, CPU and memory changes with their noise band.

    Exit code 0: healthy; 9: the code fails in the world; 6: code that does not parse or has no main (found before
    any bot runs); 14: unknown (too few ticks), or the world could not be installed or run (docs/rehearsal.md).
    """
    fmt = chosen_format(fmt, as_json, as_markdown)
    if base is not None and base_codeset is not None:
        raise UsageError(
            f"--base {base} and --base-codeset {base_codeset} both say where the base's code comes from; give one",
            hint="A code set file holds the base's code already built: drop --base.",
        )
    if result_out is not None:
        check_out_path(result_out, what=WHAT, option="--result-out")  # before the world: a wrong path is known now
    env = dict(os.environ)
    if codeset is not None:
        env[CODESET_VARIABLE] = str(codeset.absolute())
    loaded = load_manifest(manifest)
    colony = None
    if from_server is not None:
        # The only requests of a rehearsal, all reads; the session (and its credentials) ends before any build.
        options = options_from(
            ctx, manifest=manifest, ref=None, refresh=DEFAULT_REFRESH, max_wait=DEFAULT_MAX_WAIT, state_dir=state_dir
        )
        colony = copy_colony(options, loaded, from_server)
        for note in colony.notes:
            click.echo(inert(f"rehearse: --from-server: {note}"), err=True)
    request = RehearsalRequest(
        ticks=ticks,
        ref=ref,
        base=base,
        timeout=timeout,
        server_dir=server_dir,
        targets=Targets.of(servers, branches),
        colony=colony,
        cpu=cpu_limit,
        bucket=bucket,
        base_codeset=base_codeset,
    )
    result = rehearse(loaded, request, env, say=lambda line: click.echo(line, err=True))
    if result_out is not None:
        write_result(result_out, result)
    args = (result.branches, result.result, result.ticks, result.head_source, result.base_source)
    if fmt == "json":
        echo_json(json.dumps(result.document(), indent=2))
    elif fmt == "markdown":
        click.echo(redact(markdown(*args)), nl=False)
    else:
        click.echo(inert(redact("\n".join(text(*args)))))  # the world's error texts are the bot's: inert
    return result.exit_code
