"""The session of one run: credentials, ledgers and clients of the servers it talks to.

It is the only place that opens clients. Planning gets a read-only view of each server (:meth:`Session.reader`),
applying the writing client (:meth:`Session.writer`). The clients tell the ledgers what they learn (the ledger is
their observer); the session saves the ledgers once per logical step (:meth:`Session.save`, called by the use cases
after each server's reads, after the verification downloads and after each apply step) and when it closes. A run
killed with ``kill -9`` so loses at most what it learnt in the step in progress; every save is atomic.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal

from gitops.app.options import Options
from gitops.config.manifest import LoadedManifest, load_manifest
from gitops.core.budget import BudgetFacts
from gitops.core.remote import BranchInfo, RemoteReader, RemoteWriter
from gitops.errors import GitopsError
from gitops.secrets import Secret

if TYPE_CHECKING:  # imported lazily at run time: only commands that talk to a server need them
    from gitops.app.localcode import UploadBody
    from gitops.config.credentials import Auth
    from gitops.edges.bodies import BackgroundDeflates
    from gitops.edges.early import EarlyConnection
    from gitops.edges.ledger import Ledger
    from gitops.edges.service import Observer, ServiceClient
    from gitops.edges.threads import Background


class Session:
    """Clients and ledgers of the servers one run talks to; opened lazily, saved per step, closed together."""

    def __init__(self, loaded: LoadedManifest, options: Options) -> None:
        from gitops.edges.ledger import default_state_dir

        self.loaded = loaded
        self.options = options
        self.state_dir = options.state_dir or default_state_dir(options.env)
        self._clients: dict[str, ServiceClient] = {}
        self._early: dict[str, EarlyConnection] = {}
        #: Connections opened early for the reads a fresh ledger's server will be asked ahead (gitops.app.ahead).
        self._side_early: dict[str, list[EarlyConnection]] = {}
        self._ledgers: dict[str, Ledger] = {}
        self._auth: dict[str, Auth] = {}
        self._queried: set[str] = set()
        #: The compression probes sent while the servers were read (gitops.app.ahead), and what each answered.
        self.probed_ahead: dict[str, bool | None] = {}
        self._all_opened = False
        self._deflating: BackgroundDeflates | None = None
        #: The HTTP client's modules being imported ahead of an upload (deflate_ahead), joined before a client is made.
        self._importing: Background[None] | None = None
        #: The upload bodies the local read made ahead, by (server, branch): the code's digest and the body's JSON.
        self._bodies_ahead: dict[tuple[str, str], tuple[str, bytes]] = {}

    def servers(self) -> list[str]:
        """The servers the manifest's branches are on."""
        return servers_of(self.loaded)

    def has_credentials(self, server: str) -> bool:
        """Whether the manifest's credentials for ``server`` are present (without reading them)."""
        from gitops.config.credentials import auth_available

        config = self.loaded.manifest.servers[server]
        return auth_available(config, self.options.env, cwd=self.loaded.base_dir)

    def auth(self, server: str) -> Auth:
        """The server's credentials; :class:`AuthError` naming what is missing."""
        from gitops.config.credentials import resolve_auth

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
        from gitops.edges.ledger import Ledger, lock_wait

        if server not in self._ledgers:
            config = self.loaded.manifest.servers[server]
            fingerprint = self.auth(server).fingerprint() if self.has_credentials(server) else None
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
            )
        return self._ledgers[server]

    def _ledger_path(self, server: str) -> str:
        from gitops.edges.ledger import Ledger

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
            self._clients[server] = self._new_client(server, self.ledger(server), self._early.get(server))
        return self._clients[server]

    def _new_client(
        self, server: str, observer: Observer, early: EarlyConnection | None, *, side: bool = False
    ) -> ServiceClient:
        if self._importing is not None:
            self._importing.join()  # the same imports: wait for them rather than race them
        from gitops.edges.service import ServiceClient

        config = self.loaded.manifest.servers[server]
        transport = self.options.transport
        if side and transport is not None:  # a test's transport: the main client's to close, not the side's
            from gitops.edges.http import Borrowed

            transport = Borrowed(transport)
        return ServiceClient(
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

    def connect_early(self, begun: dict[str, socket.socket] | None = None) -> None:
        """Start the TCP connection of every server that has no client yet (:mod:`gitops.edges.early`), so that its
        handshake runs while the run imports the HTTP client and opens the ledgers; its client takes it. ``begun``:
        connects begun before the fork, by server (:func:`gitops.app.localcode.begin_connections`), which those
        connections finish instead of connecting again; any not used is closed here. Not with a test's transport
        (no sockets) nor with ``--refresh=never`` (a plan that may ask nothing); a connection nobody takes is closed
        with the session."""
        begun = dict(begun or {})
        try:
            if self.options.transport is not None or self.options.refresh == "never":
                return
            self._connect_early(begun)
        finally:
            for sock in begun.values():
                sock.close()

    def _connect_early(self, begun: dict[str, socket.socket]) -> None:
        from gitops.core.early import ALPN, route_of
        from gitops.edges.early import EarlyConnection, EarlyTLS

        for server in self.servers():
            config = self.loaded.manifest.servers[server]
            route = route_of(config.url)
            if route is not None and server not in self._clients and server not in self._early:
                address = route.address
                # TLS too, with the client's context, host name and ALPN (issue 40); each side connection below
                # makes its own context, which its side client's pool then uses (one pool, one context, as before).
                tls = None
                if route.tls:
                    from gitops.edges.tls import trust_context_early

                    tls = EarlyTLS(trust_context_early, route.server_hostname, ALPN)
                self._early[server] = EarlyConnection(address, begun.pop(server, None), tls)
                if config.token_env is not None and self._first_contact(server):
                    from gitops.app.ahead import MOST, server_branches

                    # The token query and a download per branch: what a first contact asks.
                    wanted = min(MOST, 1 + len(server_branches(self.loaded, server)))
                    self._side_early[server] = [EarlyConnection(address, tls=tls) for _ in range(wanted)]

    def send_list_ahead(self) -> None:
        """Send each server's branch list on its early connection (:meth:`connect_early`) as soon as it is made, before
        the HTTP client is imported: a plan's first request to each server, whose answer then travels while the run
        starts (:mod:`gitops.edges.early`). Call it once the ledgers are open. Only where the client's own first
        request will be exactly that one: a token (a password signs in first), and a ledger under which it would not
        wait for the global limit (the client paces its requests; the one sent ahead is not paced). On an
        ``https://`` server it is written once the early TLS handshake is done, never in clear. The client counts
        the request in the ledger when it sends it; one it never claims is counted when the connection is given up
        or the session closes."""
        from gitops.core.endpoints import GLOBAL_KEY, LIST, MINUTE, pacing_wait
        from gitops.edges.early import request_head
        from gitops.edges.headers import CLIENT_HEADERS

        now = self.options.clock.now()
        pending: dict[int, list[float]] = {}  # the requests sent ahead under each ledger (two names, one ledger)
        for server, early in self._early.items():
            url = self.loaded.manifest.servers[server].url
            # https too: written only once the early TLS handshake is done (never in clear), else not at all.
            if not self.has_credentials(server):
                continue
            try:
                auth, ledger = self.auth(server), self.ledger(server)
            except GitopsError:  # its error comes when the client is made
                continue
            token = auth.persistent_token
            if token is None:
                continue
            if not self._unlimited_now(server):
                sent = pending.setdefault(id(ledger), [])
                if pacing_wait([*ledger.sent_times(GLOBAL_KEY, MINUTE), *sent], now) > 0:
                    continue
                sent.append(now)
            try:
                head = request_head(url, LIST.split(" ", 1)[1], {**CLIENT_HEADERS, "X-Token": token.reveal()})
            except UnicodeEncodeError:  # a token the client refuses to send with its own message
                continue
            early.send_ahead(head, functools.partial(ledger.record_sent, LIST))
            if self.options.log is not None:
                self.options.log(f"server '{server}': the branch list is sent ahead on the early connection")

    def lists_ahead(self, server: str) -> bool:
        """Whether the server's branch list was sent ahead on its early connection (:meth:`send_list_ahead`) and
        is still pending: planning then asks :meth:`listed_ahead` before it makes the server's client."""
        early = self._early.get(server)
        return early is not None and server not in self._clients and early.has_request_ahead

    def listed_ahead(self, server: str) -> list[BranchInfo] | None:
        """The branch list sent ahead (:meth:`send_list_ahead`), read on the early connection without the HTTP
        client (:meth:`gitops.edges.early.EarlyConnection.answer_ahead`), when its answer is a plain ``200`` whose
        JSON is a list of branches: what the client's ``list_branches`` returns, with the same effects on the ledger
        (the request counted, the rate-limit headers kept, the list remembered). A plan that needs nothing more then
        never imports the HTTP client (~60 ms of a run, issue 23).

        ``None`` for anything else (another status, an answer that is not plain, JSON that is not such a list): the
        server's client then claims the request and reads its answer, the bytes read here first, and does with it
        exactly what it always did (its errors, retries and messages). No whole answer within the client's timeout
        raises the client's own error for it (:class:`~gitops.errors.NetworkError`)."""
        if not self.lists_ahead(server):
            return None
        early = self._early[server]
        from gitops.core.endpoints import LIST, answer_cap
        from gitops.core.remote import branch_list
        from gitops.edges.headers import REQUEST_SECONDS
        from gitops.edges.jsontext import UnreadableJSON, parse_json

        started = time.monotonic()
        deadline = started + REQUEST_SECONDS  # the client's own for one request, retries included
        waiting = self.options.waiting or (lambda _what: contextlib.nullcontext(lambda _line: None))
        with waiting(f"server '{server}' to answer {LIST}"):
            answer = early.answer_ahead(deadline, answer_cap(LIST))
        if answer is None and time.monotonic() >= deadline:
            # No whole answer in the time the client gives a request: its error now, not a second wait as long.
            raise self.client(server).no_answer(LIST)
        if answer is None:
            return None
        try:
            data = parse_json(answer.body)
        except UnreadableJSON:
            return None
        branches = branch_list(data) if isinstance(data, dict) and data.get("ok") == 1 else None
        if branches is None:
            return None
        ledger = self.ledger(server)
        early.accept_answer(answer)  # counts the request in the ledger, as the client counts the requests it sends
        ledger.record_response(LIST, 200, answer.fields)
        ledger.remember_branch_list(branches)
        if self.options.log is not None:
            elapsed = (time.monotonic() - started) * 1000
            self.options.log(f"server '{server}': {LIST} -> 200 ({elapsed:.0f} ms), read on the early connection")
        return branches

    def _first_contact(self, server: str) -> bool:
        """Whether no ledger of any account exists for the server's URL: planning will ask it everything (its
        branches' code, the token's scope), which :mod:`gitops.app.ahead` sends at once."""
        from gitops.edges.ledger import Ledger

        url = self.loaded.manifest.servers[server].url
        try:
            return not Ledger.path_for(self.state_dir, url, None)[0].parent.exists()
        except OSError:  # a state folder that cannot be looked into: the ledger says so later, not this guess
            return False

    def side_client(self, server: str, observer: Observer) -> ServiceClient:
        """A second client of the server, for one read sent beside the main client's (:mod:`gitops.app.ahead`):
        same credentials and settings, its own connection (one opened early, when there is one left), and
        ``observer`` instead of the ledger. The caller closes it."""
        spare = self._side_early.get(server)
        return self._new_client(server, observer, spare.pop() if spare else None, side=True)

    def mark_queried(self, server: str) -> None:
        """The token of ``server`` was asked in this run (:meth:`learn_unlimited` does not ask again)."""
        self._queried.add(server)

    def reader(self, server: str) -> RemoteReader:
        """Read-only access to the server, for planning: a narrow wrapper that has no method that writes."""
        from gitops.edges.service import ReadOnlyClient

        return ReadOnlyClient(self.client(server))

    def writer(self, server: str) -> RemoteWriter:
        """Read and write access to the server, for applying."""
        return self.client(server)

    def compression(self, server: str) -> Literal["on", "off", "probe"]:
        """Whether uploads to ``server`` go compressed: the manifest's ``compress``, and for ``auto`` what is known
        of the server: the ledger's record (of the probe, or of an answer that said ``Accept-Encoding: deflate``),
        or a password sign-in (the npm private server with screepsmod-auth, whose body parser inflates ``deflate``
        and ``gzip`` bodies); ``probe`` when nothing is known and the ledger's branch list shows that the probe's
        branch name is free (else ``off``)."""
        from gitops.config.credentials import PasswordAuth
        from gitops.core.endpoints import PROBE_BRANCH

        mode = self.loaded.manifest.servers[server].compress
        if mode != "auto":
            return "on" if mode == "always" else "off"
        known = self.ledger(server).compression()
        if known is not None:
            return "on" if known else "off"
        if self.has_credentials(server) and isinstance(self.auth(server), PasswordAuth):
            return "on"
        listed = self.ledger(server).remembered_branch_list()
        if listed is None or any(b.name == PROBE_BRANCH for b in listed[0]):
            return "off"
        return "probe"

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

    def deflate_ahead(self) -> tuple[Callable[[list[UploadBody]], None], dict[tuple[str, str], str | None]]:
        """What the local read's worker calls with the upload bodies it has (``apply --yes``), and which bodies
        those are (:data:`gitops.app.localcode.Wanted`). The body of each branch is deflated in a background thread
        (:class:`gitops.edges.bodies.BackgroundDeflates`), the bytes that
        :meth:`gitops.edges.service.ServiceClient.upload_code` would send, so that the upload finds them ready
        instead of waiting ~50 ms for them. Only for servers whose uploads may go compressed (decided here, in
        this thread, from the manifest and the ledgers). A branch the plan does not upload has cost a background
        deflate and nothing else; the threads are joined when the session closes. Code that the ledger says the
        server holds already (a deploy that most likely changes nothing) gets no body: the rare upload it needs
        after all (the server was changed behind the tool's back) deflates its body then."""
        from gitops.edges.bodies import BackgroundDeflates
        from gitops.edges.threads import Background

        wanted: dict[tuple[str, str], str | None] = {}
        for server in self.servers():
            mode = self.loaded.manifest.servers[server].compress
            with contextlib.suppress(GitopsError):  # a server whose ledger cannot be opened: not deflated ahead
                ledger = self.ledger(server)
                if mode == "always" or (mode == "auto" and ledger.compression() is not False):
                    # compressed, or a probe or a password sign-in may say so
                    for config in self.loaded.manifest.branches:
                        if config.server == server:
                            wanted[(server, config.branch)] = ledger.remembered_digest(config.branch)
        ahead = self._deflating = BackgroundDeflates()

        def deflate(bodies: list[UploadBody]) -> None:
            from gitops.edges.bodies import deflate_ahead_body

            for body in bodies:
                content = body.content()
                self._bodies_ahead[(body.server, body.branch)] = (body.digest, content)
                deflate_ahead_body(ahead, content)
            if bodies and self._importing is None:
                # Code the ledger says the server does not hold: an upload most likely follows. Its client is made
                # after the plan, and the branch list may have been read without one (listed_ahead): the client's
                # modules are imported now, in a thread of their own (this one hands the local read its bodies),
                # beside the unpickling and the plan, rather than all after them (~80 ms before the upload).
                self._importing = Background(import_client, name="gitops-import-client")

        return deflate, wanted

    def body_ahead(self, server: str, branch: str, digest: str | None) -> bytes | None:
        """The JSON of the upload body of ``branch`` that :meth:`deflate_ahead` was given, when it uploads code of
        ``digest`` (:attr:`gitops.core.plan.BranchPlan.upload_digest`): equal digests, equal modules, and so the
        same bytes as the client would encode (:func:`gitops.core.codeset.upload_body`); ``None`` otherwise."""
        held = self._bodies_ahead.get((server, branch))
        return held[1] if held is not None and digest is not None and held[0] == digest else None

    def learn_unlimited(self, server: str) -> bool:
        """Ask the server (once per run) whether the token is unlimited now: the person may have pressed Proceed on
        the no-rate-limit page since the ledger last looked. The token query is not rate limited; it is skipped
        with --refresh=never (no request at all) and for password logins (private servers have no limits)."""
        from gitops.config.credentials import TokenAuth

        if self.options.refresh == "never" or server in self._queried:
            return self._unlimited_now(server)
        self._queried.add(server)
        if not self.has_credentials(server) or not isinstance(self.auth(server), TokenAuth):
            return False
        try:
            self.client(server).query_token()
        except GitopsError as exc:  # an old server without the token query: the ledger's view stands
            if self.options.log is not None:
                self.options.log(f"token query on server '{server}' failed: {exc.message}")
        self.save(server)
        return self._unlimited_now(server)

    def scope(self, server: str) -> tuple[bool, frozenset[str]] | None:
        """What the server's token may use: full access, or these endpoint keys; ``None`` when there is nothing to
        know (a password login: private servers have no scopes) or it could not be learnt. From the ledger when it
        learnt it within a day, else from the token query (no rate limit)."""
        from gitops.config.credentials import TokenAuth

        if not self.has_credentials(server) or not isinstance(self.auth(server), TokenAuth):
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

    def _unlimited_now(self, server: str) -> bool:
        until = self.ledger(server).unlimited_until
        return until is not None and until > self.options.clock.now()

    def budget_facts(self, server: str) -> BudgetFacts:
        """What the ledger knows of the server's token, for the budget (a password login spends no budget)."""
        from gitops.config.credentials import PasswordAuth

        ledger = self.ledger(server)
        # Only token-authenticated requests are rate limited: a password login spends no budget.
        limited = not (self.has_credentials(server) and isinstance(self.auth(server), PasswordAuth))
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
        """Save what was learnt (durably) and close the clients."""
        for early in self._early.values():
            early.settle()  # a branch list sent ahead that no request claimed is counted before the save
        try:
            self._save(durable=True)
        finally:
            if self._deflating is not None:
                self._deflating.join()
            if self._importing is not None:
                self._importing.join()
            for client in self._clients.values():
                client.close()
            self._clients.clear()
            for early in [*self._early.values(), *(e for side in self._side_early.values() for e in side)]:
                early.close()
            for ledger in self._distinct_ledgers():
                ledger.close()


def import_client() -> None:
    """Import what making a client imports (~80 ms): its module (and httpx), and httpcore, which httpx's transport
    imports only when it is made. Called ahead of a client that will most likely be made, beside a wait."""
    importlib.import_module("gitops.edges.service")
    importlib.import_module("httpcore")
    importlib.import_module("httpcore._backends.sync")  # the early connection's backend (gitops.edges.early)


@contextmanager
def open_session(options: Options, loaded: LoadedManifest | None = None) -> Iterator[Session]:
    """A :class:`Session` for the manifest (loaded here unless given), narrowed to ``options.targets``
    (:func:`gitops.app.targets.select`: the session never sees, reads or contacts anything else), closed (and
    saved) when the block ends."""
    from gitops.app.targets import select

    s = Session(select(loaded or load_manifest(options.manifest), options.targets), options)
    try:
        yield s
    finally:
        s.close()


def servers_of(loaded: LoadedManifest) -> list[str]:
    """The servers the manifest's branches are on, sorted."""
    return sorted({b.server for b in loaded.manifest.branches})
