"""``gitops serve``'s run of the stand-in: the accounts, the state file, the app, the socket, the banner and the
server in the foreground, until Ctrl-C. Everything here needs the optional extra ``serve`` (starlette, uvicorn), so
the command (:mod:`gitops.cli.serve`) imports this module only after checking the extra is installed.
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

from gitops.edges.clock import Clock, ManualClock, SystemClock
from gitops.errors import GitopsError, UsageError
from gitops.secrets import redact
from gitops.standin.accounts import load_accounts
from gitops.standin.app import create_app
from gitops.standin.runner import ForegroundServer, bind, make_config, url_of
from gitops.standin.store import StoreError


def run_standin(host: str, port: int, accounts: Path | None, data: Path | None, *, testing: bool) -> None:
    """Serve the stand-in on ``host``:``port`` with the users of ``accounts`` (``None``: one made-up demo user) and
    the state in ``data`` (``None``: a temporary file, deleted when the server stops)."""
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
