"""The session of one run: credentials, ledgers and clients of the servers it talks to.

It is the only place that opens clients, and the one place that imports the HTTP client (:func:`http_client`),
when a request must go through it. The fast start of a plan (:mod:`gitops.app.headstart`) attaches to it: its
early connections are handed to the clients made here, and it is closed with the session. Planning gets a
read-only view of each server (:meth:`Session.reader`), applying the writing client (:meth:`Session.writer`). The
clients tell the ledgers what they learn (the ledger is their observer); the session saves the ledgers once per
logical step (:meth:`Session.save`) and when it closes, so a run killed with ``kill -9`` loses at most what it
learnt in the step in progress; every save is atomic.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from gitops.app.options import Options
from gitops.app.targets import select
from gitops.config.credentials import Auth, auth_available, resolve_auth
from gitops.config.manifest import LoadedManifest, load_manifest
from gitops.core.budget import BudgetFacts
from gitops.core.compression import Compression, upload_compression
from gitops.core.endpoints import PROBE_BRANCH
from gitops.core.remote import RemoteReader, RemoteWriter
from gitops.edges.ledger import Ledger, SealKey, default_state_dir, lock_wait
from gitops.edges.service.observer import Observer
from gitops.edges.service.outgoing import Outgoing
from gitops.errors import GitopsError, StateFolderError
from gitops.secrets import Secret

if TYPE_CHECKING:  # the HTTP client is imported when a request must go through it (http_client)
    from gitops.edges.early import Ahead
    from gitops.edges.service.client import ReadOnlyClient, ServiceClient
    from gitops.edges.service.transport import Borrowed, TransportAhead


class HttpClient(NamedTuple):
    """The HTTP client's classes (:func:`http_client`)."""

    service: type[ServiceClient]
    read_only: type[ReadOnlyClient]
    borrowed: type[Borrowed]
    transport_ahead: type[TransportAhead]


@functools.cache
def http_client() -> HttpClient:
    """The HTTP client (httpx, httpcore and the tool's client module), imported the first time a request must go
    through it: a plan whose branch lists were read on the early connections never needs it."""
    from gitops.edges.service import client, transport  # noqa: PLC0415 (boundary: the HTTP client)

    return HttpClient(client.ServiceClient, client.ReadOnlyClient, transport.Borrowed, transport.TransportAhead)


class Attached(Protocol):
    """What the session asks of the head start attached to it (:class:`gitops.app.headstart.start.HeadStart`)."""

    def connection(self, server: str) -> Ahead | None:
        """The early connection the server's client takes (``None``: it connects as usual)."""

    def before_client(self) -> None:
        """Called before a client is made (imports under way are waited for, not raced)."""

    def body_ahead(self, server: str, branch: str, digest: str | None) -> bytes | None:
        """The upload body made ahead for ``branch`` with code of ``digest``, or ``None``."""

    def settle(self) -> None:
        """Count what was sent ahead and never claimed: before the last save."""

    def join(self) -> None:
        """Wait for its threads: after the last save."""

    def close(self) -> None:
        """Close its connections: after the clients."""


class Session:
    """Clients and ledgers of the servers one run talks to; opened lazily, saved per step, closed together."""

    def __init__(self, loaded: LoadedManifest, options: Options) -> None:
        self.loaded = loaded
        self.options = options
        self.state_dir = options.state_dir or default_state_dir(options.env)
        self._clients: dict[str, ServiceClient] = {}
        self._ledgers: dict[str, Ledger] = {}
        self._auth: dict[str, Auth] = {}
        self._queried: set[str] = set()
        self._all_opened = False
        #: The head start attached to this session (:meth:`attach`), if any.
        self._head_start: Attached | None = None

    def attach(self, head_start: Attached) -> None:
        """Give the clients made from now on ``head_start``'s early connections; it is closed with the session."""
        self._head_start = head_start

    def has_client(self, server: str) -> bool:
        """Whether the server's client was made."""
        return server in self._clients

    def servers(self) -> list[str]:
        """The servers the manifest's branches are on."""
        return servers_of(self.loaded)

    def has_credentials(self, server: str) -> bool:
        """Whether the manifest's credentials for ``server`` are present (without reading them)."""
        config = self.loaded.manifest.servers[server]
        return auth_available(config, self.options.env, cwd=self.loaded.base_dir)

    def auth(self, server: str) -> Auth:
        """The server's credentials; :class:`AuthError` naming what is missing."""
        if server not in self._auth:
            config = self.loaded.manifest.servers[server]
            self._auth[server] = resolve_auth(server, config, self.options.env, cwd=self.loaded.base_dir)
        return self._auth[server]

    def ledger(self, server: str) -> Ledger:
        """The server's ledger: keyed by the token's fingerprint, or the last one used when there is no token.

        The first call opens (and locks) the ledgers of every server of the session, in the order of their files'
        paths: two runs whose manifests name the same servers in another order (or under other names) take the
        locks in the same order, so that neither waits for a lock the other holds while holding one it wants."""
        if not self._all_opened:
            self._all_opened = True
            for name in sorted(self.servers(), key=self._ledger_path):
                if name != server:
                    with contextlib.suppress(GitopsError):  # its own error comes when it is asked for
                        self._open_ledger(name)
                else:
                    self._open_ledger(name)
        return self._open_ledger(server)

    def _open_ledger(self, server: str) -> Ledger:
        if server not in self._ledgers:
            config = self.loaded.manifest.servers[server]
            auth = self.auth(server) if self.has_credentials(server) else None
            fingerprint = auth.fingerprint() if auth is not None else None
            for known in self._ledgers.values():
                # Two server names for one URL and one account share one ledger file: one object, one lock.
                if known.fingerprint == fingerprint and known.server_url == Ledger.normal_url(config.url):
                    self._ledgers[server] = known
                    return known
            # Locked for the whole run: two runs on one state folder take turns instead of saving over each other.
            self._ledgers[server] = Ledger.open(
                self.state_dir,
                config.url,
                fingerprint,
                clock=self.options.clock,
                lock_wait=lock_wait(self.options.env),
                waiting=self.options.waiting,
                # Only a file sealed with this credential's key is believed (the cache is a channel; seal.py).
                seal=None
                if auth is None
                else SealKey((t for t, _ in auth.secret_texts()), Ledger.normal_url(config.url)),
            )
        return self._ledgers[server]

    def _ledger_path(self, server: str) -> str:
        config = self.loaded.manifest.servers[server]
        try:
            fingerprint = self.auth(server).fingerprint() if self.has_credentials(server) else None
        except GitopsError:
            fingerprint = None
        return str(Ledger.path_for(self.state_dir, config.url, fingerprint)[0])

    def client(self, server: str) -> ServiceClient:
        """The :class:`gitops.edges.service.ServiceClient` of the server (credentials required); its observer is the
        server's ledger."""
        if server not in self._clients:
            start = self._head_start
            early = start.connection(server) if start is not None else None
            self._clients[server] = self._new_client(server, self.ledger(server), early)
        return self._clients[server]

    def _new_client(self, server: str, observer: Observer, early: Ahead | None, *, side: bool = False) -> ServiceClient:
        if self._head_start is not None:
            self._head_start.before_client()
        config = self.loaded.manifest.servers[server]
        transport = self.options.transport
        if side and transport is not None:  # a test's transport: the main client's to close, not the side's
            transport = http_client().borrowed(transport)
        return http_client().service(
            server_name=server,
            url=config.url,
            auth=self.auth(server),
            observer=observer,
            clock=self.options.clock,
            transport=transport,
            max_wait=self.options.max_wait,
            on_wait=self.options.on_wait,
            log=self.options.log,
            waiting=self.options.waiting,
            early=early,
        )

    def outgoing(self, server: str) -> Outgoing:
        """What the server's requests are before the wire (their headers, login, pacing, count in the ledger, an
        answer's effects), without a client: the head start writes the branch list with it before the HTTP client
        is imported. Every client makes its own the same way (:meth:`Outgoing.of`), from the same settings."""
        options = self.options
        return Outgoing.of(
            server_name=server,
            url=self.loaded.manifest.servers[server].url,
            auth=self.auth(server),
            observer=self.ledger(server),
            clock=options.clock,
            max_wait=options.max_wait,
            on_wait=options.on_wait,
            log=options.log,
        )

    def side_client(self, server: str, observer: Observer, early: Ahead | None = None) -> ServiceClient:
        """A second client of the server, for one read sent beside the main client's
        (:mod:`gitops.app.headstart.sidereads`): same credentials and settings, its own connection (``early``, one
        opened early, when given), and ``observer`` instead of the ledger. The caller closes it."""
        return self._new_client(server, observer, early, side=True)

    def mark_queried(self, server: str) -> None:
        """The token of ``server`` was asked in this run (:meth:`learn_unlimited` does not ask again)."""
        self._queried.add(server)

    def reader(self, server: str) -> RemoteReader:
        """Read-only access to the server, for planning: a narrow wrapper that has no method that writes."""
        return http_client().read_only(self.client(server))

    def writer(self, server: str) -> RemoteWriter:
        """Read and write access to the server, for applying."""
        return self.client(server)

    def compression(self, server: str) -> Compression:
        """Whether uploads to ``server`` go compressed (:func:`gitops.core.compression.upload_compression`): the
        manifest's ``compress``, and for ``auto`` the ledger's record, the login, and whether the ledger's branch
        list shows that the probe's branch name is free."""
        mode = self.loaded.manifest.servers[server].compress
        if mode != "auto":  # decided by the manifest alone: nothing is asked of the ledger
            return upload_compression(mode, None, signs_in=False, probe_free=None)
        ledger = self.ledger(server)
        login = self.login(server)
        listed = ledger.remembered_branch_list()
        return upload_compression(
            mode,
            ledger.compression(),
            signs_in=login is not None and login.signs_in,
            probe_free=None if listed is None else all(b.name != PROBE_BRANCH for b in listed[0]),
        )

    def prepare_compression(self, server: str) -> bool:
        """Set the server's client to compress or not (:meth:`compression`), sending the probe first when it is
        needed; whether uploads will be compressed. The probe's answer is kept in the ledger (saved)."""
        state = self.compression(server)
        if state == "probe":
            learnt = self.client(server).probe_compression()
            self.ledger(server).record_compression(learnt)
            self.save()
            state = "on" if learnt else "off"
        self.client(server).compress = state == "on"
        return state == "on"

    def body_ahead(self, server: str, branch: str, digest: str | None) -> bytes | None:
        """The JSON of the upload body of ``branch`` made ahead by the head start, when it uploads code of
        ``digest`` (:attr:`gitops.core.plan.BranchPlan.upload_digest`); ``None`` otherwise, or without one."""
        start = self._head_start
        return start.body_ahead(server, branch, digest) if start is not None else None

    def learn_unlimited(self, server: str) -> bool:
        """Ask the server (once per run) whether the token is unlimited now: the person may have pressed Proceed on
        the no-rate-limit page since the ledger last looked. The token query is not rate limited; it is skipped
        with --refresh=never (no request at all) and for password logins (private servers have no limits)."""
        if self.options.refresh == "never" or server in self._queried:
            return self.unlimited_now(server)
        self._queried.add(server)
        login = self.login(server)
        if login is None or not login.rate_limited:
            return False
        try:
            self.client(server).query_token()
        except GitopsError as exc:  # an old server without the token query: the ledger's view stands
            if self.options.log is not None:
                self.options.log(f"token query on server '{server}' failed: {exc.message}")
        self.save(server)
        return self.unlimited_now(server)

    def scope(self, server: str) -> tuple[bool, frozenset[str]] | None:
        """What the server's token may use: full access, or these endpoint keys; ``None`` when there is nothing to
        know (a password login: private servers have no scopes) or it could not be learnt. From the ledger when it
        learnt it within a day, else from the token query (no rate limit)."""
        login = self.login(server)
        if login is None or not login.rate_limited:
            return None
        known = self.ledger(server).scope()
        if known is not None or self.options.refresh == "never":
            return known
        try:
            self.client(server).query_token()
        except GitopsError as exc:  # a server without the token query: scopes are not known, nor checked
            if self.options.log is not None:
                self.options.log(f"token query on server '{server}' failed: {exc.message}")
            return None
        self.save(server)
        return self.ledger(server).scope()

    def login(self, server: str) -> Auth | None:
        """The server's credentials, or ``None`` when it has none: what they are (rate limited, a sign-in) is asked
        of them, never of the name of their kind."""
        return self.auth(server) if self.has_credentials(server) else None

    def unlimited_now(self, server: str) -> bool:
        """Whether the ledger knows the server's token to be unlimited now (the no-rate-limit page's two hours)."""
        until = self.ledger(server).unlimited_until
        return until is not None and until > self.options.clock.now()

    def budget_facts(self, server: str) -> BudgetFacts:
        """What the ledger knows of the server's token, for the budget (a password login spends no budget)."""
        ledger = self.ledger(server)
        # Only token-authenticated requests are rate limited: a password login spends no budget.
        login = self.login(server)
        limited = login is None or login.rate_limited
        return BudgetFacts(ledger.windows(), ledger.unlimited_until, self.loaded.manifest.budget.reserve, limited)

    def unlock_link(self, server: str) -> Secret | None:
        """The no-rate-limit link of the server's token, or ``None`` (no credentials, or a password login)."""
        try:
            return self.client(server).no_rate_limit_url()
        except GitopsError:
            return None

    def warnings(self) -> list[str]:
        """What the ledgers found wrong with their files (corrupt, unreadable, unwritable, rewritten meanwhile)."""
        for ledger in self._distinct_ledgers():
            ledger.notice_rewrite()
        return [w for ledger in self._distinct_ledgers() for w in ledger.warnings]

    def _distinct_ledgers(self) -> list[Ledger]:
        return list({id(ledger): ledger for ledger in self._ledgers.values()}.values())

    def save(self, server: str | None = None) -> None:
        """Save every ledger that learnt something since its last save (or only ``server``'s): the end of one
        logical step.

        The ledger is a cache: failing to write it must not fail the deploy, but it becomes a warning. Each step's
        write is atomic (safe when the run is killed); :meth:`close` makes the last one durable (``fsync``), once
        per run instead of after every step. While servers are asked at the same time (one thread per ledger), each
        thread saves only its own server's ledger.
        """
        self._save(durable=False, only=None if server is None else self._ledgers.get(server))

    def save_or_refuse(self, servers: Iterable[str]) -> None:
        """Save the ledgers of ``servers`` now, durably, or raise :class:`StateFolderError`: before ``apply`` sends
        anything, so that a full or read-only state folder refuses the deploy instead of leaving it unrecorded."""
        for ledger in {id(self.ledger(s)): self.ledger(s) for s in servers}.values():
            try:
                ledger.save(durable=True)
            except OSError as exc:
                raise state_folder_error(exc, ledger.path) from None

    def _save(self, *, durable: bool, only: Ledger | None = None) -> None:
        for ledger in [only] if only is not None else self._distinct_ledgers():
            try:
                if ledger.changed:
                    ledger.save(durable=durable)
                elif durable:
                    ledger.sync()
            except OSError as exc:
                warning = f"the ledger at {ledger.path} cannot be written ({exc.strerror}); it was not updated."
                if warning not in ledger.warnings:
                    ledger.warnings.append(warning)

    def close(self) -> None:
        """Save what was learnt (durably) and close the clients (and the head start's connections)."""
        start = self._head_start
        if start is not None:
            start.settle()  # a branch list sent ahead that no request claimed is counted before the save
        try:
            self._save(durable=True)
        finally:
            if start is not None:
                start.join()
            for client in self._clients.values():
                client.close()
            self._clients.clear()
            if start is not None:
                start.close()
            for ledger in self._distinct_ledgers():
                ledger.close()


@contextmanager
def open_session(options: Options, loaded: LoadedManifest | None = None) -> Iterator[Session]:
    """A :class:`Session` for the manifest (loaded here unless given), narrowed to ``options.targets``
    (:func:`gitops.app.targets.select`: the session never sees, reads or contacts anything else), closed (and
    saved) when the block ends."""
    session = Session(select(loaded or load_manifest(options.manifest), options.targets), options)
    try:
        yield session
    finally:
        session.close()


def servers_of(loaded: LoadedManifest) -> list[str]:
    """The servers the manifest's branches are on, sorted."""
    return sorted({b.server for b in loaded.manifest.branches})


def state_folder_error(exc: OSError, where: Path) -> StateFolderError:
    """The refusal of an apply whose state folder cannot be written (``exc`` at ``where``), nothing sent yet."""
    return StateFolderError(
        f"the state folder cannot be written: {exc.filename or where}: {exc.strerror or exc}; apply records each "
        "deploy in the ledger there and keeps its code for 'gitops rollback', so nothing was sent",
        hint="Free space there, or make it writable, or give another folder with --state-dir (GITOPS_STATE_DIR); "
        "then apply again.",
    )
