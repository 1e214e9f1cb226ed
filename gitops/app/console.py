"""``gitops console``'s use case: the account's console of one server, as a stream of redacted events.

The console belongs to the account, not to a branch: ``--branch`` only picks the server (the one its branch is on).
The socket is read in slices of :data:`SLICE_SECONDS`, so that Ctrl-C is seen at once and the stream ends at its
time limit; each slice reads at most :data:`SLICE_MESSAGES` messages.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from gitops.app.session import Session
from gitops.edges.socket import GameSocket, SocketProblem, console_text, socket_url
from gitops.errors import NetworkError, UsageError

SLICE_SECONDS = 0.5
SLICE_MESSAGES = 1000
#: Without a time limit, the stream still ends after this long (a year): every loop is bounded.
FOREVER = 365 * 24 * 3600.0


@dataclass(frozen=True, slots=True)
class ConsoleLine:
    """One line of the console: ``kind`` ``log`` or ``error`` (the separate message of a tick that failed)."""

    kind: str
    text: str
    shard: str | None = None

    def document(self) -> dict[str, object]:
        return {"type": self.kind, "text": self.text, "shard": self.shard}

    def line(self) -> str:
        where = f"[{self.shard}] " if self.shard else ""
        return f"{where}{'ERROR: ' if self.kind == 'error' else ''}{self.text}"


def pick_server(session: Session) -> str:
    """The one server of the (narrowed) manifest; :class:`UsageError` when there are several."""
    servers = session.servers()
    if len(servers) != 1:
        raise UsageError(
            f"the manifest's branches are on {len(servers)} servers ({', '.join(servers)}); the console is one "
            "account's",
            hint="Pick one with --server NAME (or --branch SERVER/BRANCH).",
        )
    return servers[0]


def stream_console(session: Session, server: str, *, seconds: float | None = None) -> Iterator[ConsoleLine]:
    """The console of ``server``'s account until ``seconds`` have passed (or Ctrl-C); :class:`NetworkError` when the
    socket cannot be used."""
    client = session.client(server)
    user_id, token = client.socket_login()
    end = time.monotonic() + (FOREVER if seconds is None else seconds)
    channel = f"user:{user_id}/console"
    try:
        with GameSocket(socket_url(client.base_url), token, deadline=end, debug=session.options.log) as sock:
            sock.subscribe(channel)
            while time.monotonic() < end:
                for message in sock.messages(SLICE_MESSAGES, until=time.monotonic() + SLICE_SECONDS):
                    if message.channel == channel and isinstance(message.data, dict):
                        yield from _lines(message.data)
    except SocketProblem as exc:
        raise NetworkError(
            f"server '{server}': the console cannot be read: {exc}",
            hint="Check the server's url; a restricted token needs the 'console' websocket in its scope.",
        ) from exc


def _lines(data: dict[str, object]) -> Iterator[ConsoleLine]:
    shard = data.get("shard") if isinstance(data.get("shard"), str) else None
    assert shard is None or isinstance(shard, str)
    error = data.get("error")
    if isinstance(error, str):
        yield ConsoleLine("error", console_text(error), shard)
    messages = data.get("messages")
    if isinstance(messages, dict):
        for key in ("log", "results"):
            lines = messages.get(key)
            if isinstance(lines, list):
                for line in lines:
                    yield ConsoleLine("log" if key == "log" else "result", console_text(line), shard)


__all__ = ["ConsoleLine", "pick_server", "stream_console"]
