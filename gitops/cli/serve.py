"""``gitops serve``: run the local stand-in of the game service in the foreground.

The stand-in answers the endpoints this tool uses, with persistent tokens, scopes and rate limits, so that a player
can try a deploy before having an account and the tests can talk to a real HTTP server. It is the optional extra
``serve`` (starlette, uvicorn): the command checks the extra is installed before it imports the stand-in, and its
log lines are redacted like everything else the tool prints.
"""

from __future__ import annotations

from pathlib import Path

import click

from gitops.cli.extras import require_serve_extra
from gitops.errors import UsageError

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
    # After the check: the stand-in (starlette, uvicorn) is the optional extra's.
    from gitops.cli.standinrun import run_standin  # noqa: PLC0415 (boundary: the serve extra)

    run_standin(host, port, accounts, data, testing=testing)
