"""How a request to a server is logged in: one login class per login kind, as httpx has one ``Auth`` per scheme.

The two kinds differ in more than a header, and each difference is a property of the login, not a question the
client asks of the credentials: a persistent token (:class:`TokenLogin`, official servers) goes in ``X-Token``, its
requests are paced under the global limit and a 403 means its scope; a private server's sign-in
(:class:`PasswordLogin`, screepsmod-auth) gets a session token that rotates with every answer and expires within a
minute, so a 401 is worth one sign-in afresh. There is no HTTP Basic fallback: the private server takes Basic only
on ``POST /api/user/code``, so without the sign-in nothing could be planned. :func:`login_for` is the one place
that turns the credentials (:mod:`gitops.config.credentials`) into a login.

Without httpx (the head start writes a token's branch list before httpx is imported): the headers of every request
are made in one place, :meth:`gitops.edges.service.outgoing.Outgoing.headers`, from :meth:`Login.headers`; a login
is also a callable httpx takes as ``auth=``, which sets the same headers on any request it is handed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, ClassVar

from gitops.config.credentials import Auth, PasswordAuth, TokenAuth
from gitops.config.logins import LoginKind, header_safe
from gitops.errors import AuthError
from gitops.secrets import Secret

if TYPE_CHECKING:
    import httpx

__all__ = ["Login", "PasswordLogin", "SignIn", "TokenLogin", "login_for"]


class Login:
    """What every login kind says about the requests it authenticates."""

    kind: ClassVar[LoginKind]
    #: Requests are paced under the global limit of 120 per minute (only tokens are counted by the server).
    paced: ClassVar[bool] = False
    #: A 403 means the token's scope (otherwise: the account may not use the endpoint).
    scoped: ClassVar[bool] = False
    #: What its credentials are called when the server refuses them (401), and what to do about it.
    credentials_words: ClassVar[str]
    refused_hint: ClassVar[str]

    def __init__(self, source: str) -> None:
        #: Where the credentials were read, for messages.
        self.source = source

    def headers(self) -> dict[str, str]:
        """The headers that log a request in (signing in first when that is needed)."""
        raise NotImplementedError

    def __call__(self, request: httpx.Request) -> httpx.Request:
        """httpx's function auth: ``request`` with the login's headers."""
        request.headers.update(self.headers())
        return request

    def renew(self) -> bool:
        """After a 401: whether signing in afresh may help (then the next request does); at most once a request."""
        return False

    def learn(self, headers: Mapping[str, str]) -> None:
        """What an answer's ``headers`` tell the login (a rotated session token)."""

    @property
    def persistent_token(self) -> Secret | None:
        """The persistent token (the token query and the no-rate-limit page are for it), or ``None``."""
        return None

    def socket_token(self) -> Secret | None:
        """The token the game socket's ``auth`` takes, or ``None`` when there is none yet."""
        return None


class TokenLogin(Login):
    """A persistent token, sent as ``X-Token`` with every request."""

    kind: ClassVar[LoginKind] = "token"
    paced: ClassVar[bool] = True
    scoped: ClassVar[bool] = True
    credentials_words: ClassVar[str] = "token"
    refused_hint: ClassVar[str] = (
        "A token is created in the account settings of the server (Account, Auth tokens); a mistyped or "
        "deleted token gets this answer."
    )

    def __init__(self, token: Secret, source: str) -> None:
        super().__init__(source)
        self.token = token

    def headers(self) -> dict[str, str]:
        return {"X-Token": self.token.reveal()}

    @property
    def persistent_token(self) -> Secret | None:
        return self.token

    def socket_token(self) -> Secret | None:
        return self.token


#: How the client signs a password login in: it sends the sign-in and calls :meth:`PasswordLogin.signed_in`.
SignIn = Callable[["PasswordLogin"], None]


class PasswordLogin(Login):
    """A private server's sign-in (screepsmod-auth): a user name and password buy a session token, which the server
    rotates with every answer (``X-Token``) and which expires after a minute without use."""

    kind: ClassVar[LoginKind] = "password"
    credentials_words: ClassVar[str] = "user name and password"
    refused_hint: ClassVar[str] = (
        "On a private server the password is set with screepsmod-auth (in the server CLI: setPassword)."
    )

    def __init__(self, username: str, password: Secret, source: str, sign_in: SignIn) -> None:
        super().__init__(source)
        self.username = username
        self.password = password
        self._sign_in = sign_in
        #: The rotating token of the sign-in (``None``: not signed in).
        self.session: Secret | None = None

    def headers(self) -> dict[str, str]:
        if self.session is None:
            self._sign_in(self)
        assert self.session is not None
        # screepsmod-auth wants X-Username too; any non-empty value is accepted.
        return {"X-Token": self.session.reveal(), "X-Username": self.username}

    def sign_in_body(self) -> dict[str, str]:
        """The body of ``POST /api/auth/signin``."""
        return {"email": self.username, "password": self.password.reveal()}

    def signed_in(self, token: str) -> None:
        """The sign-in's answer gave this session token."""
        self.session = Secret(token)

    def renew(self) -> bool:
        # Private-server tokens live 60 s: sign in afresh once, then retry once.
        self.session = None
        return True

    def learn(self, headers: Mapping[str, str]) -> None:
        fresh = headers.get("X-Token")
        if fresh and header_safe(fresh):
            # screepsmod-auth hands out a new token with every answer; the old one soon stops working.
            self.session = Secret(fresh)

    def socket_token(self) -> Secret | None:
        return self.session


def login_for(auth: Auth | None, *, sign_in: SignIn) -> Login | None:
    """The login of the credentials ``auth`` (``None``: no credentials, nothing is sent); ``sign_in`` is how a
    password login signs in (the client's own request)."""
    match auth:
        case None:
            return None
        case TokenAuth():
            return TokenLogin(auth.token, auth.source)
        case PasswordAuth():
            return PasswordLogin(auth.username, auth.password, auth.source, sign_in)
        case _:  # a login kind of the credentials without a sign-in here: nothing is sent with it
            raise AuthError(
                f"the credentials in {auth.source} are of a kind ({auth.kind!r}) this client cannot sign in with.",
                hint="Name a token (token_env) or a user name and password (username_env, password_env).",
            )
