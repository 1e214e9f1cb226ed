"""Run the real npm Screeps private server (``screeps`` + ``screepsmod-auth``) as a test peer, on loopback only.

The server is installed by ``bash scripts/private-server.sh install`` into ``.private-server/``; this module only
starts it. Each start gets a fresh world folder in a temporary directory and two free loopback ports, runs in a
process group of its own (six node processes), and :meth:`PrivateServer.stop` takes that whole group down.

Talking to the server for assertions goes through :class:`ServerUser`, which knows the screepsmod-auth rules:
sign in with ``POST /api/auth/signin``, send both ``X-Token`` and ``X-Username``, and use the fresh ``X-Token``
that every authenticated answer carries (tokens live 60 seconds). See ``docs/private-server-facts.md``.
"""

from __future__ import annotations

import contextlib
import ipaddress
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "private-server.sh"
INSTALL_HINT = "Run: bash scripts/private-server.sh install  (about 90 s the first time; reused afterwards)"
LOOPBACK = "127.0.0.1"

#: How long the server may take to answer ``GET /api/version`` after the launch (it takes about 2 s).
START_TIMEOUT = 90.0
#: How long the process group gets between SIGTERM and SIGKILL.
STOP_GRACE = 10.0
#: Set to keep the world folder (database, logs) of a test session for a post-mortem.
KEEP_ENV = "GITOPS_KEEP_PRIVATE_SERVER"


class PrivateServerError(Exception):
    """The private server could not be installed, started, or answered something unexpected."""


class _PortTaken(PrivateServerError):
    pass


def install_problem() -> str | None:
    """Why the installed server cannot be used (with the command that fixes it), or ``None`` when it can."""
    result = subprocess.run(
        ["bash", str(SCRIPT), "check"], capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL
    )
    if result.returncode == 0:
        return None
    detail = (result.stderr or result.stdout).strip() or f"{SCRIPT.name} check exited with {result.returncode}"
    return f"The real private server is not usable: {detail}\n{INSTALL_HINT}"


def free_port() -> int:
    """A loopback TCP port that was free a moment ago (bind port 0, read it, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class Credentials:
    """A user of the private server: what ``username_env`` / ``password_env`` point at in a manifest."""

    username: str
    email: str
    password: str

    @classmethod
    def fresh(cls, prefix: str = "Gitops") -> Credentials:
        suffix = secrets.token_hex(4)
        return cls(f"{prefix}{suffix}", f"{prefix.lower()}{suffix}@example.invalid", secrets.token_urlsafe(12))


class ServerUser:
    """One registered user, and the server's own API for assertions (independent of ``gitops.edges.service``)."""

    def __init__(self, server: PrivateServer, credentials: Credentials) -> None:
        self.server = server
        self.credentials = credentials
        self.token: str | None = None

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def username(self) -> str:
        return self.credentials.username

    @property
    def email(self) -> str:
        return self.credentials.email

    @property
    def password(self) -> str:
        return self.credentials.password

    def signin(self) -> str:
        """Sign in with user name and password; return the token (valid 60 s) and use it from now on."""
        response = self.server.http.post("/api/auth/signin", json={"email": self.username, "password": self.password})
        body = _json(response)
        if response.status_code != 200 or body.get("ok") != 1 or not isinstance(body.get("token"), str):
            raise PrivateServerError(f"sign-in of {self.username} failed: {_describe(response)}")
        self.token = str(body["token"])
        return self.token

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        json: Any = None,
    ) -> httpx.Response:
        """One authenticated request; keeps the fresh ``X-Token`` of the answer, signs in again after a 401."""
        for attempt in range(2):
            if self.token is None:
                self.signin()
            assert self.token is not None
            response = self.server.http.request(
                method,
                path,
                params=params,
                json=json,
                headers={"X-Token": self.token, "X-Username": self.username},
            )
            fresh = response.headers.get("X-Token")
            if fresh:
                self.token = fresh
            if response.status_code == 401 and attempt == 0:
                self.token = None  # expired (60 s): sign in once more
                continue
            return response
        raise AssertionError("unreachable")

    def call(self, method: str, path: str, *, params: dict[str, str] | None = None, json: Any = None) -> Any:
        """Like :meth:`request`, but insist on ``200 {"ok": 1, ...}`` and return the body."""
        response = self.request(method, path, params=params, json=json)
        body = _json(response)
        if response.status_code != 200 or body.get("ok") != 1:
            raise PrivateServerError(f"{method} {path} as {self.username}: {_describe(response)}")
        return body

    def branches(self) -> list[dict[str, Any]]:
        """``GET /api/user/branches``: every branch with its name, active flags and modules."""
        listing = self.call("GET", "/api/user/branches")["list"]
        assert isinstance(listing, list)
        return listing

    def branch_names(self) -> list[str]:
        return sorted(str(b["branch"]) for b in self.branches())

    def active_branch(self, active_name: str = "activeWorld") -> str | None:
        """The branch whose ``activeWorld`` (or ``activeSim``) flag is set, if any."""
        names = [str(b["branch"]) for b in self.branches() if b.get(active_name) is True]
        assert len(names) <= 1, f"more than one branch has {active_name}: {names}"
        return names[0] if names else None

    def code(self, branch: str) -> dict[str, Any]:
        """``GET /api/user/code?branch=...``: the branch's modules (text, or ``{"binary": base64}``)."""
        modules = self.call("GET", "/api/user/code", params={"branch": branch})["modules"]
        assert isinstance(modules, dict)
        return modules

    def upload(self, branch: str, modules: dict[str, Any]) -> None:
        """``POST /api/user/code``: replace all modules of an existing branch."""
        self.call("POST", "/api/user/code", json={"branch": branch, "modules": modules})

    def clone_branch(self, source: str, new_name: str, default_modules: dict[str, Any] | None = None) -> None:
        body: dict[str, Any] = {"branch": source, "newName": new_name}
        if default_modules is not None:
            body["defaultModules"] = default_modules
        self.call("POST", "/api/user/clone-branch", json=body)

    def set_active_branch(self, branch: str, active_name: str = "activeWorld") -> None:
        self.call("POST", "/api/user/set-active-branch", json={"branch": branch, "activeName": active_name})


@dataclass
class SocketReport:
    """The internet sockets held by the server's processes, and those that touch anything but loopback."""

    inspected: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)


class PrivateServer:
    """A running private server. Start it with :func:`start_private_server` (or ``PrivateServer.start``)."""

    def __init__(self, data_dir: Path, port: int, cli_port: int) -> None:
        self.data_dir = data_dir
        self.port = port
        self.cli_port = cli_port
        self.url = f"http://{LOOPBACK}:{port}"
        self.http = httpx.Client(base_url=self.url, timeout=30.0, transport=_DiagnosingTransport(self))
        self.user: ServerUser | None = None
        #: Seconds from the launch until ``GET /api/version`` answered.
        self.started_in: float | None = None
        self._process: subprocess.Popen[bytes] | None = None

    # --- the default user (the one the session fixture registers) ---

    def _default(self) -> ServerUser:
        if self.user is None:
            raise PrivateServerError("no user registered yet; call register() first")
        return self.user

    @property
    def username(self) -> str:
        return self._default().username

    @property
    def email(self) -> str:
        return self._default().email

    @property
    def password(self) -> str:
        return self._default().password

    def signin(self) -> str:
        return self._default().signin()

    def branches(self) -> list[dict[str, Any]]:
        return self._default().branches()

    def code(self, branch: str) -> dict[str, Any]:
        return self._default().code(branch)

    # --- life cycle ---

    @classmethod
    def start(cls, *, timeout: float = START_TIMEOUT) -> PrivateServer:
        """Launch the installed server on free loopback ports with a fresh world; wait until it answers."""
        problem = install_problem()
        if problem:
            raise PrivateServerError(problem)
        for attempt in range(3):
            data_dir = Path(tempfile.mkdtemp(prefix="gitops-ps-"))
            port = free_port()
            cli_port = free_port()
            while cli_port == port:
                cli_port = free_port()
            server = cls(data_dir, port, cli_port)
            try:
                server._launch()
                server._wait_until_ready(timeout)
            except _PortTaken:
                # Another process took a port between our probe and the server's bind: try other ports.
                server.stop()
                if attempt == 2:
                    raise
                continue
            except BaseException:
                server.stop()
                raise
            return server
        raise AssertionError("unreachable")

    def _launch(self) -> None:
        command = [
            "bash",
            str(SCRIPT),
            "run",
            "--data",
            str(self.data_dir),
            "--port",
            str(self.port),
            "--cli-port",
            str(self.cli_port),
            # If this test process dies without running finalizers, the server stops itself within a second.
            "--watch-pid",
            str(os.getpid()),
        ]
        with (self.data_dir / "launcher.log").open("wb") as log:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() signals the whole group
                cwd=self.data_dir,
            )

    def _wait_until_ready(self, timeout: float) -> None:
        assert self._process is not None
        started = time.monotonic()
        last_error = "no answer yet"
        while time.monotonic() - started < timeout:
            if self._process.poll() is not None:
                raise PrivateServerError(
                    f"the private server exited with code {self._process.returncode} before it answered.\n"
                    + self.log_tail()
                )
            if "EADDRINUSE" in self.logs():
                raise _PortTaken(
                    f"port {self.port} or {self.cli_port} was taken before the server bound it.\n" + self.log_tail()
                )
            try:
                response = self.http.get("/api/version", timeout=2.0)
                if response.status_code == 200 and _json(response).get("ok") == 1:
                    if not self._holds_port():
                        # Another server (a benchmark's, a second suite's) bound the port between our probe and
                        # our bind, and answered in our place: ours will fail with EADDRINUSE. Other ports.
                        raise _PortTaken(f"port {self.port} answers, but not from this server's processes")
                    self.started_in = time.monotonic() - started  # from now on, connection errors are news
                    return
                last_error = _describe(response)
            except httpx.TransportError as exc:
                last_error = f"{type(exc).__name__}: {exc}"
            time.sleep(0.2)
        raise PrivateServerError(
            f"the private server did not answer GET {self.url}/api/version within {timeout:.0f} s "
            f"(last: {last_error}).\n" + self.log_tail()
        )

    def stop(self) -> None:
        """Stop the whole process group (SIGTERM, then SIGKILL), close the client, remove the world folder."""
        try:
            if self._process is not None:
                _stop_group(self._process)
                self._process = None
        finally:
            self.http.close()
            if os.environ.get(KEEP_ENV):
                print(f"private server world kept in {self.data_dir} ({KEEP_ENV} is set)")
            else:
                shutil.rmtree(self.data_dir, ignore_errors=True)

    @property
    def pgid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    # --- users ---

    def register(self, credentials: Credentials | None = None) -> ServerUser:
        """Register a user (``POST /api/register/submit``); the first one becomes the default user."""
        credentials = credentials or Credentials.fresh()
        response = self.http.post(
            "/api/register/submit",
            json={"username": credentials.username, "email": credentials.email, "password": credentials.password},
        )
        if response.status_code != 200 or _json(response).get("ok") != 1:
            raise PrivateServerError(f"registering {credentials.username} failed: {_describe(response)}")
        user = ServerUser(self, credentials)
        if self.user is None:
            self.user = user
        return user

    # --- inspection ---

    def cli(self, expression: str, timeout: float = 10.0) -> Any:
        """Evaluate a JavaScript expression in the server's admin CLI (loopback TCP); return its JSON value.

        The CLI prints a promise's result only when it is truthy, through ``util.inspect``; wrapping the
        expression makes every answer one printable line that decodes back to JSON (``undefined`` is ``None``).
        """
        wrapped = (
            f"Promise.resolve({expression}).then(v => encodeURIComponent("
            "JSON.stringify(v === undefined ? null : v)).replace(/'/g, '%27'))"
        )
        with socket.create_connection((LOOPBACK, self.cli_port), timeout=timeout) as conn:
            reader = conn.makefile("rb")
            try:
                _read_until_prompt(reader)  # the greeting ends with a "< " line
                conn.sendall(wrapped.encode("utf-8") + b"\r\n")
                line = reader.readline().decode("utf-8").rstrip("\r\n").removeprefix("< ")
            finally:
                reader.close()
        if not (line.startswith("'") and line.endswith("'")):
            raise PrivateServerError(f"the admin CLI answered {line!r} to {expression!r}")
        return json.loads(urllib.parse.unquote(line[1:-1]))

    def log_tail(self, lines: int = 25) -> str:
        """The last lines of the launcher's output and of each process log, for failure messages."""
        parts: list[str] = []
        files = [self.data_dir / "launcher.log", *sorted((self.data_dir / "logs").glob("*.log"))]
        for path in files:
            with contextlib.suppress(OSError):
                text = path.read_text("utf-8", errors="replace").splitlines()
                parts.append(f"--- {path.name} (last {lines} lines) ---")
                parts.extend(text[-lines:])
        return "\n".join(parts) if parts else f"(no logs in {self.data_dir})"

    def diagnosis(self) -> str:
        """What a failure message needs: which server processes are alive, and the log tails."""
        members = self.members()
        alive = f"live processes of group {self.pgid}: {members}" if members else "no live server processes"
        return f"{alive}\n{self.log_tail()}"

    def logs(self) -> str:
        """Every process log of this run, concatenated."""
        files = [self.data_dir / "launcher.log", *sorted((self.data_dir / "logs").glob("*.log"))]
        return "\n".join(p.read_text("utf-8", errors="replace") for p in files if p.exists())

    def wait_backend_settled(self, within: float = 60.0, calm: float = 5.0) -> None:
        """Wait until the backend has run its first round of periodic jobs (all at once, a second after it starts)
        and stayed up for ``calm`` seconds since; after a crash in that round (see
        :meth:`run_riding_out_its_crash`) the launcher restarts the backend, which runs the round again."""
        deadline = time.monotonic() + within
        calm_since: float | None = None
        seen = (-1, -1)
        while time.monotonic() < deadline:
            logs = self.logs()
            state = (logs.count("Running cronjob 'expandStrongholds'"), logs.count("exited with code 1, restarting"))
            if state[0] > state[1] and state == seen:
                calm_since = calm_since or time.monotonic()
                if time.monotonic() - calm_since >= calm:
                    return
            else:
                calm_since = None
            seen = state
            time.sleep(0.5)

    def run_riding_out_its_crash(
        self, command: Callable[[], subprocess.CompletedProcess[str]]
    ) -> subprocess.CompletedProcess[str]:
        """Run ``command`` (a gitops run against this server); when it could not connect because the game server's
        own backend crashed meanwhile, run it once more after the launcher restarted the backend.

        The private server's storage (lokijs) sometimes fails a query of the backend's periodic jobs with "fun is
        not a function" while a world ticks; the backend does not catch it, exits, and is restarted by the launcher
        a few seconds later (seen in a fresh-clone run of 2026-11-26, with these logs). That is the game server's
        bug, not the tool's: only with that crash in the logs is the run repeated, on a backend that answers."""
        done = command()
        crashed = "fun is not a function" in self.logs() and "exited with code 1, restarting" in self.logs()
        if done.returncode == 0 or "cannot connect" not in done.stderr or not crashed:
            return done
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError, ValueError):
                if self.http.get("/api/version", timeout=2.0).json().get("ok") == 1:
                    break
            time.sleep(0.5)
        return command()

    def members(self) -> list[int]:
        """The live (non-zombie) processes of the server's process group."""
        return _group_members(self.pgid) if self.pgid is not None else []

    def _holds_port(self) -> bool:
        """Whether one of this server's own processes listens on :attr:`port`."""
        return any(
            line.split()[1].endswith(f":{self.port}") and " LISTEN " in line for line in self.sockets().inspected
        )

    def sockets(self) -> SocketReport:
        """Every TCP/UDP socket of the server's processes; any that is not loopback-only is a violation."""
        return _socket_report(self.members())


@contextlib.contextmanager
def start_private_server(*, register: bool = True) -> Iterator[PrivateServer]:
    """Start a private server (and register a default user); stop it on exit, whatever happened."""
    server = PrivateServer.start()
    try:
        if register:
            server.register()
        yield server
    finally:
        server.stop()


# --- helpers ---


class _DiagnosingTransport(httpx.HTTPTransport):
    """Once the server has answered, a refused or broken connection means it died: say so, with its logs."""

    def __init__(self, server: PrivateServer) -> None:
        # No kept-alive connections: the server (Node) closes an idle one after 5 s, and the pool's replacement would
        # be a socket that the session's client holds across tests, opened during whichever test came next, which
        # the leak guard of tests/conftest.py (rightly, as it cannot tell) would blame on that test.
        super().__init__(limits=httpx.Limits(max_keepalive_connections=0))
        self._server = server

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return super().handle_request(request)
        except httpx.TransportError as exc:
            if self._server.started_in is None:
                raise
            raise PrivateServerError(
                f"{request.method} {request.url}: {type(exc).__name__}: {exc}\n{self._server.diagnosis()}"
            ) from exc


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _describe(response: httpx.Response) -> str:
    text = response.text
    if len(text) > 300:
        text = text[:300] + "..."
    return f"HTTP {response.status_code} {text!r}"


def _read_until_prompt(reader: Any) -> None:
    while True:
        line = reader.readline()
        if not line:
            raise PrivateServerError("the admin CLI closed the connection before its prompt")
        if line.startswith(b"< "):
            return


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, process group) of a process from /proc, or ``None`` when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ppid pgrp ..."; comm may contain spaces and parentheses.
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[2])


def _group_members(pgid: int) -> list[int]:
    if not Path("/proc/self/stat").exists():  # not Linux: ask the kernel whether the group still has anyone
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [pgid]
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _proc_stat(int(entry.name))
            if stat is not None and stat[1] == pgid and stat[0] not in ("Z", "X"):
                members.append(int(entry.name))
    return sorted(members)


def _wait_for_group(process: subprocess.Popen[bytes], deadline: float) -> bool:
    """Wait until the launcher is reaped and no member of its group is alive; ``True`` when that happened."""
    pgid = process.pid
    while time.monotonic() < deadline:
        if process.poll() is not None and not _group_members(pgid):
            return True
        time.sleep(0.05)
    return process.poll() is not None and not _group_members(pgid)


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    pgid = process.pid
    for sig, grace in ((signal.SIGTERM, STOP_GRACE), (signal.SIGKILL, STOP_GRACE)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        if _wait_for_group(process, time.monotonic() + grace):
            return
    process.wait(timeout=1.0)  # the launcher is reaped; a survivor of SIGKILL would be a kernel matter
    survivors = _group_members(pgid)
    if survivors:
        raise PrivateServerError(f"processes {survivors} of the private server survived SIGKILL")


_TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "06": "TIME_WAIT", "0A": "LISTEN"}


def _hex_address(text: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    host, port = text.split(":")
    raw = bytes.fromhex(host)
    # /proc/net stores the address as 32-bit words in host (little-endian) order.
    swapped = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    address: ipaddress.IPv4Address | ipaddress.IPv6Address = (
        ipaddress.IPv4Address(swapped) if len(raw) == 4 else ipaddress.IPv6Address(swapped)
    )
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address, int(port, 16)


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:[") : -1])
    return inodes


def _socket_report(pids: list[int]) -> SocketReport:
    report = SocketReport()
    owned: dict[str, int] = {}
    for pid in pids:
        for inode in _socket_inodes(pid):
            owned[inode] = pid
    for kind in ("tcp", "tcp6", "udp", "udp6"):
        path = Path(f"/proc/net/{kind}")
        if not path.exists():
            continue
        for row in path.read_text().splitlines()[1:]:
            cols = row.split()
            inode = cols[9]
            if inode not in owned:
                continue
            local, local_port = _hex_address(cols[1])
            remote, remote_port = _hex_address(cols[2])
            state = _TCP_STATES.get(cols[3], cols[3]) if kind.startswith("tcp") else "UDP"
            line = f"{kind} {local}:{local_port} -> {remote}:{remote_port} {state} (pid {owned[inode]})"
            report.inspected.append(line)
            remote_ok = remote.is_loopback or (remote.is_unspecified and remote_port == 0)
            if not local.is_loopback or not remote_ok:
                report.violations.append(line)
    return report
