"""The head start of one plan: everything that lets the network and the other cores work while the tool starts.

A plan's own order is fixed: read the local code, list each server's branches, download what the ledger cannot
vouch for, build the plan. On an internet path most of a no-op plan is waiting: for imports, for the ledgers, for
the servers' round trips. :class:`HeadStart` fills that wait without changing what is asked or decided: the
servers' connections are opened early, the branch list is written on them at once and, when its answer is plain,
read without the HTTP client; a first contact's other reads go ahead on side connections; the local code is read
by a forked child; with ``apply --yes`` the upload bodies are deflated beside the wait. ``make_plan`` makes one or
plans without it (slower, the same plan). It attaches to the session, which hands its connections to the clients
and closes it.
"""

from __future__ import annotations

import contextlib
import functools
import socket
import time
from collections.abc import Callable

from gitops.app.headstart.localread import LocalRead, UploadBody
from gitops.app.headstart.sidereads import DownloadCheck, SideReads, send_side_reads, server_branches
from gitops.app.session import Session, http_client
from gitops.core.compression import may_compress
from gitops.core.early import ALPN, early_route, side_connections
from gitops.core.endpoints import GLOBAL_KEY, LIST, MINUTE, answer_cap, path_of
from gitops.core.remote import BranchInfo
from gitops.core.sending import sends_list_ahead
from gitops.edges import headers
from gitops.edges.bodies import BackgroundDeflates, deflate_ahead_body
from gitops.edges.early import Ahead, EarlyConnection, EarlyTLS
from gitops.edges.jsontext import UnreadableJSON, parse_json
from gitops.edges.ledger import Ledger
from gitops.edges.service.outgoing import Outgoing
from gitops.edges.threads import Background
from gitops.edges.tls import trust_context_early
from gitops.errors import GitopsError

#: What a head start's local read calls with the upload bodies it made, and which bodies those are.
Deflate = Callable[[list[UploadBody]], None]


def import_client() -> None:
    """Import what making a client imports (the HTTP client's modules), ahead of a client that will most likely be
    made, beside a wait."""
    http_client()


class HeadStart:
    """The fast start of one session's plan: its local read, early connections, lists and reads sent ahead, bodies
    deflated ahead. Attached to ``session`` (closed with it); ``reading`` is the local read the command began as
    soon as the manifest was loaded (:func:`gitops.app.headstart.localread.read_ahead`), else one begins when the
    plan asks for it (:attr:`reading`)."""

    def __init__(self, session: Session, reading: LocalRead | None = None) -> None:
        self.session = session
        self._reading = reading
        self._early: dict[str, Ahead] = {}
        #: Connections opened early for the reads a fresh ledger's server will be asked ahead (sidereads).
        self._side_early: dict[str, list[EarlyConnection]] = {}
        #: What made each branch list sent ahead (the requests of its server, as its client makes them).
        self._outgoing: dict[str, Outgoing] = {}
        #: The compression probes sent while the servers were read, and what each answered.
        self.probed: dict[str, bool | None] = {}
        self._deflating: BackgroundDeflates | None = None
        #: The HTTP client's modules being imported ahead of an upload, joined before a client is made.
        self._importing: Background[None] | None = None
        #: The upload bodies the local read made ahead, by (server, branch): the code's digest and the body's JSON.
        self._bodies_ahead: dict[tuple[str, str], tuple[str, bytes]] = {}
        session.attach(self)

    @property
    def reading(self) -> LocalRead:
        """The local read: the command's, or one begun now for the session's manifest."""
        if self._reading is None:
            options = self.session.options
            self._reading = LocalRead(self.session.loaded, options.ref, options.env, bodies=options.unattended_apply)
        return self._reading

    # --- the connections: opened early, the branch list sent on them ------------------------------------------

    def connect(self, begun: dict[str, socket.socket] | None = None) -> None:
        """Start the TCP (and TLS) connection of every server that has no client yet, so that its handshakes run
        while the run imports the HTTP client and opens the ledgers; its client takes it. Connects begun before the
        fork (``begun``, else the local read's: :func:`gitops.app.headstart.localread.begin_connections`) are finished
        instead of made again; any not used is closed here. Not with ``--refresh=never`` (a plan that may ask
        nothing: :func:`gitops.core.early.early_route`). With a test's transport there are no sockets: the branch list
        is sent ahead through it (:class:`gitops.edges.service.transport.TransportAhead`), in front of the client."""
        if begun is None:
            begun = self._reading.take_connections() if self._reading is not None else {}
        begun = dict(begun)
        try:
            for server in self.session.servers():
                self._connect_server(server, begun)
        finally:
            for sock in begun.values():
                sock.close()

    def _connect_server(self, server: str, begun: dict[str, socket.socket]) -> None:
        session = self.session
        config = session.loaded.manifest.servers[server]
        route = early_route(config.url, session.options.refresh)
        if route is None or session.has_client(server) or server in self._early:
            return
        transport = session.options.transport
        if transport is not None:  # a test's: the one seam, through which the list goes ahead as any request
            self._early[server] = http_client().transport_ahead(transport, config.url)
            return
        address = route.address
        # TLS too, with the client's context, host name and ALPN; each side connection below makes its own
        # context, which its side client's pool then uses (one pool, one context).
        tls = EarlyTLS(trust_context_early, route.server_hostname, ALPN) if route.tls else None
        sock = begun.pop(server, None)
        self._early[server] = EarlyConnection(address, sock, tls)
        wanted = side_connections(
            refresh=session.options.refresh,
            rate_limited=self._rate_limited(server),
            first_contact=self._first_contact(server),
            branches=len(server_branches(session.loaded, server)),
        )
        if wanted:
            self._side_early[server] = [EarlyConnection(address, tls=tls) for _ in range(wanted)]

    def _rate_limited(self, server: str) -> bool:
        """Whether the server's login is rate limited (a token, from the environment or a credentials file): what
        the side reads are sent for (:func:`gitops.core.early.reads_ahead`). ``False`` when it has none, or they
        cannot be read (their error comes when the client is made)."""
        try:
            login = self.session.login(server)
        except GitopsError:
            return False
        return login is not None and login.rate_limited

    def _first_contact(self, server: str) -> bool:
        """Whether no ledger of any account exists for the server's URL: planning will ask it everything (its
        branches' code, the token's scope), which the side reads send at once."""
        url = self.session.loaded.manifest.servers[server].url
        try:
            return not Ledger.path_for(self.session.state_dir, url, None)[0].parent.exists()
        except OSError:  # a state folder that cannot be looked into: the ledger says so later, not this guess
            return False

    def send_lists(self) -> None:
        """Send each server's branch list on its early connection as soon as it is made, before the HTTP client is
        imported, made by the code that makes every request (:class:`~gitops.edges.service.outgoing.Outgoing`). Call
        it once the ledgers are open, and not before a build (no request leaves before it). Only where the client's
        own first request will be exactly that one (:func:`gitops.core.sending.sends_list_ahead`). The client counts
        the request when it claims it; one it never claims is counted when the session closes."""
        session = self.session
        now = session.options.clock.now()
        pending: dict[int, list[float]] = {}  # the requests sent ahead under each ledger (two names, one ledger)
        for server, early in self._early.items():
            made = self._list_request(server, now, pending)
            if made is None:
                continue
            head, out = made
            self._outgoing[server] = out
            early.send_ahead(head, functools.partial(out.count, LIST))
            if session.options.log is not None:
                session.options.log(f"server '{server}': the branch list is sent ahead on the early connection")

    def _list_request(self, server: str, now: float, pending: dict[int, list[float]]) -> tuple[bytes, Outgoing] | None:
        """The bytes of the server's branch list request to send ahead, and what made them; ``None`` when none is
        sent."""
        session = self.session
        if not session.has_credentials(server):
            return None
        try:
            out = session.outgoing(server)
        except GitopsError:  # its error comes when the client is made
            return None
        ledger = out.observer
        sent = pending.setdefault(id(ledger), [])
        if not sends_list_ahead(
            token=out.login is not None and out.login.persistent_token is not None,
            unlimited_until=ledger.unlimited_until,
            sent=[*ledger.sent_times(GLOBAL_KEY, MINUTE), *sent],
            now=now,
        ):
            return None
        try:
            head = out.head(path_of(LIST))
        except UnicodeEncodeError:  # a token the client refuses to send with its own message
            return None
        sent.append(now)
        return head, out

    def lists_ahead(self, server: str) -> bool:
        """Whether the server's branch list was sent ahead and is still pending: planning then asks
        :meth:`listed_ahead` before it makes the server's client."""
        early = self._early.get(server)
        return early is not None and not self.session.has_client(server) and early.has_request_ahead

    def listed_ahead(self, server: str) -> list[BranchInfo] | None:
        """The branch list sent ahead, read on the early connection without the HTTP client, when its answer is a
        plain ``200`` whose JSON is a list of branches: what the client's ``list_branches`` returns, with the same
        effects on the ledger (the request counted, the rate-limit headers kept, the list remembered).

        ``None`` for anything else: the server's client then claims the request and reads its answer from its first
        byte, and does with it exactly what it always did. No whole answer within the client's timeout raises the
        client's own error for it (:class:`~gitops.errors.NetworkError`)."""
        if not self.lists_ahead(server):
            return None
        session = self.session
        early = self._early[server]
        started = time.monotonic()
        deadline = started + headers.REQUEST_SECONDS  # the client's own for one request, retries included
        waiting = session.options.waiting or (lambda _what: contextlib.nullcontext(lambda _line: None))
        with waiting(f"server '{server}' to answer {LIST}"):
            answer = early.answer_ahead(deadline, answer_cap(LIST))
        if answer is None and time.monotonic() >= deadline:
            # No whole answer in the time the client gives a request: its error now, not a second wait as long.
            raise session.client(server).no_answer(LIST)
        if answer is None:
            return None
        try:
            data = parse_json(answer.body)
        except UnreadableJSON:
            return None
        out = self._outgoing[server]
        branches = out.listed(data)  # remembered as the client's list_branches does; None: the client's to read
        if branches is None:
            return None
        early.accept_answer(answer)  # counted, as the client counts the requests it sends
        out.answered(LIST, answer)
        if session.options.log is not None:
            elapsed = (time.monotonic() - started) * 1000
            session.options.log(f"server '{server}': {LIST} -> 200 ({elapsed:.0f} ms), read on the early connection")
        return branches

    # --- the imports: the HTTP client only when a request will need it -----------------------------------------

    def import_client_when_needed(self) -> None:
        """Import the HTTP client now, unless every server's branch list was sent ahead: then only once the local
        read sees a file changed since the code was last found on the servers (an upload most likely follows), at
        once if it has, else in a thread that waits for it to. A plan that finds nothing changed never imports
        it."""
        session = self.session
        if not all(self.lists_ahead(server) for server in session.servers()):
            import_client()
            return
        self.reading.when_changes_seen(import_client)

    # --- the side reads of a first contact ---------------------------------------------------------------------

    def side_reads(self, server: str) -> SideReads:
        """An empty set of side reads of ``server`` (for the compression probe), on its spare early connections."""
        return SideReads(self.session, server, self._side_early.get(server), self.probed)

    def send_side_reads(self, server: str, check_downloads: DownloadCheck) -> SideReads | None:
        """Send what planning ``server`` will ask anyway (a first contact's token query and downloads) on side
        connections; ``None`` when there is nothing to send."""
        return send_side_reads(self.session, server, check_downloads, self._side_early.get(server), self.probed)

    # --- the upload bodies of apply --yes -----------------------------------------------------------------------

    def deflate_ahead(self) -> tuple[Deflate, dict[tuple[str, str], str | None]]:
        """What the local read's worker calls with the upload bodies it has (``apply --yes``), and which bodies
        those are. Each is deflated in a background thread, the bytes the client's upload would send, so that the
        upload finds them ready. Only for servers whose uploads may go compressed, and not for code the ledger says
        the server holds already (a deploy that most likely changes nothing)."""
        session = self.session
        wanted: dict[tuple[str, str], str | None] = {}
        for server in session.servers():
            mode = session.loaded.manifest.servers[server].compress
            with contextlib.suppress(GitopsError):  # a server whose ledger cannot be opened: not deflated ahead
                ledger, login = session.ledger(server), session.login(server)
                if may_compress(mode, ledger.compression(), signs_in=login is not None and login.signs_in):
                    for config in session.loaded.manifest.branches:
                        if config.server == server:
                            wanted[(server, config.branch)] = ledger.remembered_digest(config.branch)
        ahead = self._deflating = BackgroundDeflates()

        def deflate(bodies: list[UploadBody]) -> None:
            for body in bodies:
                content = body.content()
                self._bodies_ahead[(body.server, body.branch)] = (body.digest, content)
                deflate_ahead_body(ahead, content)
            if bodies and self._importing is None:
                # Code the ledger says the server does not hold: an upload most likely follows, and its client is
                # made after the plan. Its modules are imported now, in a thread of their own, beside the plan.
                self._importing = Background(import_client, name="gitops-import-client")

        return deflate, wanted

    # --- what the session asks of it (gitops.app.session.Attached) ---------------------------------------------

    def connection(self, server: str) -> Ahead | None:
        """The early connection the server's client takes."""
        return self._early.get(server)

    def before_client(self) -> None:
        """The client's imports under way: waited for rather than raced."""
        if self._importing is not None:
            self._importing.join()

    def body_ahead(self, server: str, branch: str, digest: str | None) -> bytes | None:
        """The JSON of the upload body of ``branch`` that :meth:`deflate_ahead` was given, when it uploads code of
        ``digest``: equal digests, equal modules, and so the same bytes as the client would encode; else ``None``."""
        held = self._bodies_ahead.get((server, branch))
        return held[1] if held is not None and digest is not None and held[0] == digest else None

    def settle(self) -> None:
        """Count a branch list sent ahead that no request claimed (before the session's last save)."""
        for early in self._early.values():
            early.settle()

    def join(self) -> None:
        """Wait for the deflates and the imports under way."""
        if self._deflating is not None:
            self._deflating.join()
        if self._importing is not None:
            self._importing.join()

    def close(self) -> None:
        """Close every early connection no client took."""
        for early in [*self._early.values(), *(e for side in self._side_early.values() for e in side)]:
            early.close()
