"""An emulated internet path on loopback: a small asyncio TCP proxy with delay, bandwidth and TCP slow start.

Run it in front of a server; every connection through it behaves, to the bytes it carries, like one over a path with:

- **one-way delay** ``rtt / 2`` in each direction (a chunk is delivered that long after it was sent);
- **a bandwidth cap per direction** (a token bucket of one packet: a chunk takes ``len / rate`` seconds on the link,
  and the link carries one chunk at a time, so a 4.7 MB upload at 20 Mbit/s takes 1.9 s on the wire);
- **the handshake's round trip**: the first byte of a new connection leaves one round trip after the connection is
  opened (SYN, SYN-ACK), so a request on a new connection costs two round trips and on a kept one, one;
- **TCP slow start**: a connection may have at most ``cwnd`` bytes in flight per round trip, starting at ten
  segments (14,600 bytes, Linux's initial window) and doubling every round trip in which the sender filled it;
  after an idle time longer than the retransmission timeout the window starts again from ten segments (Linux's
  ``tcp_slow_start_after_idle``). Loss and its recovery are not emulated.

It is a benchmark tool, not a network simulator: it measures what the two sides of a benchmark send and wait for, the
same way for both. ``python bench/netem.py --target 127.0.0.1:PORT --rtt-ms 80 --up-mbit 20 --down-mbit 100`` prints
``listening on http://127.0.0.1:PORT`` and serves until it is stopped. Only loopback addresses are accepted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import ipaddress
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

#: Linux's initial congestion window: ten segments of 1,460 bytes.
INITIAL_WINDOW = 10 * 1460
#: How much is read from a socket at once (one "chunk" on the emulated link).
CHUNK = 16 * 1024


@dataclass(frozen=True)
class Link:
    """The emulated path: round-trip time (seconds) and the bandwidth of each direction (bytes per second)."""

    rtt: float
    up: float  # client -> server
    down: float  # server -> client

    @classmethod
    def of(cls, rtt_ms: float, up_mbit: float, down_mbit: float) -> Link:
        return cls(rtt_ms / 1000, up_mbit * 1e6 / 8, down_mbit * 1e6 / 8)

    def describe(self) -> str:
        return f"RTT {self.rtt * 1000:g} ms, {self.up * 8 / 1e6:g} Mbit/s up, {self.down * 8 / 1e6:g} Mbit/s down"


@dataclass
class Direction:
    """One direction of one connection: when each chunk reaches the other end (pure arithmetic on times)."""

    rtt: float
    rate: float
    free_at: float = 0.0
    cwnd: float = INITIAL_WINDOW
    round_start: float | None = None
    sent_in_round: float = 0.0
    last_active: float = 0.0
    idle_reset: float = field(init=False)

    def __post_init__(self) -> None:
        self.idle_reset = max(0.2, self.rtt) + self.rtt  # Linux's RTO is at least 200 ms plus the RTT's share

    def schedule(self, now: float, size: int) -> float:
        """When ``size`` bytes sent at ``now`` have arrived at the other end."""
        t = max(now, self.free_at)
        if self.round_start is not None and t - self.last_active > self.idle_reset:
            self.cwnd = INITIAL_WINDOW  # slow start again after an idle time
            self.round_start = None
        left = float(size)
        while left > 0:
            if self.round_start is None or t >= self.round_start + self.rtt:
                if self.round_start is not None and self.sent_in_round >= self.cwnd:
                    self.cwnd *= 2  # the window was full: the acknowledgements of a round double it
                self.round_start = t
                self.sent_in_round = 0.0
            room = self.cwnd - self.sent_in_round
            if room <= 0:
                t = self.round_start + self.rtt  # wait for the round's acknowledgements
                continue
            take = min(room, left)
            t += take / self.rate
            self.sent_in_round += take
            left -= take
        self.free_at = t
        self.last_active = t
        return t + self.rtt / 2


async def _pump(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, direction: Direction, loop: asyncio.AbstractEventLoop
) -> None:
    queue: asyncio.Queue[tuple[float, bytes | None]] = asyncio.Queue()

    async def deliver() -> None:
        while True:
            at, data = await queue.get()
            delay = at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if data is None:
                with contextlib.suppress(OSError):
                    if writer.can_write_eof():
                        writer.write_eof()
                return
            writer.write(data)
            await writer.drain()

    sender = asyncio.create_task(deliver())
    try:
        while True:
            data = await reader.read(CHUNK)
            now = loop.time()
            if not data:
                await queue.put((max(now, direction.free_at) + direction.rtt / 2, None))
                break
            await queue.put((direction.schedule(now, len(data)), data))
        await sender
    except (ConnectionError, OSError):
        pass
    finally:
        sender.cancel()  # a pump stopped in its read (the proxy stopping) leaves no delivery pending


async def _connection(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    target: tuple[str, int],
    link: Link,
) -> None:
    loop = asyncio.get_running_loop()
    opened = loop.time()
    # Shielded: a stop that cancels this task as the connect completes must not lose the connection unclosed.
    connecting = asyncio.ensure_future(asyncio.open_connection(*target))
    try:
        server_reader, server_writer = await asyncio.shield(connecting)
    except (OSError, asyncio.CancelledError):
        client_writer.close()
        connecting.add_done_callback(_close_connected)
        return
    # The handshake: nothing the client sends leaves before one round trip has passed.
    up = Direction(link.rtt, link.up, free_at=opened + link.rtt)
    down = Direction(link.rtt, link.down, free_at=opened + link.rtt)
    stopping = False
    try:
        await asyncio.gather(
            _pump(client_reader, server_writer, up, loop), _pump(server_reader, client_writer, down, loop)
        )
    except asyncio.CancelledError:
        stopping = True  # the proxy is stopping: what is not yet sent is dropped, not waited for
    finally:
        for w in (client_writer, server_writer):
            if stopping:
                w.transport.abort()
            else:
                w.close()
            with contextlib.suppress(OSError, ConnectionError):
                await w.wait_closed()


def _close_connected(connecting: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]]) -> None:
    """Close the connection a connect made after its connection was given up (the proxy stopping)."""
    if not connecting.cancelled() and connecting.exception() is None:
        connecting.result()[1].close()


def _ours_and_started(task: asyncio.Task[object]) -> bool:
    """Whether ``task`` runs one of this module's coroutines and has taken its first step."""
    coro = task.get_coro()
    if not inspect.iscoroutine(coro) or coro.cr_code.co_filename != __file__:
        return False
    return inspect.getcoroutinestate(coro) != inspect.CORO_CREATED


async def _end_tasks() -> None:
    """End every task of the loop but the caller's, so that the loop closes with none pending (asyncio would print
    "Task was destroyed but it is pending!") and no socket open. This module's tasks are cancelled, each once (a
    second would end it cancelled, not stopped) and only once it has taken its first step (one cancelled before it
    started cannot catch it, and Python 3.11's stream callback prints the CancelledError); asyncio's own (an accept,
    a connect) are let finish. At most 100 passes of at most 50 ms."""
    cancelled: set[asyncio.Task[object]] = set()
    for _ in range(100):
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if not tasks:
            return
        mine = [t for t in tasks if _ours_and_started(t) and t not in cancelled]
        for task in mine:
            task.cancel()
        cancelled.update(mine)
        await asyncio.wait(tasks, timeout=0.05)
        for task in cancelled:
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: asyncio would log one never retrieved


def _loopback(host: str) -> str:
    if not ipaddress.ip_address(host).is_loopback:
        raise SystemExit(f"netem: {host} is not a loopback address; only loopback is allowed here")
    return host


class Proxy:
    """The proxy in a thread of this process: ``with Proxy(target, link) as url: ...``."""

    def __init__(self, target: tuple[str, int], link: Link) -> None:
        self.target = (_loopback(target[0]), target[1])
        self.link = link
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="netem", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())
        self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(
            lambda r, w: _connection(r, w, self.target, self.link), "127.0.0.1", 0, backlog=256
        )
        port = server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self._ready.set()
        try:
            await self._stop.wait()
            # No new connection is accepted, but one already accepted is let reach its task with the server still
            # open (Python 3.11's transport asserts that its server is: one accepted after close() leaks its socket).
            loop = asyncio.get_running_loop()
            for sock in server.sockets:
                loop.remove_reader(sock.fileno())
            await _end_tasks()
        finally:
            server.close()
            await server.wait_closed()
            for _ in range(3):  # the closes of the last transports, each a loop pass after it was asked for
                await asyncio.sleep(0)

    def __enter__(self) -> str:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("netem did not start")
        return self.url

    def __exit__(self, *exc: object) -> None:
        stop = self._stop
        if stop is not None:
            self._loop.call_soon_threadsafe(stop.set)
        self._thread.join(10)


@contextlib.contextmanager
def proxy(target_url: str, link: Link) -> Iterator[str]:
    """The proxy's URL in front of ``target_url`` (``http://127.0.0.1:PORT``) while the block runs. For an
    ``https://`` target the URL is ``https://`` too: the proxy carries the TCP bytes, so TLS runs end to end through
    it and each of its handshake's round trips is paid on the path, as on the internet."""
    scheme, rest = target_url.split("://", 1)
    host, port = rest.rsplit(":", 1)
    with Proxy((host, int(port)), link) as url:
        yield scheme + url.removeprefix("http")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="HOST:PORT of the server (loopback)")
    parser.add_argument("--rtt-ms", type=float, default=80)
    parser.add_argument("--up-mbit", type=float, default=20)
    parser.add_argument("--down-mbit", type=float, default=100)
    args = parser.parse_args()
    with proxy("http://" + args.target, Link.of(args.rtt_ms, args.up_mbit, args.down_mbit)) as url:
        print(f"listening on {url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            sys.stdin.read()


if __name__ == "__main__":
    main()
