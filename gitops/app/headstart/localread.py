"""The local read that runs beside a plan's imports and its wait for the servers, and the upload bodies it makes.

A plan mostly waits: for its imports, its ledgers and the servers' answers. Reading and hashing the local code can
fill that wait instead of coming before it, so :func:`read_ahead` begins the read as soon as the manifest is loaded,
before the command imports the planning: in a child process forked while the process still has one thread
(:mod:`gitops.edges.forked`), else in a thread. The connects of servers whose host is an IP begin before the fork,
so their handshakes run during it. A read that fails in the child is done again here, so its error is the one a run
without the head start raises. With ``apply --yes`` the child also makes the upload bodies, so that their deflate
starts before the code is unpickled here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import os
import pickle
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from gitops.app.localcode import read_code
from gitops.app.options import Options
from gitops.app.targets import select
from gitops.config.folders import default_state_dir
from gitops.config.manifest import LoadedManifest, load_manifest
from gitops.core.codeset import remember_digests, upload_body
from gitops.core.early import early_route
from gitops.edges.build import build_commands, register_secrets
from gitops.edges.early import begin_connect
from gitops.edges.forked import ForkedCall
from gitops.edges.threads import Background, start_quiet

if TYPE_CHECKING:  # what the child's code is made of: imported by the worker, while the servers answer
    from gitops.core.local import LocalBranch
    from gitops.edges.sources import LocalCode


@dataclasses.dataclass(frozen=True)
class UploadBody:
    """The body that uploads one branch's local code (:func:`gitops.core.codeset.upload_body`), for deflating
    ahead: made by the local read's child process, or on demand (``content``) from the code read here."""

    server: str
    branch: str
    digest: str  # the code's (CodeSet.digest)
    content: Callable[[], bytes]


#: The branches whose upload bodies are wanted, by (server, branch): each with the digest of the code the server is
#: known to hold (its ledger's), or ``None``. Code equal to it gets no body: a deploy that most likely uploads nothing.
Wanted = Mapping[tuple[str, str], "str | None"]


def upload_bodies(local: LocalCode, wanted: Wanted) -> list[UploadBody]:
    """The upload body of each branch that ``wanted`` names and whose code its server does not hold, made when asked
    for (each distinct body once)."""
    made: dict[tuple[str, str], bytes] = {}

    def content(branch: LocalBranch) -> Callable[[], bytes]:
        def make() -> bytes:
            key = (branch.branch, branch.code.digest)
            if key not in made:
                made[key] = upload_body(branch.branch, branch.code.wire())  # wire(): sorted, as apply sends it
            return made[key]

        return make

    return [
        UploadBody(b.server, b.branch, b.code.digest, content(b))
        for b in local.branches
        if (b.server, b.branch) in wanted and wanted[(b.server, b.branch)] != b.code.digest
    ]


def _bodies_made(local: LocalCode, told: bytes | None) -> bytes:
    """What the child process writes before its code: the upload bodies the parent told it it wants (``None``:
    nothing told, no body; the parent makes any it wants itself)."""
    if told is None:
        return b""
    wanted: dict[tuple[str, str], str | None] = pickle.loads(told)  # noqa: S301 - our own parent's bytes
    return pickle.dumps([(b.server, b.branch, b.digest, b.content()) for b in upload_bodies(local, wanted)])


def _bodies_from(preface: bytes) -> list[UploadBody]:
    made: list[tuple[str, str, str, bytes]] = pickle.loads(preface)  # noqa: S301 - our own child's bytes
    return [UploadBody(server, branch, digest, _given(content)) for server, branch, digest, content in made]


def _digested(local: LocalCode) -> LocalCode:
    """``local``, each branch's code digest computed (kept with the set, which the child pickles): the plan needs
    it, and the child's core has the time."""
    for branch in local.branches:
        _ = branch.code.digest
    return local


def _hand_bodies(forked: ForkedCall[LocalCode], then: Callable[[list[UploadBody]], None]) -> bool:
    """Hand the bodies the child made to ``then`` as soon as it wrote them (in a thread of its own); whether it
    did."""
    preface = forked.preface()
    if not preface:
        return False
    then(_bodies_from(preface))  # large bodies: what was not deflated is not kept after this
    return True


def _given(content: bytes) -> Callable[[], bytes]:
    return lambda: content


class _NewerFiles:
    """The child's side of :meth:`LocalRead.changes_seen`: called with each file's modification time as it is read,
    it writes one byte on a pipe the first time a file is newer than ``since``."""

    def __init__(self, since: int, ends: tuple[int, int]) -> None:
        self._since = since
        self._read_end, self._write_end = ends
        self._said = False

    @classmethod
    def open(cls, since: int) -> _NewerFiles | None:
        try:
            return cls(since, os.pipe2(os.O_CLOEXEC))  # not inherited by a git the child runs
        except (OSError, AttributeError):  # no pipe2 (macOS): no hint, which reads as "changed"
            return None

    def __call__(self, mtime_ns: int) -> None:
        if not self._said and mtime_ns > self._since:
            self._said = True
            with contextlib.suppress(OSError):
                os.write(self._write_end, b"!")

    def parent_end(self, *, forked: bool) -> int:
        """After the fork: the end this process reads (non-blocking), the child's end closed here; ``-1`` (both
        closed) when nothing was forked."""
        os.close(self._write_end)
        if not forked:
            os.close(self._read_end)
            return -1
        os.set_blocking(self._read_end, False)
        return self._read_end


def read_marker(options: Options) -> tuple[Path | None, int | None]:
    """Where a planning command records that the servers held its code (:meth:`LocalRead.remember_read`), and when
    that read began (nanoseconds; ``None`` when none was recorded). One file per manifest and ref under the state
    folder: ``reads/<digest>``, empty, its modification time the record. ``(None, None)`` for a path the system
    refuses."""
    try:
        key = f"{options.manifest.resolve()}\0{options.ref or ''}"
    except (OSError, RuntimeError):
        return None, None
    state_dir = options.state_dir or default_state_dir(options.env)
    marker = state_dir / "reads" / hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    try:
        return marker, os.stat(marker).st_mtime_ns
    except (OSError, ValueError):
        return marker, None


class LocalRead:
    """The local code, read beside the wait for the servers: in a child process when it can, else in a thread.

    A plan mostly waits for the servers (the sign-in, the branch list). Reading and hashing the files, and importing
    the modules that do it, can fill that wait instead of coming before it. Made before the HTTP client is imported
    and the ledgers are read, it forks a child that reads the code (:class:`gitops.edges.forked.ForkedCall`: on
    Linux, while the process has one thread), so that the read runs on another core beside those imports instead of
    sharing this interpreter with them. The commands that plan make it as soon as the manifest is loaded
    (:func:`read_ahead`), before they import the planning itself. The caller calls :meth:`start` just before its
    first request. A worker thread then waits for the child's code (or, where nothing was forked, reads it itself),
    calls ``then`` with it and imports ``then_import``: the modules the caller needs once the servers have
    answered. Neither the child nor the worker touches a ledger, a client or the terminal, so nothing is shared but
    the result. The worker is a daemon thread: a Ctrl-C in the main thread ends the run without waiting for it (the
    child is killed).

    The child never reports an error: when its read fails, or its result cannot come back, the worker reads the
    code again in this process, so that an error is raised, worded and exited with exactly as before.

    With a ``build`` command nothing is forked: the code is read at :meth:`start`, in this thread, before any server
    is asked. The build may take minutes, it must run in the main thread (only that thread receives Ctrl-C), and the
    servers are then checked after it, as close to the upload as before. When :meth:`start` was never called,
    :meth:`result` reads the code in this thread (or takes the child's).

    Used as a context manager: when the caller's block fails (a server's error), the local code's own error is
    raised instead, if it has one: a run without servers would have said that first.

    A hint for what follows the read (:meth:`changes_seen`): given when the code was last found on the servers
    (``changed_since``, from :func:`read_marker`), the child says, on a pipe of its own, as soon as it reads a file
    modified since. The head start imports the HTTP client then, since an upload most likely follows
    (:meth:`gitops.app.headstart.start.HeadStart.import_client_when_needed`); nothing a plan decides rests on it.
    """

    #: The interpreter's thread switch interval while the worker runs (shorter than the default): the main thread
    #: reads an answer in pieces, and after each one it waits for the worker to let go of the interpreter.
    SWITCH_INTERVAL = 0.0005

    def __init__(
        self,
        loaded: LoadedManifest,
        ref: str | None,
        env: Mapping[str, str],
        bodies: bool = False,
        connections: dict[str, socket.socket] | None = None,
        marker: Path | None = None,
        changed_since: int | None = None,
    ) -> None:
        self.loaded = loaded
        #: The servers' connects begun before the fork (:func:`read_ahead`), for the head start
        #: (:meth:`take_connections`).
        self._connections = dict(connections or {})
        #: Where :meth:`remember_read` records when this read began (``time.time_ns()``), and that time.
        self._marker = marker
        self._began = time.time_ns()
        self._read: Callable[[], LocalCode] = lambda: read_code(loaded, ref, env)
        self._then_import: tuple[str, ...] = ()
        self._bodies = bodies
        self._then: Callable[[list[UploadBody]], None] | None = None
        self._wanted: dict[tuple[str, str], str | None] = {}
        self._result: LocalCode | None = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._switch = sys.getswitchinterval()
        self._builds = bool(build_commands(loaded.manifest))
        self._forked: ForkedCall[LocalCode] | None = None
        self._prefacing: Background[bool] | None = None  # the thread that waits for the child's bodies
        self._cancelled = False
        #: The parent's end of the pipe on which the child says it read a file changed since ``changed_since``
        #: (-1: none), and whether it said so (``None``: unknown, taken as changed).
        self._newer = -1
        self._changes: bool | None = None
        self._watching: Background[None] | None = None  # when_changes_seen's thread
        if not self._builds:
            # The parent judges output against the same secrets as the child would (read_code registers them).
            register_secrets(loaded, env)
            newer = _NewerFiles.open(changed_since) if changed_since is not None and ref is None else None
            work = lambda: _digested(read_code(loaded, ref, env, newer))  # noqa: E731
            # With bodies, the child makes the upload bodies that start() tells it are wanted, so that their deflate
            # can start before its code is unpickled here.
            self._forked = ForkedCall.start(work, _bodies_made if bodies else None)
            if newer is not None:
                self._newer = newer.parent_end(forked=self._forked is not None)
                self._changes = None if self._forked is None else False

    def changes_seen(self) -> bool:
        """Whether the child has read a file modified since ``changed_since`` (the last read that left the servers
        equal to the code, :meth:`remember_read`), so far; ``True`` when that is unknown (no such read recorded, no
        child, a build). Asked without waiting: a hint of whether an upload will follow, never a fact a plan rests
        on (a removed file, or one whose time was set back, goes unseen)."""
        if self._changes is False and self._newer >= 0 and self._watching is None:
            try:
                said = os.read(self._newer, 1)
            except BlockingIOError:
                return False
            except OSError:
                said = b""
            self._changes = bool(said)
            self._close_newer()
        return self._changes is not False

    def when_changes_seen(self, then: Callable[[], None]) -> None:
        """Call ``then`` once :meth:`changes_seen`: now, in this thread, when it is so already (or unknown); else in
        a thread of its own that waits for the child to say so; never when the child reads no changed file. The
        thread is joined by :meth:`cancel`, and an error of ``then`` there is dropped (it is a head start: the
        caller does the same again later, and meets the error then)."""
        if self.changes_seen():
            then()
            return
        if self._newer < 0 or self._watching is not None:
            return
        watched, self._newer = self._newer, -1  # the watcher's now: it closes it

        def watch() -> None:
            try:
                os.set_blocking(watched, True)
                said = os.read(watched, 1)  # a byte, or the end when the child exits without one
            except OSError:
                said = b""
            finally:
                os.close(watched)
            self._changes = bool(said)
            if said:
                then()

        self._watching = Background(watch, name="gitops-changes")

    def remember_read(self) -> None:
        """Record in the marker (:func:`read_marker`) that the code as this read found it is what the servers hold
        (after a plan without changes, or a successful apply): its time is when this read began. Nothing without a
        marker, or when it cannot be written (a read-only state folder): it is a hint."""
        marker = self._marker
        if marker is None:
            return
        with contextlib.suppress(OSError):
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
            os.utime(marker, ns=(self._began, self._began))

    def _close_newer(self) -> None:
        if self._newer >= 0:
            os.close(self._newer)
            self._newer = -1

    def take_connections(self) -> dict[str, socket.socket]:
        """The connects begun before the fork, by server (:func:`gitops.edges.early.begin_connect`), handed over
        once: the head start's early connections finish them (:meth:`gitops.app.headstart.start.HeadStart.connect`)."""
        taken, self._connections = self._connections, {}
        return taken

    @property
    def builds(self) -> bool:
        """Whether a build runs first: then no request may leave before it has succeeded."""
        return self._builds

    def start(
        self,
        then: Callable[[list[UploadBody]], None] | None = None,
        wanted: Wanted | None = None,
        then_import: tuple[str, ...] = (),
    ) -> None:
        """Start the worker (once; with a build, read the code now). The worker calls ``then`` with the upload
        bodies of the branches ``wanted`` names (:data:`Wanted`; as soon as the child has made them, before its
        code is unpickled here), and imports ``then_import``. Only a LocalRead made with ``bodies`` has its child
        make them; otherwise the worker makes them from the code."""
        if self._builds and self._result is None and self._error is None:
            self._result = self._read()
        if self._result is not None or self._error is not None or self._thread is not None:
            return
        self._then = then
        self._then_import = then_import
        self._wanted = dict(wanted or {})
        if self._forked is not None and self._bodies and then is not None:
            self._forked.tell(pickle.dumps(self._wanted))  # read by the child once its code is read
            # Its own thread waits for the child's bodies, so that their deflate starts the moment they are made,
            # not when the worker is done with the import it is in.
            forked = self._forked
            self._prefacing = Background(lambda: _hand_bodies(forked, then), name="gitops-local-bodies")
        self._thread = threading.Thread(target=self._work, name="gitops-local-read", daemon=True)
        sys.setswitchinterval(self.SWITCH_INTERVAL)
        start_quiet(self._thread)  # a Ctrl-C must reach the main thread, waiting in a socket read

    def _work(self) -> None:
        try:
            if self._forked is not None:
                # While the child reads: what its result is made of (unpickling needs it), then what comes after,
                # as long as the child is not done (its code is wanted first).
                importlib.import_module("gitops.core.local")
                for name in self._then_import:
                    if self._forked.ready():
                        break
                    importlib.import_module(name)
            given = self._prefacing.result() if self._prefacing is not None else False
            self._result = self._take()
            if self._then is not None and not given:
                self._then(upload_bodies(self._result, self._wanted))
            for name in self._then_import:
                importlib.import_module(name)
        except BaseException as exc:  # handed to the main thread by result()
            self._error = exc
        finally:
            if self._prefacing is not None:
                self._prefacing.join()  # it ends with the child, which collect() waits for anyway
            if self._forked is not None:
                self._forked.collect()

    def _take(self) -> LocalCode:
        """The child's code, or this process's own read when there is no child or it failed."""
        local = self._forked.result() if self._forked is not None else None
        if local is None:
            if self._cancelled:
                raise KeyboardInterrupt  # the run is ending: no read of its own instead of the child's
            return self._read()
        for branch in local.branches:
            remember_digests(branch.code)
        return local

    def result(self) -> LocalCode:
        """The local code; the read's own error (e.g. :class:`SourceError`) if it failed."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            sys.setswitchinterval(self._switch)
        elif self._result is None and self._error is None:
            try:
                self._result = self._take()
            except BaseException as exc:
                self._error = exc
            finally:
                if self._forked is not None:
                    self._forked.collect()
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def cancel(self) -> None:
        """Stop the child, if one is still reading (a Ctrl-C); the worker then ends without reading itself."""
        self._cancelled = True
        self._close_newer()
        if self._forked is not None:
            self._forked.cancel()
        if self._watching is not None:
            self._watching.join()  # it ends with the child (the pipe's end), and then with its ``then``
        for sock in self.take_connections().values():  # the run failed before its head start took them
            sock.close()

    def __enter__(self) -> LocalRead:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None:
            return
        if issubclass(kind, KeyboardInterrupt):
            self.cancel()
            sys.setswitchinterval(self._switch)
        elif self._builds and self._result is None and self._error is None:
            return  # failed before the build ran: the caller's error stands, and no build starts now
        else:
            self.result()


def read_ahead(options: Options) -> LocalRead:
    """The local read of a command that plans, begun as soon as the manifest is loaded: :class:`LocalRead` of the
    manifest narrowed to ``options.targets`` (its ``loaded``, which the command's session then takes). Made before
    the command imports the planning, the session and the ledgers, so that its child reads beside those imports.
    The caller hands it to the plan's head start (:class:`gitops.app.headstart.start.HeadStart`, which
    :func:`gitops.app.pipeline.make_or_load` makes), and calls :meth:`LocalRead.cancel` when it ends
    (a child still reading because the command failed before it planned is stopped; after the plan, nothing).

    Raises what loading the manifest raises (:class:`~gitops.errors.ManifestError`), and :class:`UsageError` for
    targets the manifest does not have, as opening the session would."""
    loaded = select(load_manifest(options.manifest), options.targets)
    marker, since = read_marker(options)
    return LocalRead(
        loaded,
        options.ref,
        options.env,
        bodies=options.unattended_apply,
        connections=begin_connections(loaded, options),
        marker=marker,
        changed_since=since,
    )


def begin_connections(loaded: LoadedManifest, options: Options) -> dict[str, socket.socket]:
    """The TCP connects of the servers whose address is an IP, begun here, before the fork, without a thread
    (:func:`gitops.edges.early.begin_connect`): the handshake then runs during the fork and the imports that
    follow, sooner than the head start's early connections could begin it. For the servers those go to
    (:func:`gitops.core.early.early_route`); none with a test's transport, which has no sockets (the head start sends
    through it: :meth:`gitops.app.headstart.start.HeadStart.connect`)."""
    if options.transport is not None:
        return {}
    begun: dict[str, socket.socket] = {}
    for server in sorted({branch.server for branch in loaded.manifest.branches}):
        route = early_route(loaded.manifest.servers[server].url, options.refresh)
        sock = begin_connect(route.address) if route is not None else None
        if sock is not None:
            begun[server] = sock
    return begun
