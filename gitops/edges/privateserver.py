"""A throwaway world of the real Screeps private server (npm ``screeps``, pinned), for ``gitops rehearse``.

Its whole life cycle on an install (:func:`gitops.edges.serverinstall.find_install`), bounded in time and on loopback
only: **start** (:meth:`World.start`: a temporary data folder, an ephemeral loopback port for its admin CLI, its own
process group, the preloads that keep it on loopback and let player code run, and a mod that writes every console
and cpu message to a file; ``rehearsal-world.js`` runs the server's storage, admin CLI and engine without its
launcher, game server and cron jobs); **seed** (:meth:`World.seed`: through the admin CLI, a bot user with a room,
a spawn and the branch's modules; nobody signs in); **run** (:meth:`World.run`: ticks as fast as the engine goes,
until every bot has had its ticks or time is up); **stop** (:meth:`World.stop`: the whole process group, then the
data folder removed).

A rehearsal must never touch a real world or leave a process behind, hence loopback, the process group and the
deadlines. The node-side files are :func:`gitops.edges.serverinstall.node_files`.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from gitops.core.rehearsalworld import Placement, WorldShapeError, free_rooms, placements, world_start
from gitops.edges.serverinstall import clean_env, node_binary, node_files
from gitops.errors import RehearsalError

LOOPBACK = "127.0.0.1"
START_TIMEOUT = 60.0
#: Seconds between two looks at a starting world (its CLI answers a third to half a second after the launch on a
#: 2-core machine; looking more often took CPU from its start), at a ticking world's record (a tick takes 20 to 40 ms:
#: the run ends at most this late), and at a stopping world's processes (gone some milliseconds after the signal).
READY_POLL = 0.05
RECORD_POLL = 0.025
STOP_POLL = 0.01
#: The world's own log (``scripts/private-server/rehearsal-world.js``: its storage and admin CLI); the engine's
#: processes log to ``logs/``.
WORLD_LOG = "world.log"
STOP_GRACE = 10.0
CLI_TIMEOUT = 15.0
#: Kept for a post-mortem when set: the world's folder (database, logs, the recorded messages).
KEEP_ENV = "GITOPS_KEEP_REHEARSAL_WORLD"
#: The user name of the n-th bot of a world.
BOT_NAME = "Rehearsal{n}"
#: A bot's CPU limit and its bucket at the start, unless told: the game's limit of a subscribed account's first
#: GCL level is higher, but 100 is the npm server's default and the upper end of the official servers' free tiers;
#: the bucket starts full (10000) as on an account that has been running, so one legitimate spike is not a
#: terminated tick (the npm server's own default, an empty bucket, made one).
DEFAULT_CPU = 100
DEFAULT_BUCKET = 10_000


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Recording:
    """What the game published for one bot, in order: its console messages and its cpu messages."""

    console: list[Any] = field(default_factory=list)
    cpu: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class Bot:
    name: str
    user_id: str
    room: str


class World:
    """A running throwaway world; use as a context manager (stopped and removed on exit, whatever happened)."""

    def __init__(
        self,
        install: Path,
        env: Mapping[str, str],
        *,
        rooms: int = 1,
        cpu: int = DEFAULT_CPU,
        bucket: int = DEFAULT_BUCKET,
    ) -> None:
        self.install = install
        #: How many bots the world is made for (``core.rehearsalworld``: their rooms and spawn places).
        self.rooms = rooms
        self.cpu_limit = cpu
        self.bucket = bucket
        self.placements: tuple[Placement, ...] = ()
        #: Free rooms past the bots' (:meth:`take_free_room`), in the same order in every world of a rehearsal.
        self._spare_rooms: list[str] = []
        self.files = node_files()
        self.node = node_binary(env)
        self.env = env
        self.data_dir = Path(tempfile.mkdtemp(prefix="gitops-rehearsal-"))
        self.record = self.data_dir / "record.jsonl"
        #: The world's one port: its admin CLI on loopback (it serves no HTTP API: nobody signs in).
        self.cli_port = 0
        self.bots: list[Bot] = []
        self._process: subprocess.Popen[bytes] | None = None
        #: Answered by this world's recorder mod in the admin CLI: the port is this world's, not another server's.
        self.identity = secrets.token_hex(8)

    def __enter__(self) -> World:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    # --- start and stop ---

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Launch on a free loopback port (another when it was taken meanwhile); wait until it answers."""
        start_worlds([self], timeout)

    def _begin(self) -> None:
        """Choose the port, write the world's folder and launch the server (not yet waited for)."""
        self.cli_port = free_port()
        self._write_world()
        self._launch()

    def _write_world(self) -> None:
        init = self.install / "node_modules" / "@screeps" / "launcher" / "init_dist"
        # A new attempt (another port) starts clean: the last one's log said EADDRINUSE.
        shutil.rmtree(self.data_dir / "logs", ignore_errors=True)
        (self.data_dir / WORLD_LOG).unlink(missing_ok=True)
        self._write_database(init / "db.json")
        (self.data_dir / "logs").mkdir(exist_ok=True)
        mods = {
            "mods": [str(self.files / "rehearsal-recorder.js")],
            "bots": {"simplebot": str(init / "node_modules" / "@screeps" / "simplebot" / "src")},
        }
        (self.data_dir / "mods.json").write_text(json.dumps(mods, indent=2))

    def _write_database(self, template: Path) -> None:
        """The default world's database with the world data a bot reads at its start seeded and its AI players idle,
        paused until the bots are seeded; the bots' rooms and spawn places chosen from it (the same in every world of
        a rehearsal)."""
        db = json.loads(template.read_text("utf-8"))
        try:
            self.placements = placements(db, self.rooms)
            self._spare_rooms = free_rooms(db)[self.rooms :]
        except WorldShapeError as exc:
            raise RehearsalError(f"the private server's world cannot hold {self.rooms} bots: {exc}") from None
        world_start(db)
        (self.data_dir / "db.json").write_text(json.dumps(db), "utf-8")

    def _launch(self) -> None:
        env = clean_env(self.env)
        env["HOME"] = str(self.data_dir)
        env["NODE_OPTIONS"] = (
            f'--require "{self.files / "loopback-guard.js"}" --require "{self.files / "no_snapshot.js"}"'
        )
        env["NODE_PATH"] = str(self.install / "node_modules")  # the world's script is not inside the install
        env.update(CLI_HOST=LOOPBACK, CLI_PORT=str(self.cli_port), MODFILE="mods.json", DB_PATH="db.json")
        env["GITOPS_REHEARSAL_RECORD"] = str(self.record)
        env["GITOPS_REHEARSAL_ID"] = self.identity
        # When this process dies without stopping the world (kill -9), the world stops itself within a second.
        script = f'( while kill -0 {os.getpid()} 2>/dev/null; do sleep 1; done; kill -TERM 0 ) & exec "$0" "$@"'
        # No --no-node-snapshot here: this process makes no isolate (the runner, which does, gets it).
        command = ["bash", "-c", script, self.node, str(self.files / "rehearsal-world.js")]
        with (self.data_dir / WORLD_LOG).open("ab") as log:
            self._process = subprocess.Popen(
                command,
                cwd=self.data_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() signals all of it
            )

    def _wait_until_ready(self, timeout: float) -> None:
        """Until the admin CLI answers with this world's identity (its storage is loaded by then and its engine
        started); :class:`_PortTaken` when the port was taken before the world bound it."""
        assert self._process is not None
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            if "EADDRINUSE" in self.logs():  # first: the world then ends itself
                raise _PortTaken(f"port {self.cli_port} was taken before the server bound it")
            if self._process.poll() is not None:
                raise RehearsalError(
                    f"the private server exited with code {self._process.returncode} before it answered\n"
                    + self.log_tail()
                )
            try:
                answer = self.cli("gitopsRehearsal", timeout=2.0)
            except (OSError, RehearsalError) as exc:
                last = exc.message if isinstance(exc, RehearsalError) else type(exc).__name__
                time.sleep(READY_POLL)
                continue
            if answer != self.identity:
                raise _PortTaken(f"port {self.cli_port} answers, but not from this world's server")
            return
        raise RehearsalError(
            f"the private server did not answer on {LOOPBACK}:{self.cli_port} within {timeout:.0f} s (last: {last})\n"
            + self.log_tail()
        )

    def stop(self) -> None:
        """Stop the whole process group (SIGTERM, then SIGKILL) and remove the world's folder."""
        try:
            self._stop_group()
        finally:
            if not self.env.get(KEEP_ENV):
                shutil.rmtree(self.data_dir, ignore_errors=True)

    def _stop_group(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        pgid = process.pid
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)
            deadline = time.monotonic() + STOP_GRACE
            while time.monotonic() < deadline:
                if process.poll() is not None and not _group_alive(pgid):
                    return
                time.sleep(STOP_POLL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=1.0)

    # --- the admin CLI ---

    def cli(self, expression: str, timeout: float = CLI_TIMEOUT) -> Any:
        """Evaluate a JavaScript expression in the server's admin CLI (loopback TCP); its value, through JSON."""
        wrapped = (
            f"Promise.resolve({expression}).then(v => encodeURIComponent("
            "JSON.stringify(v === undefined ? null : v)).replace(/'/g, '%27'), "
            "e => encodeURIComponent(JSON.stringify({cliError: String(e)})).replace(/'/g, '%27'))"
        )
        try:
            answer = self._ask_cli(wrapped, timeout)
        except OSError as exc:  # refused, reset, timed out: the server stopped or never listened (its log says why)
            raise WorldLost(
                f"the private server's admin CLI on {LOOPBACK}:{self.cli_port} did not answer ({type(exc).__name__})"
            ) from None
        if not (answer.startswith("'") and answer.endswith("'")):
            raise RehearsalError(f"the private server's admin CLI answered {answer[:200]!r}")
        value = json.loads(urllib.parse.unquote(answer[1:-1]))
        if isinstance(value, dict) and "cliError" in value:
            raise RehearsalError(f"the private server's admin CLI refused: {value['cliError']}")
        return value

    def _ask_cli(self, wrapped: str, timeout: float) -> str:
        """Send one line to the admin CLI and read its answer line (``OSError`` when the connection fails)."""
        with socket.create_connection((LOOPBACK, self.cli_port), timeout=timeout) as conn, conn.makefile("rb") as r:
            while True:  # the greeting ends with a "< " line
                line = r.readline()
                if not line:
                    raise RehearsalError("the private server's admin CLI closed the connection")
                if line.startswith(b"< "):
                    break
            conn.sendall(wrapped.encode("utf-8") + b"\r\n")
            return r.readline().decode("utf-8").rstrip("\r\n").removeprefix("< ")

    # --- the bots ---

    def pause(self) -> None:
        self.cli("system.pauseSimulation()")

    def seed(
        self, modules: Mapping[str, Any], slot: int | None = None, *, cpu: int | None = None, bucket: int | None = None
    ) -> Bot:
        """A bot user in the ``slot``-th of the world's rooms (``None``: the next), with its spawn on the place
        chosen for it, the world's CPU limit and bucket (:data:`DEFAULT_CPU`, :data:`DEFAULT_BUCKET`) and ``modules``
        (the wire form); ``cpu`` and ``bucket`` for this bot instead. The same slot of two worlds of a rehearsal is
        the same room."""
        index = len(self.bots) if slot is None else slot
        if index >= len(self.placements) or any(b.room == self.placements[index].room for b in self.bots):
            raise RehearsalError("the private server's world has no free room left for another bot")
        room = self.placements[index].room
        x, y = self.placements[index].spawn
        name = BOT_NAME.format(n=len(self.bots) + 1)
        options = {"username": name, "cpu": self.cpu_limit if cpu is None else cpu, "x": x, "y": y}
        # The bucket as an account's that has been running (bots.spawn starts it empty). The rest is for a backend
        # on this database (`screeps start` runs one; this world does not): no longer a server bot (a starting
        # backend reloads bot AIs' code into their users, and would replace ours); registered a day ago and "auth
        # touched" (screepsmod-auth's cron job resets the CPU limit of users registered in the last 15 s, or not yet
        # touched, to its registerCpu, 100).
        fields = {"cpuAvailable": int(self.bucket if bucket is None else bucket), "authTouched": True}
        # One CLI call (each is a connection and a round trip): the user and its spawn, then its fields and code.
        user_id = self.cli(
            "(async () => { "
            f"await bots.spawn('simplebot', {json.dumps(room)}, {json.dumps(options)}); "
            f"const user = await storage.db.users.findOne({{username: {json.dumps(name)}}}); "
            "if (!user) return null; "
            "await storage.db.users.update({_id: user._id}, {$unset: {bot: true}, $set: "
            f"Object.assign({json.dumps(fields)}, {{registeredDate: new Date(Date.now() - 86400000)}})}}); "
            "await storage.db['users.code'].update({user: user._id}, "
            f"{{$set: {{modules: {json.dumps(dict(modules))}, timestamp: Date.now()}}}}); "
            "return user._id; })()"
        )
        if not isinstance(user_id, str):
            raise RehearsalError(f"the private server did not create the bot user {name}")
        bot = Bot(name, user_id, room)
        self.bots.append(bot)
        return bot

    def take_free_room(self) -> str:
        """One more free room of the world, as :meth:`seed` takes one (after a first :meth:`seed`): for a copied
        colony's second and third rooms (:mod:`gitops.edges.worldseed`)."""
        if not self._spare_rooms:
            raise RehearsalError("the private server's world has no free room left for the copied colony")
        return self._spare_rooms.pop(0)

    def run(
        self, enough: Callable[[dict[str, Recording]], bool], timeout: float
    ) -> tuple[dict[str, Recording], str | None]:
        """Tick as fast as the engine goes until ``enough`` says so or ``timeout`` seconds passed; the bots'
        recordings (by user id), and why ``enough`` was not reached (``None`` when it was)."""
        return run_worlds([self], enough, timeout)

    def stopped(self) -> str | None:
        """Why the world no longer ticks (its server stopped), or ``None``."""
        if self._process is None or self._process.poll() is not None:
            return "the private server stopped while the world ticked\n" + self.log_tail()
        return None

    def _read_record(self, offset: int, recordings: dict[str, Recording]) -> int:
        try:
            with self.record.open("rb") as f:
                f.seek(offset)
                chunk = f.read()
        except FileNotFoundError:
            return offset
        end = chunk.rfind(b"\n") + 1  # a line being written is read next time
        for raw in chunk[:end].splitlines():
            try:
                entry = json.loads(raw)
                data = json.loads(entry["data"])
            except (ValueError, KeyError, TypeError):
                continue
            recording = recordings.get(entry.get("user"))
            if recording is not None:
                (recording.console if entry.get("channel") == "console" else recording.cpu).append(data)
        return offset + end

    # --- diagnosis ---

    def logs(self) -> str:
        files = [self.data_dir / WORLD_LOG, *sorted((self.data_dir / "logs").glob("*.log"))]
        return "\n".join(p.read_text("utf-8", errors="replace") for p in files if p.exists())

    def log_tail(self, lines: int = 15) -> str:
        parts: list[str] = []
        for path in [self.data_dir / WORLD_LOG, *sorted((self.data_dir / "logs").glob("*.log"))]:
            with contextlib.suppress(OSError):
                parts.append(f"--- {path.name} ---")
                parts.extend(path.read_text("utf-8", errors="replace").splitlines()[-lines:])
        return "\n".join(parts)


def start_worlds(worlds: list[World], timeout: float = START_TIMEOUT) -> None:
    """Launch every world, then wait for each (so they start side by side, in this thread: Ctrl-C stops at once)."""
    for world in worlds:
        world._begin()
    ready_worlds(worlds, timeout)


def ready_worlds(worlds: list[World], timeout: float = START_TIMEOUT) -> None:
    """Wait for each launched world until it answers; a world whose port was taken meanwhile is launched again on
    others, twice at most."""
    waiting = list(worlds)
    for attempt in range(3):
        if attempt:
            for world in waiting:
                world._begin()
        taken: list[World] = []
        for world in waiting:
            try:
                world._wait_until_ready(timeout)
            except _PortTaken:
                world._stop_group()
                if attempt == 2:
                    raise
                taken.append(world)
        if not taken:
            return
        waiting = taken


def run_worlds(
    worlds: list[World], enough: Callable[[dict[str, Recording]], bool], timeout: float
) -> tuple[dict[str, Recording], str | None]:
    """Tick every world as fast as its engine goes until ``enough`` says so of all their bots' recordings (by user
    id), or ``timeout`` seconds passed; the recordings, and why ``enough`` was not reached (``None`` when it was).
    One loop in this thread reads every world's record."""
    for world in worlds:  # started paused (core.rehearsalworld.paused_at_start): one call sets the pace and resumes
        world.cli("system.setTickDuration(1).then(() => system.resumeSimulation())")
    deadline = time.monotonic() + timeout
    offsets = [0] * len(worlds)
    recordings: dict[str, Recording] = {bot.user_id: Recording() for world in worlds for bot in world.bots}
    problem: str | None = f"the world ran too slowly: not every bot had its ticks within {timeout:g} s"
    while time.monotonic() < deadline:
        offsets = [world._read_record(offset, recordings) for world, offset in zip(worlds, offsets, strict=True)]
        if enough(recordings):
            problem = None
            break
        stopped = next((why for why in (world.stopped() for world in worlds) if why is not None), None)
        if stopped is not None:
            problem = stopped
            break
        time.sleep(RECORD_POLL)
    for world in worlds:
        with contextlib.suppress(OSError, RehearsalError):
            world.pause()
    for world, offset in zip(worlds, offsets, strict=True):
        world._read_record(offset, recordings)
    return recordings, problem


@contextlib.contextmanager
def launched_worlds(install: Path, env: Mapping[str, str], count: int, *, rooms: int = 1) -> Iterator[list[World]]:
    """``count`` worlds from the same database, launched side by side and not yet waited for (:func:`ready_worlds`
    waits): node starts them while this process does other work (``gitops rehearse`` reads the code meanwhile). All
    stopped, with their process groups, on exit."""
    with contextlib.ExitStack() as stack:
        worlds = [World(install, env, rooms=rooms) for _ in range(count)]
        for world in worlds:
            stack.callback(world.stop)
        for world in worlds:
            world._begin()
        yield worlds


@contextlib.contextmanager
def running_worlds(install: Path, env: Mapping[str, str], count: int, *, rooms: int = 1) -> Iterator[list[World]]:
    """``count`` started, paused worlds from the same database (started side by side), each bot's CPU limit and
    bucket given when it is seeded; all stopped, with their process groups, on exit."""
    with launched_worlds(install, env, count, rooms=rooms) as worlds:
        ready_worlds(worlds)
        yield worlds


@contextlib.contextmanager
def running_world(
    install: Path, env: Mapping[str, str], *, rooms: int = 1, cpu: int = DEFAULT_CPU, bucket: int = DEFAULT_BUCKET
) -> Iterator[World]:
    """A started, paused world for ``rooms`` bots; stopped with its whole process group on exit."""
    world = World(install, env, rooms=rooms, cpu=cpu, bucket=bucket)
    try:
        world.start()
        yield world
    finally:
        world.stop()


class WorldLost(RehearsalError):
    """A started world's admin CLI stopped answering (its connection refused or reset): the world is gone or going,
    and a fresh one may run (:func:`gitops.app.rehearsal.rehearse` starts one again, once)."""


class _PortTaken(RehearsalError):
    pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie member still counts for killpg; /proc tells them apart on Linux.
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in proc.iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                raw = (entry / "stat").read_text()
                fields = raw[raw.rindex(")") + 2 :].split()
                if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                    return True
    return False


__all__ = [
    "DEFAULT_BUCKET",
    "DEFAULT_CPU",
    "Bot",
    "Recording",
    "World",
    "WorldLost",
    "launched_worlds",
    "ready_worlds",
    "run_worlds",
    "running_world",
    "running_worlds",
    "start_worlds",
]
