"""``gitops serve``: run the local stand-in of the game service in the foreground.

The stand-in answers the endpoints this tool uses, with persistent tokens, scopes and rate limits, so that a player
can try a deploy before having an account and the tests can talk to a real HTTP server. It is the optional extra
``serve`` (starlette, uvicorn): the command checks the extra is installed before it imports the stand-in, and its
log lines are redacted like everything else the tool prints.
"""

from __future__ import annotations

import logging
import secrets
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from gitops.cli.extras import require_serve_extra
from gitops.edges.clock import Clock, ManualClock, SystemClock
from gitops.errors import GitopsError, UsageError
from gitops.secrets import redact

_ACCOUNTS_FORMAT = """\b
The accounts file (--accounts), YAML:
  users:
    - username: alice              # required, unique
      email: alice@example.com     # optional; HTTP Basic takes it or the username
      password: s3cret             # optional; no password, no HTTP Basic login
      tokens:
        - value: 0123456789abcdef0123456789abcdef   # 8+ printable characters
          full: true                                # every endpoint and segment
        - value: fedcba9876543210fedcba9876543210
          endpoints: ["GET /api/user/code", "POST /api/user/code"]
          memory_segments: [0, 1]
Every option also reads its environment variable (shown as [env var: ...])."""


@click.command(epilog=_ACCOUNTS_FORMAT)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    envvar="GITOPS_SERVE_HOST",
    show_envvar=True,
    help="Address to listen on.",
)
@click.option(
    "--port",
    default=21025,
    show_default=True,
    type=click.IntRange(0, 65535),
    envvar="GITOPS_SERVE_PORT",
    show_envvar=True,
    help="Port to listen on (0: any free port; the banner says which).",
)
@click.option(
    "--accounts",
    type=click.Path(path_type=Path, dir_okay=False),
    envvar="GITOPS_SERVE_ACCOUNTS",
    show_envvar=True,
    help="YAML file of users and tokens (its format is below).",
)
@click.option(
    "--data",
    type=click.Path(path_type=Path, dir_okay=False),
    envvar="GITOPS_SERVE_DATA",
    show_envvar=True,
    help="SQLite file that keeps branches, code, memory and rate-limit state across restarts (created if missing).",
)
@click.option(
    "--demo",
    is_flag=True,
    envvar="GITOPS_SERVE_DEMO",
    show_envvar=True,
    help="Without --accounts: make up one user with a full-access token and print them. Without --data: keep the "
    "state in a temporary file.",
)
@click.option(
    "--testing",
    is_flag=True,
    help="For test suites only: a clock that moves only when told, and control routes under /__standin__/ "
    "(advance the clock, inject faults, read request counts).",
)
def serve(host: str, port: int, accounts: Path | None, data: Path | None, demo: bool, testing: bool) -> None:
    """Run the local stand-in of the game service: persistent tokens, scopes, rate limits and the code endpoint.

    Try a deploy before you have an account: 'gitops serve --demo'.
    """
    require_serve_extra("serve")
    # After the check: the stand-in (starlette, uvicorn) is the optional extra's.
    from gitops.standin.accounts import load_accounts  # noqa: PLC0415 (boundary: the serve extra)
    from gitops.standin.app import create_app  # noqa: PLC0415 (boundary: the serve extra)
    from gitops.standin.runner import (  # noqa: PLC0415 (boundary: the serve extra)
        ForegroundServer,
        bind,
        make_config,
        url_of,
    )
    from gitops.standin.store import StoreError  # noqa: PLC0415 (boundary: the serve extra)

    if accounts is None and not demo:
        raise UsageError(
            "give the users and tokens with --accounts FILE, or use --demo",
            hint="See gitops help serve for the accounts file; 'gitops serve --demo' makes up a user and a token.",
        )
    if data is None and not demo:
        raise UsageError(
            "give --data PATH: the SQLite file that keeps the stand-in's state across restarts",
            hint="With --demo the state may live in a temporary file instead.",
        )
    demo_login: tuple[str, str, str] | None = None
    if accounts is not None:
        users = load_accounts(accounts)
    else:
        demo_login = ("demo", secrets.token_urlsafe(9), secrets.token_hex(16))
        users = load_accounts(
            {
                "users": [
                    {
                        "username": demo_login[0],
                        "email": "demo@localhost.localdomain",
                        "password": demo_login[1],
                        "tokens": [{"value": demo_login[2], "full": True}],
                    }
                ]
            }
        )
    temp_dir: Path | None = None
    if data is None:
        temp_dir = Path(tempfile.mkdtemp(prefix="gitops-serve-"))
        data = temp_dir / "standin.sqlite3"
    clock: Clock = ManualClock(time.time()) if testing else SystemClock()
    try:
        try:
            app = create_app(users, data, clock, testing=testing)
        except StoreError as exc:
            raise UsageError(
                str(exc), hint="Point --data at a new file, or at one an earlier 'gitops serve' wrote."
            ) from exc
        try:
            try:
                sock = bind(host, port)
            except OSError as exc:
                raise GitopsError(
                    f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                    hint="Another program may use the port; pick another with --port (0 picks a free one).",
                ) from exc
            url = url_of(sock)
            _configure_logging()
            _banner(url, users, data, temp_dir is not None, demo_login, testing, host)
            try:
                ForegroundServer(make_config(app)).run(sockets=[sock])
            finally:
                sock.close()
        finally:
            app.close()
    finally:
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)
    click.echo("gitops serve: stopped.")


def _configure_logging() -> None:

    class RedactingFormatter(logging.Formatter):
        """Scrubs every known token and password from log lines, in case one slips into a message."""

        def format(self, record: logging.LogRecord) -> str:
            return redact(super().format(record))

    handler = logging.StreamHandler()
    handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    logging.getLogger("uvicorn").setLevel(logging.WARNING)


def _banner(
    url: str,
    users: Any,
    data: Path,
    temporary: bool,
    demo_login: tuple[str, str, str] | None,
    testing: bool,
    host: str,
) -> None:
    tokens = sum(len(a.tokens) for a in users.users)
    lines = [
        f"gitops serve: the local stand-in of the game service is listening on {url}",
        f"  state:    {data}" + (" (temporary: deleted when the server stops)" if temporary else ""),
        f"  accounts: {len(users.users)} user(s), {tokens} token(s)",
    ]
    if host not in ("127.0.0.1", "::1", "localhost"):
        lines.append(f"  warning:  listening on {host}: other machines can reach this test server.")
    if testing:
        lines.append(
            "  testing:  the clock moves only by POST /__standin__/advance; control routes are under /__standin__/"
        )
    if demo_login is not None:
        username, password, token = demo_login
        lines += [
            "",
            "Demo account, made up for this run (the token is only good on this server):",
            f"  username {username}, password {password} (HTTP Basic works on /api/user/code)",
            f"  token    {token} (full access)",
            "",
            "Try it:",
            f"  curl -H 'X-Token: {token}' {url}/api/user/branches",
            "Deploy to it: in gitops.yaml, a server with",
            f"  url: {url}",
            "  token_env: STANDIN_TOKEN",
            f"and in the shell: export STANDIN_TOKEN={token}",
            "Lift the token's rate limits for two hours (a browser page with a Proceed button):",
            f"  {url}/a/#!/account/auth-tokens/noratelimit?token={token}",
        ]
    lines += ["", "Stop it with Ctrl-C."]
    click.echo("\n".join(lines))
