"""``gitops token`` (a token's scope and unlimited time left) and ``gitops unlock`` (the no-rate-limit link).

A token's scope decides what plan and apply may do, and an unlimited token lifts the rate limits for a while:
both are what a player asks before a large deploy. The link carries the token, so it is printed whole only when
standard output is an interactive terminal; anywhere else (a CI log, a pipe, a file) the token in it is shown as
``<hidden>`` with a sentence saying how to see it. What the server says of a token (its endpoints' and websockets'
names) is printed through the neutraliser (:func:`gitops.inert.inert`), as every server text is.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from gitops.app.options import DEFAULT_MAX_WAIT, DEFAULT_REFRESH
from gitops.app.session import Session
from gitops.cli.common import is_terminal, manifest_option, options_from, refuse_unread_env, state_dir_option
from gitops.config.manifest import load_manifest
from gitops.core.budget import utc
from gitops.core.endpoints import APPLY_ENDPOINTS, LIST_ENDPOINT, PLAN_ENDPOINTS
from gitops.errors import GitopsError, UsageError
from gitops.inert import inert
from gitops.secrets import HIDDEN, redact


def _server_option(f: Any) -> Any:
    return click.option(
        "--server",
        "server_name",
        envvar="GITOPS_SERVERS",  # the one name of --server's variable, as for every command
        default=None,
        metavar="NAME",
        callback=refuse_unread_env,
        help="The manifest's server (key under 'servers'); needed when it has more than one. [env: GITOPS_SERVERS]",
    )(f)


def _open(ctx: click.Context, manifest: Path, server_name: str | None, state_dir: Path | None) -> tuple[Session, str]:
    """A session for the manifest and the server the command is about."""
    loaded = load_manifest(manifest)
    names = sorted(loaded.manifest.servers)
    if server_name is None:
        if len(names) != 1:
            raise UsageError(
                f"the manifest has several servers ({', '.join(names)}); choose one with --server NAME "
                "(or GITOPS_SERVERS)."
            )
        server_name = names[0]
    elif "," in server_name:
        raise UsageError(f"'{server_name}' names several servers; this command is about one: --server NAME.")
    elif server_name not in loaded.manifest.servers:
        raise UsageError(f"the manifest has no server '{server_name}'; its servers are: {', '.join(names)}.")
    options = options_from(
        ctx, manifest=manifest, ref=None, refresh=DEFAULT_REFRESH, max_wait=DEFAULT_MAX_WAIT, state_dir=state_dir
    )
    return Session(loaded, options), server_name


def _warn(session: Any) -> None:
    for warning in session.warnings():
        click.echo(inert(redact(f"warning: {warning}")), err=True)


def _names(names: tuple[str, ...]) -> str:
    """The server's names of endpoints or websockets, each on one line (a line break in one is shown as ``\\n``)."""
    return ", ".join(inert(name, one_line=True) for name in names)


def _left(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"


@click.command()
@manifest_option
@_server_option
@state_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON (format_version 1) instead of text.")
@click.pass_context
def token(ctx: click.Context, manifest: Path, server_name: str | None, state_dir: Path | None, as_json: bool) -> None:
    """Show a token's scope and its unlimited time left (GET /api/auth/query-token).

    Says whether the scope is enough for plan and for apply. Official servers only: private servers have no
    persistent tokens and no rate limits.
    """
    session, server = _open(ctx, manifest, server_name, state_dir)
    try:
        client = session.client(server)
        info = client.query_token()
        source = session.auth(server).source
    finally:
        _warn(session)
        session.close()
    granted = set(info.endpoints)
    plan_missing = [] if info.full else [e for e in PLAN_ENDPOINTS if e not in granted]
    apply_missing = [] if info.full else [e for e in (*PLAN_ENDPOINTS, *APPLY_ENDPOINTS) if e not in granted]
    url = session.loaded.manifest.servers[server].url
    if as_json:
        doc = {
            "format_version": 1,
            "server": server,
            "url": url,
            "full": info.full,
            "endpoints": list(info.endpoints),
            "websockets": list(info.websockets),
            "memory_segments": list(info.memory_segments),
            "unlimited_until": info.unlimited_until,
            "unlimited_seconds": info.unlimited_seconds,
            "plan_missing": plan_missing,
            "apply_missing": apply_missing,
        }
        click.echo(inert(json.dumps(doc, indent=2)))  # ASCII-escaped already: inert keeps every byte
        return
    if info.full:
        scope = "full access"
    else:
        parts = [f"endpoints: {_names(info.endpoints) or 'none'}"]
        if info.websockets:
            parts.append(f"websockets: {_names(info.websockets)}")
        if info.memory_segments:
            parts.append(f"memory segments: {', '.join(str(s) for s in info.memory_segments)}")
        scope = "restricted (" + "; ".join(parts) + ")"
    lines = [f"Server '{server}' ({url}), token from {source}:", f"  scope:     {scope}"]
    plan_line = "ok" if not plan_missing else "needs " + ", ".join(plan_missing)
    if not info.full and LIST_ENDPOINT not in granted and not plan_missing:
        plan_line += f" (without {LIST_ENDPOINT}, apply re-sends activation every time)"
    lines.append(f"  plan:      {plan_line}")
    lines.append(f"  apply:     {'ok' if not apply_missing else 'needs ' + ', '.join(apply_missing)}")
    if info.unlimited_until is not None:
        lines.append(
            f"  unlimited: until {utc(info.unlimited_until)} ({_left(info.unlimited_seconds)} left); "
            "no rate limits apply"
        )
    else:
        lines.append("  unlimited: no; rate limits apply ('gitops unlock' lifts them for two hours)")
    # The endpoint and websocket names are the server's text: a restricted scope's names are shown, never acted on.
    click.echo(inert(redact("\n".join(lines))))


@click.command()
@manifest_option
@_server_option
@state_dir_option
@click.option("--wait", is_flag=True, help="After printing the link, wait until the token is unlimited.")
@click.option(
    "--poll-seconds",
    type=click.FloatRange(min=0.01),
    default=5.0,
    show_default=True,
    help="With --wait: how often to ask the server (GET /api/auth/query-token).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=600.0,
    show_default=True,
    envvar="GITOPS_UNLOCK_TIMEOUT",
    help="With --wait: give up after this many seconds. [env: GITOPS_UNLOCK_TIMEOUT]",
)
@click.pass_context
def unlock(
    ctx: click.Context,
    manifest: Path,
    server_name: str | None,
    state_dir: Path | None,
    wait: bool,
    poll_seconds: float,
    timeout: float,
) -> None:
    """Print the no-rate-limit link; --wait until the token is unlimited.

    Open the link in a browser and press "Proceed": the token has no rate limits for two hours. The link holds
    the token, so it is shown whole only on an interactive terminal.
    """
    session, server = _open(ctx, manifest, server_name, state_dir)
    try:
        client = session.client(server)
        link = client.no_rate_limit_url()
        click.echo(
            f'Open this link in a browser and press "Proceed" to lift every rate limit of the token for server '
            f"'{server}' for two hours:"
        )
        if is_terminal(sys.stdout):
            click.echo(link.reveal())
        else:
            click.echo(redact(link.reveal()))
            click.echo(
                f"(The token in the link is shown as {HIDDEN} because standard output is not an interactive "
                "terminal, and logs keep what is printed. Run 'gitops unlock"
                + (f" --server {server}" if server_name else "")
                + "' in a terminal to see the whole link.)"
            )
        if not wait:
            return
        clock = session.options.clock
        deadline = clock.now() + timeout
        click.echo(
            f"Waiting until the token is unlimited (asking every {poll_seconds:g} s, for at most {timeout:g} s) ...",
            err=True,
        )
        while True:
            info = client.query_token()
            if info.unlimited_until is not None:
                click.echo(
                    f"The token for server '{server}' is unlimited until {utc(info.unlimited_until)} "
                    f"({_left(info.unlimited_seconds)} left)."
                )
                return
            left = deadline - clock.now()
            if left <= 0:
                raise GitopsError(
                    f"the token for server '{server}' is still rate limited after waiting {timeout:g} s.",
                    hint="Open the link, press \"Proceed\", then run 'gitops unlock --wait' again (or plan and "
                    "apply: the budget check shows what fits now).",
                )
            clock.sleep(min(poll_seconds, left))
    finally:
        _warn(session)
        session.close()
