"""What every request to one server account is before it reaches the wire, and what its answer teaches.

The one place for a request's headers (the tool's own and the login's), its pacing under the global limit, its
count in the ledger, and an answer's effects (the login's rotated token, the rate-limit headers, the branch list).
No httpx here: the game client (:class:`gitops.edges.service.client.ServiceClient`) sends each of its requests
through an :class:`Outgoing`, and the head start (:class:`gitops.app.headstart.start.HeadStart`) writes a server's
branch list with one on the early connection before httpx is imported (:meth:`Outgoing.head`), and takes its answer
with the same effects (:meth:`Outgoing.answered`, :meth:`Outgoing.listed`). Both make it with :meth:`Outgoing.of`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gitops.config.credentials import Auth
from gitops.core.endpoints import SIGNIN, path_of
from gitops.core.remote import BranchInfo, branch_list
from gitops.edges.clock import Clock
from gitops.edges.early import request_head
from gitops.edges.headers import request_headers
from gitops.edges.service.auth import Login, PasswordLogin, SignIn, login_for
from gitops.edges.service.observer import Observer
from gitops.edges.service.ratelimits import Answer, RateLimits
from gitops.secrets import redact

__all__ = ["Outgoing"]

_SIGNIN = path_of(SIGNIN)


def _no_sign_in(login: PasswordLogin) -> None:
    """The sign-in of an :class:`Outgoing` made without a client: a request of its own, which only a client sends."""
    raise RuntimeError(f"a sign-in ({login.source}) is sent by a client, not ahead of one")


class Outgoing:
    """The requests of one server account before the wire: ``login`` (``None``: no credentials), ``limits`` (pacing
    and 429s), ``observer`` (the ledger, told of each request and answer)."""

    def __init__(self, *, base_url: str, login: Login | None, observer: Observer, limits: RateLimits) -> None:
        self.base_url = base_url
        self.login = login
        self.observer = observer
        self.limits = limits

    @classmethod
    def of(
        cls,
        *,
        server_name: str,
        url: str,
        auth: Auth | None,
        observer: Observer,
        clock: Clock,
        max_wait: float,
        on_wait: Callable[[float, str], None] | None,
        log: Callable[[str], None] | None,
        sign_in: SignIn = _no_sign_in,
    ) -> Outgoing:
        """The requests of the account ``auth`` logs in to on the server at ``url``; ``sign_in`` sends a password
        login's sign-in (the client's own request). Raises :class:`~gitops.errors.AuthError` for credentials of a
        kind no login signs in with."""
        login = login_for(auth, sign_in=sign_in)

        def debug(line: str) -> None:
            if log is not None:
                log(redact(line))

        limits = RateLimits(
            server_name=server_name,
            clock=clock,
            observer=observer,
            max_wait=max_wait,
            on_wait=on_wait,
            debug=debug,
            paced=login is not None and login.paced,
        )
        return cls(base_url=url.strip().rstrip("/"), login=login, observer=observer, limits=limits)

    # --- the request -----------------------------------------------------------------------------------------

    def headers(self, path: str) -> dict[str, str]:
        """The headers of a request to ``path`` (all but ``Host``): every request's, and the login's (signing in
        first when that is needed); none of the login's on the sign-in itself."""
        login = self.login
        return request_headers({} if login is None or path == _SIGNIN else login.headers())

    def head(self, path: str) -> bytes:
        """The bytes of a ``GET`` of ``path`` as the HTTP client writes them (:func:`gitops.edges.early.request_head`),
        for the early connection. Raises ``UnicodeEncodeError`` for a header the client would refuse to send."""
        return request_head(self.base_url, path, self.headers(path))

    def pace_and_count(self, endpoint: str) -> None:
        """Wait, if needed, under the global limit; then count the request as sent (before it is: a budget errs on
        the safe side)."""
        self.limits.pace()
        self.count(endpoint)

    def count(self, endpoint: str) -> None:
        """Count a request to ``endpoint`` as sent (one the head start wrote, once it is settled)."""
        self.observer.record_sent(endpoint)

    # --- its answer ------------------------------------------------------------------------------------------

    def answered(self, endpoint: str, answer: Answer) -> None:
        """What any answer teaches: the login (a rotated session token) and the ledger (the rate-limit headers; a
        429 without any, its window as spent until its wait is over)."""
        if self.login is not None:
            self.login.learn(answer.headers)
        self.observer.record_response(endpoint, answer.status_code, self.limits.answer_headers(endpoint, answer))

    def listed(self, data: Any) -> list[BranchInfo] | None:
        """The branches of a branch list's answer (its JSON), remembered in the ledger; ``None`` (nothing
        remembered) for an answer that is not ``ok: 1`` with a list of branches."""
        branches = branch_list(data) if isinstance(data, dict) and data.get("ok") == 1 else None
        if branches is not None:
            self.observer.remember_branch_list(branches)
        return branches
