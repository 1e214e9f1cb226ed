"""The logins of gitops.edges.service.auth: one login per kind (httpx takes it as ``auth=``), built from the credentials
by login_for."""

from __future__ import annotations

import httpx

from gitops.config.credentials import PasswordAuth, TokenAuth
from gitops.edges.service.auth import Login, PasswordLogin, TokenLogin, login_for
from gitops.secrets import Secret


def _sent_headers(auth: Login) -> httpx.Headers:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"ok": 1})

    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        client.get("http://server.test/api/user/branches", auth=auth)
    return seen[0].headers


def test_a_token_login_sends_x_token_is_paced_and_scoped() -> None:
    login = login_for(TokenAuth(Secret("tok-0123456789abcdef"), "env"), sign_in=lambda _login: None)
    assert isinstance(login, TokenLogin)
    assert (login.kind, login.paced, login.scoped, login.source) == ("token", True, True, "env")
    assert _sent_headers(login)["X-Token"] == "tok-0123456789abcdef"
    assert login.persistent_token is not None
    assert login.renew() is False


def test_a_password_login_signs_in_once_and_takes_the_rotated_token() -> None:
    calls: list[PasswordLogin] = []

    def sign_in(login: PasswordLogin) -> None:
        calls.append(login)
        login.signed_in("session-1")

    auth = PasswordAuth("alice", Secret("pass word"), "http://server.test", "env")
    login = login_for(auth, sign_in=sign_in)
    assert isinstance(login, PasswordLogin)
    assert (login.kind, login.paced, login.scoped, login.persistent_token) == ("password", False, False, None)
    headers = _sent_headers(login)
    assert (headers["X-Token"], headers["X-Username"]) == ("session-1", "alice")
    assert login.sign_in_body() == {"email": "alice", "password": "pass word"}
    login.learn(httpx.Response(200, headers={"X-Token": "session-2"}).headers)
    login.learn(httpx.Response(200, headers={"X-Token": "not safe"}).headers)
    assert _sent_headers(login)["X-Token"] == "session-2"
    assert len(calls) == 1
    assert login.renew() is True
    assert login.socket_token() is None


def test_no_credentials_is_no_login() -> None:
    assert login_for(None, sign_in=lambda _login: None) is None
