"""The one client of the game service: every request to a server goes through :class:`ServiceClient`.

It owns what every request needs, so that no other module has to think about it (and nothing else imports httpx
for the service). This module holds the service's operations (list, download, upload, clone, activate, the
compression probe, the token query) and what each teaches the observer; each of their requests goes through one
path, start to finish (:class:`gitops.edges.service.exchange.Exchange`), made by the code that also writes the
branch list the head start sends ahead (:class:`gitops.edges.service.outgoing.Outgoing`). The rest of what a request
needs has a module of its own in this package, which :mod:`gitops.edges.service` lists. The client never writes a
file: saving what was learnt is the session's job, once per logical step.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from gitops.config.credentials import Auth
from gitops.config.manifest import ActiveName
from gitops.core.codeset import CodeSet, WireModule
from gitops.core.endpoints import (
    ACTIVATE,
    CLONE,
    DOWNLOAD,
    LIST,
    PROBE_BRANCH,
    QUERY_TOKEN,
    path_of,
)
from gitops.core.remote import BranchInfo, RemoteBranch, normal_stamp
from gitops.core.tokens import TokenInfo, token_info
from gitops.edges.bodies import BackgroundDeflates, deflate_ahead_body
from gitops.edges.clock import Clock, SystemClock, Waiting
from gitops.edges.early import Ahead
from gitops.edges.headers import REQUEST_SECONDS
from gitops.edges.service.exchange import Exchange
from gitops.edges.service.failures import (
    ServerAnswerError,
    sanitize_url,
)
from gitops.edges.service.inflight import in_flight
from gitops.edges.service.observer import Observer, Unobserved
from gitops.edges.service.requestbodies import (
    Encoded,
    branch_written,
    clone_body,
    upload_body,
    write_json,
)
from gitops.edges.threads import Background
from gitops.errors import AuthError, NetworkError, RateLimitedError, ServiceError
from gitops.secrets import Secret

__all__ = ["ReadOnlyClient", "ServiceClient"]

_CODE = path_of(DOWNLOAD)


class ServiceClient:
    """Every request to one server account; implements :class:`gitops.core.remote.RemoteWriter`.

    ``url`` is the server's base address, with any path prefix (``https://screeps.com/ptr``). ``auth`` ``None``
    sends no credentials (only useful against endpoints that need none). ``observer`` (a
    :class:`gitops.edges.ledger.Ledger`, say) is told of every request sent, the rate-limit headers and what is
    learnt of branches and of the token; the client never saves it. ``on_wait(seconds,
    endpoint)`` is called before a rate-limit wait (``endpoint`` is ``"global"`` when pacing under the global
    limit); ``log`` receives one redacted line per request in debug mode. ``transport`` is the test seam.
    ``timeout`` (seconds) bounds each request as a whole, retries included; tests lower it. ``early``: a TCP
    connection to the server already being opened (:mod:`gitops.edges.early`), which the first connection takes.
    """

    def __init__(
        self,
        *,
        server_name: str,
        url: str,
        auth: Auth | None,
        observer: Observer | None = None,
        clock: Clock | None = None,
        transport: httpx.BaseTransport | None = None,
        max_wait: float = 60.0,
        on_wait: Callable[[float, str], None] | None = None,
        log: Callable[[str], None] | None = None,
        timeout: float = REQUEST_SECONDS,
        waiting: Waiting | None = None,
        early: Ahead | None = None,
    ) -> None:
        self.server_name = server_name
        self.base_url = url.strip().rstrip("/")
        if not re.match(r"^https?://[^/\s]+", self.base_url):
            raise ServiceError(
                f"server '{server_name}' has url '{sanitize_url(self.base_url)}', which is not an http(s) address.",
                hint="Set servers."
                + server_name
                + ".url in the manifest to the server's base address, e.g. https://screeps.com or "
                "http://127.0.0.1:21025.",
            )
        self._clock: Clock = clock or SystemClock()
        self._observer: Observer = observer if observer is not None else Unobserved(self._clock)
        #: Every request goes through it, start to finish (the one HTTP path).
        self._x = Exchange(
            server_name=server_name,
            base_url=self.base_url,
            auth=auth,
            observer=self._observer,
            clock=self._clock,
            transport=transport,
            max_wait=max_wait,
            on_wait=on_wait,
            log=log,
            timeout=timeout,
            waiting=waiting,
            early=early,
        )
        self._fail = self._x.fail
        self._http = self._x.http  # the tests' view of the transport
        self._connections = self._x.connections
        #: Send uploads (and clones that carry modules) compressed; the session sets it from the manifest's
        #: ``compress`` and what the server is known to take (``gitops.app.session.Session.writer``).
        self.compress = False
        self._ahead = BackgroundDeflates()
        #: The bodies prepare_write encoded, by branch and kind (clone or not), each for the write of those very
        #: modules (by identity) that follows it.
        self._prepared: dict[tuple[str, bool], tuple[Mapping[str, WireModule], bytes]] = {}

    # --- lifecycle -------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection pool (after any body still being deflated ahead of time), and the connection opened
        early for it if no request ever took it (a read sent ahead that never went out)."""
        self._ahead.join()
        self._x.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the service's operations ----------------------------------------------------------------------------

    def list_branches(self) -> list[BranchInfo]:
        """All branches of the account with their active flags (``GET /api/user/branches``)."""
        branches = self._x.out.listed(self._x.call("GET", path_of(LIST)))
        if branches is None:
            raise self._fail.shape_error(LIST, "'list' is not a list of branches")
        return branches

    def get_code(self, branch: str) -> CodeSet | None:
        """The modules of ``branch``, or ``None`` when the server says the branch does not exist."""
        endpoint = DOWNLOAD
        now = self._clock.now()
        try:
            data = self._x.call("GET", _CODE, params={"branch": branch})
        except ServerAnswerError as exc:
            if exc.server_message.strip().lower() != "no code":
                raise
            if not branch.startswith("$"):
                self._observer.remember_branch(RemoteBranch.missing(branch, now))
            return None
        try:
            code = CodeSet.from_wire(data.get("modules"))
        except ValueError as exc:
            raise self._fail.shape_error(endpoint, str(exc)) from None
        # '$activeWorld' names whichever branch is active; the answer says which one that is.
        name = data.get("branch") if branch.startswith("$") else branch
        if isinstance(name, str) and not name.startswith("$"):
            self._observer.remember_branch(RemoteBranch.from_code(name, code, now, "download"))
        return code

    def upload_code(self, branch: str, modules: Mapping[str, WireModule], *, resend_if_lost: bool = True) -> None:
        """Replace every module of ``branch`` (``POST /api/user/code``); the branch must exist.

        When the outcome is unknown (the connection dropped, a timeout, a 5xx, an answer that cannot be read, or
        any other failure) the server may have committed the upload: what the tool knew of the branch is dropped,
        so the next plan learns it from the server instead of from a record the upload may have made false.

        ``resend_if_lost=False``: an upload that may have reached the server is not sent again (only one that never
        found a connection is). The server counts every upload it receives, committed or not, so a resend after a
        lost answer spends a second upload of the day's 240: apply asks for this when the plan reserved an upload
        for a rollback on the server, which a resend would otherwise spend (see
        :func:`gitops.core.apply.apply_plan`).
        """
        # The record of what the branch will hold is made while the upload is on its way.
        written: Background[RemoteBranch | None] = Background(lambda: branch_written(branch, modules))
        body = self._take_prepared(branch, modules, clone=False) or upload_body(branch, modules)
        try:
            with in_flight(f"the upload to {self.server_name}/{branch}"):
                data = self._x.call("POST", _CODE, body=body, compress=self.compress, resend=resend_if_lost)
        except BaseException:
            written.join()
            self._observer.forget_branch(branch)
            raise
        self._remember_written(branch, written, data)

    def prepare_write(
        self, branch: str, modules: Mapping[str, WireModule], *, clone: bool = False, content: bytes | None = None
    ) -> None:
        """Start deflating, in a background thread, the body that :meth:`upload_code` (or with ``clone``,
        :meth:`clone_branch` creating the branch with these modules) will send, so that the work runs while the run
        waits for something else (the compression probe's answer); nothing is sent. Pointless, and so skipped, for a
        body below :data:`COMPRESS_MIN_BYTES` (sent as it is).

        The body's JSON is kept for the next write of ``branch``: when that write is given the very same
        ``modules`` object (unchanged: the caller's, read-only), it sends these bytes instead of encoding the ~5 MB
        again. ``content`` is that JSON when the caller has it already (the upload body the local read made, for
        code of the same digest: :func:`gitops.core.codeset.upload_body`, byte for byte)."""
        if content is None:
            content = write_json(branch, modules, clone=clone)
        self._prepared[(branch, clone)] = (modules, content)
        deflate_ahead_body(self._ahead, content)

    def _take_prepared(self, branch: str, modules: Mapping[str, WireModule], *, clone: bool) -> Encoded | None:
        """The body :meth:`prepare_write` encoded for this write (the same branch, kind and ``modules`` object);
        ``None`` otherwise. Taken once."""
        prepared = self._prepared.pop((branch, clone), None)
        if prepared is None or prepared[0] is not modules:
            return None
        return Encoded(prepared[1])

    def clone_branch(
        self, new_name: str, source: str | None = None, modules: Mapping[str, WireModule] | None = None
    ) -> None:
        """Create ``new_name`` (``POST /api/user/clone-branch``) from ``source``, or holding ``modules``
        (``defaultModules``, as rollup-plugin-screeps creates branches: no upload is needed after it), or with the
        server's default modules when neither is given."""
        body = clone_body(new_name, source, modules)
        prepared = (
            self._take_prepared(new_name, modules, clone=True) if modules is not None and source is None else None
        )
        written: Background[RemoteBranch | None] = Background(
            lambda: None if modules is None else branch_written(new_name, modules)
        )
        try:
            with in_flight(f"the creation of {self.server_name}/{new_name}"):
                data = self._x.call("POST", path_of(CLONE), body=prepared or body, compress=self.compress)
        except BaseException:
            written.join()
            self._observer.forget_branch(new_name)
            raise
        self._observer.remember_clone(new_name)
        if "defaultModules" in body and modules is not None:
            self._remember_written(new_name, written, data)
        else:
            written.join()

    def _remember_written(self, branch: str, written: Background[RemoteBranch | None], data: Mapping[str, Any]) -> None:
        """What the branch holds after this tool wrote ``written``'s modules to it, stamped now and with the
        server's new stamp."""
        try:
            made = written.result()
        except ValueError:
            made = None
        if made is None:
            self._observer.forget_branch(branch)
        else:
            stamp = normal_stamp(data.get("timestamp"))
            self._observer.remember_branch(dataclasses.replace(made, learnt_at=self._clock.now(), stamp=stamp))

    def set_active_branch(self, branch: str, which: ActiveName) -> None:
        """Make ``branch`` the active branch for the world or the simulation (``POST
        /api/user/set-active-branch``)."""
        active_name = "activeWorld" if which == "world" else "activeSim"
        with in_flight(f"the activation of {self.server_name}/{branch}"):
            self._x.call("POST", path_of(ACTIVATE), body={"branch": branch, "activeName": active_name})
        self._observer.remember_activation(branch, which)

    def probe_compression(self) -> bool | None:
        """Whether the server reads a compressed request body, learnt without changing anything: a deflated
        ``set-active-branch`` of :data:`PROBE_BRANCH`, a branch that does not exist. A server that inflated the body
        answers ``no branch``; one that could not read it answers 400 or 415, or misses the fields (``invalid
        params``): either way nothing is activated or written. ``None`` when the answer tells nothing (the token
        may not use the endpoint, the server failed): no compression then, and the next run asks again. It costs one
        ``POST /api/user/set-active-branch`` (240 a day, apart from the uploads), which the plan counts."""
        body = {"branch": PROBE_BRANCH, "activeName": "activeWorld"}
        try:
            self._x.call("POST", path_of(ACTIVATE), body=body, compress=True, force=True)
        except ServerAnswerError as exc:
            return exc.server_message.strip().lower() == "no branch"
        except (AuthError, RateLimitedError, NetworkError):
            return None
        except ServiceError:
            return False  # 400, 415 or another answer to a body it did not read
        # Activated a branch of that name: the server read the body (and the branch existed after all).
        return True

    def query_token(self) -> TokenInfo:
        """The token's scope and unlimited period (``GET /api/auth/query-token``); official servers only.

        The token goes in the URL's query (``?token=``): the interface document gives the endpoint no other form
        (section 4.2; ``X-Token`` authenticates a request, it does not name the token to describe). So the URL is
        never shown whole: every debug line goes through :func:`sanitize_url`, httpx's log through the redacting
        filter, and errors are worded without the request (``tests/edges/service/test_query_token.py``)."""
        token = self._persistent_token("The token query")
        data = self._x.call("GET", path_of(QUERY_TOKEN), params={"token": token.reveal()})
        info = token_info(data, self._clock.now())
        self._observer.set_unlimited_until(info.unlimited_until)
        remember = getattr(self._observer, "remember_scope", None)
        if remember is not None:
            remember(info.full, info.endpoints)
        return info

    def server_version(self) -> dict[str, Any]:
        """The server's ``GET /api/version`` answer (no limit of its own; the global one on the official server):
        what it is (the stand-in says ``standin: true``) and whether it runs code."""
        return self._x.call("GET", "/api/version")

    def socket_login(self) -> tuple[str, Secret]:
        """The account's user id (``GET /api/auth/me``, counted against the global limit only) and the token that
        the game socket's ``auth`` takes: the persistent token, or on a private server the sign-in's token."""
        data = self._x.call("GET", "/api/auth/me")
        user_id = data.get("_id")
        if not isinstance(user_id, str) or not re.match(r"^[A-Za-z0-9_-]{1,64}$", user_id):
            raise self._fail.shape_error("GET /api/auth/me", "'_id' is missing or not an id")
        token = self._x.login.socket_token() if self._x.login is not None else None
        if token is None:
            raise self._fail.no_socket_token()
        return user_id, token

    def read(self, endpoint: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        """One read-only request to ``endpoint`` (a ``"GET /path"`` key) and its answer's object (``ok: 1``): the
        colony copy's reads (:mod:`gitops.edges.service.colonyread`), paced, counted and retried as every request."""
        if not endpoint.startswith("GET "):
            raise ValueError(f"read() only sends GET requests, not {endpoint}")
        return self._x.call("GET", path_of(endpoint), params=params)

    def no_rate_limit_url(self) -> Secret:
        """The no-rate-limit page for the token; a :class:`Secret` because the link carries the token."""
        token = self._persistent_token("The no-rate-limit page")
        # Not registered itself: the token inside is, so redact() shows the link with 'token=<hidden>'.
        return Secret(f"{self.base_url}/a/#!/account/auth-tokens/noratelimit?token={token.reveal()}", scrub=False)

    def _persistent_token(self, what: str) -> Secret:
        token = self._x.login.persistent_token if self._x.login is not None else None
        if token is None:
            raise self._x.fail.not_a_token(what)
        return token

    def no_answer(self, endpoint: str) -> NetworkError:
        """The error of a request to ``endpoint`` that had no whole answer within this client's timeout: what
        the head start's ``listed_ahead`` raises when the branch list sent ahead was waited for that
        long without the client (which would otherwise wait as long again)."""
        return self._x.no_answer(endpoint)


class ReadOnlyClient:
    """The reading half of a :class:`ServiceClient`, what planning gets (:class:`gitops.core.remote.RemoteReader`).

    It has no method that writes, so code typed against it cannot upload, clone or activate (mypy checks it).
    """

    def __init__(self, client: ServiceClient) -> None:
        self._client = client

    @property
    def server_name(self) -> str:
        return self._client.server_name

    def list_branches(self) -> list[BranchInfo]:
        """All branches of the account with their active flags."""
        return self._client.list_branches()

    def get_code(self, branch: str) -> CodeSet | None:
        """The modules of ``branch``, or ``None`` when the branch does not exist."""
        return self._client.get_code(branch)
