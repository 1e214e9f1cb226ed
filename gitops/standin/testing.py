"""Running the stand-in inside a test: a real HTTP server on an ephemeral loopback port, on a manual clock.

Example::

    with running_standin(DEMO_ACCOUNTS, tmp_path / "standin.sqlite3") as standin:
        httpx.get(standin.url + "/api/user/code", headers={"X-Token": FULL_TOKEN})
        standin.clock.advance(3600)          # an hour later, without waiting
        standin.inject_fault("POST /api/user/code", "drop")
        assert standin.count("POST /api/user/code", ALICE) == 0

The pytest fixture ``standin`` (``tests/conftest.py``) does this with a fresh database for each test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gitops.edges.clock import ManualClock
from gitops.standin.accounts import fingerprint, load_accounts
from gitops.standin.app import StandInApp, create_app
from gitops.standin.bounds import ServiceBounds
from gitops.standin.runner import ThreadedServer, bind, make_config, url_of
from gitops.standin.socket import parse_rule

ALICE = "alice"
ALICE_EMAIL = "alice@example.com"
ALICE_PASSWORD = "s3cret"  # noqa: S105 (test data)
#: Alice's full-access token. A canary: tests search every output of the tool for it.
FULL_TOKEN = "canary0123456789abcdef0123456789ab"  # noqa: S105 (test data)
#: Alice's restricted token: only ``GET /api/user/code`` and ``POST /api/user/code``.
RESTRICTED_TOKEN = "canaryrestricted0123456789abcdef0"  # noqa: S105 (test data)
BOB = "bob"
BOB_EMAIL = "bob@example.com"
BOB_PASSWORD = "hunter2"  # noqa: S105 (test data)
#: Bob's full-access token (a second account, to show that state is per user).
BOB_TOKEN = "canarybob0123456789abcdef01234567"  # noqa: S105 (test data)

DEMO_ACCOUNTS: dict[str, Any] = {
    "users": [
        {
            "username": ALICE,
            "email": ALICE_EMAIL,
            "password": ALICE_PASSWORD,
            "tokens": [
                {"value": FULL_TOKEN, "full": True},
                {"value": RESTRICTED_TOKEN, "endpoints": ["GET /api/user/code", "POST /api/user/code"]},
            ],
        },
        {
            "username": BOB,
            "email": BOB_EMAIL,
            "password": BOB_PASSWORD,
            "tokens": [{"value": BOB_TOKEN, "full": True}],
        },
    ]
}


class StandIn:
    """A running stand-in, with what tests need to steer and inspect it."""

    def __init__(self, url: str, app: StandInApp, clock: ManualClock) -> None:
        self.url = url
        self.app = app
        self.clock = clock

    def inject_fault(self, endpoint: str, kind: str, count: int = 1, delay: float = 0.0) -> None:
        """The next ``count`` requests to ``endpoint`` fail: ``500``, ``drop``, ``commit-drop`` (handled, then the
        answer lost), ``delay``, ``html`` or ``badjson``."""
        self.app.faults.inject(endpoint, kind, count, delay)

    def count(self, endpoint: str, username: str | None = None) -> int:
        """Requests received for ``endpoint`` (``"POST /api/user/code"``), by anyone or from ``username``."""
        return self.app.count(endpoint, username)

    def branch_modules(self, username: str, branch: str) -> dict[str, object] | None:
        """The modules of a branch in wire form (``$activeWorld`` works), or ``None`` if it does not exist."""
        found = self.app.store.branch(self._user(username), branch)
        return None if found is None else found.modules()

    def branches(self, username: str) -> list[dict[str, object]]:
        """``[{"branch": ..., "activeWorld": ..., "activeSim": ...}]`` sorted by name."""
        return [
            {"branch": b.name, "activeWorld": b.active_world, "activeSim": b.active_sim}
            for b in self.app.store.branches(self._user(username))
        ]

    def listed_branches(self, username: str) -> list[dict[str, Any]]:
        """The ``list`` that ``GET /api/user/branches`` answers now (each entry with ``_id``, ``user``, ``branch``,
        ``modules``, ``activeWorld``, ``activeSim`` and ``timestamp``), read without a request."""
        account = self.app.accounts.user(username)
        if account is None:
            raise KeyError(f"no user {username!r} in the stand-in's accounts")
        listing: list[dict[str, Any]] = json.loads(self.app.handlers.branch_list(account))
        return listing

    def _user(self, username: str) -> str:
        # Usernames are case-insensitive, as on the server; the store keys them as the accounts file spells them.
        account = self.app.accounts.user(username)
        return account.username if account is not None else username

    def list_without_modules(self) -> None:
        """From now on ``GET /api/user/branches`` lists names, active flags and ``timestamp``, not the modules."""
        self.app.handlers.list_modules = False

    @property
    def socket_url(self) -> str:
        """The game socket's address (``ws://127.0.0.1:PORT/socket/websocket``)."""
        return "ws" + self.url.removeprefix("http") + "/socket/websocket"

    def set_tick_seconds(self, seconds: float) -> None:
        """Seconds between the game's ticks on the socket; 0 pauses the game."""
        self.app.sockets.set_tick_seconds(seconds)

    def console_rule(self, username: str, **rule: object) -> None:
        """While ``username``'s active world branch matches (``branch=NAME``, ``contains=MARKER`` in its code), each
        tick logs ``log=[...]`` and fails with ``error=TEXT``; ``ticks=N`` ends the rule after N ticks."""
        self.app.sockets.add_rule(parse_rule({"username": username, **rule}))

    def clear_console_rules(self) -> None:
        self.app.sockets.clear_rules()

    def set_colony(self, rooms: dict[str, list[dict[str, Any]]], *, time: int = 1000) -> None:
        """The world's objects by room (controllers with a ``user`` make the owner's overview) and its game time."""
        self.app.handlers.room_objects_by_room = {room: [dict(o) for o in objs] for room, objs in rooms.items()}
        self.app.handlers.world_time = time

    def set_memory(self, username: str, memory: object, shard: str = "shard0") -> None:
        """``username``'s Memory, as a bot's tick leaves it."""
        self.app.store.set_memory(self._user(username), shard, memory)

    def grant_unlimited(self, token: str) -> float:
        """What pressing "Proceed" on the no-rate-limit page does; returns when the two hours end."""
        return self.app.limiter.grant(fingerprint(token))


@contextmanager
def running_standin(
    accounts: Mapping[str, object] | Path,
    data: Path,
    clock: ManualClock | None = None,
    *,
    bounds: ServiceBounds | None = None,
    tls: Path | None = None,
) -> Iterator[StandIn]:
    """Serve the stand-in on ``127.0.0.1`` and an ephemeral port for the duration of the ``with`` block.

    ``bounds`` replaces the service's bounds (body size, read deadlines, connections), to show them quickly.
    ``tls`` serves it over TLS (an ``https://`` URL) with the certificate chain and private key in that PEM file, as
    a private server behind a TLS front does.
    """
    clock = clock or ManualClock()
    app = create_app(load_accounts(accounts), data, clock, testing=True, bounds=bounds)
    try:
        sock = bind("127.0.0.1", 0)
        config = make_config(app)
        url = url_of(sock)
        if tls is not None:
            config.ssl_certfile = str(tls)  # uvicorn makes its TLS context from it when the server loads the config
            url = "https" + url.removeprefix("http")
        server = ThreadedServer(config, sock)
        try:
            server.start()
            yield StandIn(url, app, clock)
        finally:
            server.stop()
            sock.close()
    finally:
        app.close()
