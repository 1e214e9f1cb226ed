"""ServiceClient at the transport seam (``httpx.MockTransport``) for what a real server cannot be made to do on cue:
429s with chosen bodies and headers, screepsmod-auth token rotation, a server without sign-in. The same client
against the real stand-in over loopback is tested in ``test_client_standin.py``-style tests at the end of this file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gitops.config.credentials import Auth, PasswordAuth, TokenAuth
from gitops.core.codeset import CodeSet, Module
from gitops.core.remote import BranchInfo
from gitops.core.tokens import TokenInfo
from gitops.edges.clock import ManualClock
from gitops.edges.ledger import Ledger
from gitops.edges.service.client import ReadOnlyClient, ServiceClient
from gitops.errors import AuthError, NetworkError, RateLimitedError, ScopeError, ServiceError
from gitops.secrets import Secret, redact
from gitops.standin.testing import ALICE as ALICE_NAME
from gitops.standin.testing import ALICE_EMAIL, ALICE_PASSWORD, FULL_TOKEN, RESTRICTED_TOKEN, StandIn, running_standin
from tests.project import Project

CANARY = "canary0123456789abcdef0123456789ab"
TOKEN = TokenAuth(Secret(CANARY), "the environment variable SCREEPS_TOKEN")
START = 1_800_000_000.0

Handler = Callable[[httpx.Request], httpx.Response]


def ok(body: dict[str, Any] | None = None, **headers: str) -> httpx.Response:
    return httpx.Response(200, json={"ok": 1, **(body or {})}, headers=headers)


class Recorder:
    """A MockTransport handler that answers from a queue (or a function) and keeps every request."""

    def __init__(self, *answers: httpx.Response | Exception | Handler) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, httpx.Response):
            return answer
        return answer(request)

    def paths(self) -> list[str]:
        return [f"{r.method} {r.url.path}" for r in self.requests]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def make_client(clock: ManualClock) -> Iterator[Callable[..., ServiceClient]]:
    made: list[ServiceClient] = []

    def make(
        handler: Handler,
        *,
        auth: Auth | None = TOKEN,
        url: str = "https://screeps.example/ptr",
        **kwargs: Any,
    ) -> ServiceClient:
        kwargs.setdefault("clock", clock)
        client = ServiceClient(
            server_name="official", url=url, auth=auth, transport=httpx.MockTransport(handler), **kwargs
        )
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


# --- addresses, authentication headers, envelope ------------------------------------------------------------


def test_path_prefix_and_token_header(make_client: Callable[..., ServiceClient]) -> None:
    rec = Recorder(ok({"branch": "default", "modules": {"main": "x"}}))
    code = make_client(rec).get_code("default")
    assert code is not None
    assert code.modules["main"].text == "x"
    request = rec.requests[0]
    assert str(request.url) == "https://screeps.example/ptr/api/user/code?branch=default"
    assert request.headers["X-Token"] == CANARY
    assert "_token" not in str(request.url)


def test_upload_sends_json_with_charset(make_client: Callable[..., ServiceClient]) -> None:
    rec = Recorder(ok({"timestamp": 1}))
    make_client(rec).upload_code("default", {"main": "ü", "lib": {"binary": "AAEC"}})
    request = rec.requests[0]
    assert request.headers["Content-Type"] == "application/json; charset=utf-8"
    assert json.loads(request.content) == {"branch": "default", "modules": {"main": "ü", "lib": {"binary": "AAEC"}}}


def test_200_error_is_an_error_with_the_servers_words(make_client: Callable[..., ServiceClient]) -> None:
    rec = Recorder(httpx.Response(200, json={"error": "branch does not exist"}))
    with pytest.raises(ServiceError) as info:
        make_client(rec).upload_code("nope", {"main": ""})
    assert str(info.value) == "server 'official' refused POST /api/user/code: branch does not exist"
    assert len(rec.requests) == 1  # a clear refusal is not retried


def test_200_without_ok_or_error(make_client: Callable[..., ServiceClient]) -> None:
    rec = Recorder(httpx.Response(200, json={"list": []}))
    with pytest.raises(ServiceError) as info:
        make_client(rec).list_branches()
    assert str(info.value) == (
        "server 'official' answered GET /api/user/branches without 'ok: 1' and without an error message.\n"
        "The server does not behave as the interface describes; check the url in the manifest."
    )


def test_no_code_means_no_branch(make_client: Callable[..., ServiceClient]) -> None:
    rec = Recorder(httpx.Response(200, json={"error": "no code"}))
    assert make_client(rec).get_code("missing") is None


def test_server_words_are_redacted(make_client: Callable[..., ServiceClient]) -> None:
    rec = Recorder(httpx.Response(200, json={"error": f"bad token {CANARY}"}))
    with pytest.raises(ServiceError) as info:
        make_client(rec).list_branches()
    assert CANARY not in str(info.value)
    assert str(info.value) == "server 'official' refused GET /api/user/branches: bad token <hidden>"


def test_401_names_server_and_variable(make_client: Callable[..., ServiceClient]) -> None:
    rec = Recorder(httpx.Response(401, json={"error": "unauthorized"}))
    with pytest.raises(AuthError) as info:
        make_client(rec).get_code("default")
    assert str(info.value) == (
        "the server refused the credentials for server 'official' (401 on GET /api/user/code); check the token in "
        "the environment variable SCREEPS_TOKEN.\n"
        "A token is created in the account settings of the server (Account, Auth tokens); a mistyped or deleted "
        "token gets this answer."
    )
    assert info.value.exit_code == 7
    assert len(rec.requests) == 1


def test_403_names_endpoint_and_needed_scope(make_client: Callable[..., ServiceClient]) -> None:
    rec = Recorder(httpx.Response(403, json={"error": "forbidden"}))
    with pytest.raises(ScopeError) as info:
        make_client(rec).upload_code("default", {"main": ""})
    assert str(info.value) == (
        "the token for server 'official' may not use POST /api/user/code; plan needs GET /api/user/code "
        "(and GET /api/user/branches to see which branches are active); apply also needs POST /api/user/code, "
        "POST /api/user/clone-branch, POST /api/user/set-active-branch — create a token with those endpoints or a "
        "full-access token.\n"
        "Tokens are created in the account settings; put the new one in the environment variable SCREEPS_TOKEN."
    )


def test_404_says_check_the_url(make_client: Callable[..., ServiceClient]) -> None:
    rec = Recorder(httpx.Response(404, text="Not Found"))
    with pytest.raises(ServiceError) as info:
        make_client(rec).list_branches()
    assert str(info.value) == (
        "server 'official' answered 404 Not Found to GET /api/user/branches (text/plain text starting 'Not Found').\n"
        "Check that the url 'https://screeps.example/ptr' in the manifest is the game server's base address, with "
        "any path prefix (https://screeps.com/ptr)."
    )


def test_redirect_is_not_followed(make_client: Callable[..., ServiceClient]) -> None:
    rec = Recorder(httpx.Response(301, headers={"Location": "https://elsewhere.example/api/user/code"}))
    with pytest.raises(ServiceError) as info:
        make_client(rec).get_code("default")
    assert len(rec.requests) == 1
    assert "redirected GET /api/user/code to https://elsewhere.example/api/user/code" in str(info.value)


def test_bad_url_is_refused_before_any_request() -> None:
    with pytest.raises(ServiceError) as info:
        ServiceClient(server_name="x", url="screeps.com", auth=TOKEN)
    assert str(info.value).startswith("server 'x' has url 'screeps.com', which is not an http(s) address.")


# --- transient failures ------------------------------------------------------------------------------------


def test_get_retries_500_then_succeeds(make_client: Callable[..., ServiceClient], clock: ManualClock) -> None:
    rec = Recorder(httpx.Response(500, text="oops"), ok({"list": []}))
    assert make_client(rec).list_branches() == []
    assert len(rec.requests) == 2
    assert clock.slept == [0.5]


def test_retries_after_the_first_attempt_count_it_as_their_first(
    make_client: Callable[..., ServiceClient], clock: ManualClock
) -> None:
    """The first attempt is sent without tenacity (imported only when it fails, gitops.edges.service.retries); the
    retries count it all the same: three failures, then the answer, with the backoff and the debug lines of one loop."""
    lines: list[str] = []
    rec = Recorder(
        httpx.Response(500, text="oops"),
        httpx.Response(502, text="bad"),
        httpx.RemoteProtocolError("Server disconnected"),
        ok({"list": []}),
    )
    assert make_client(rec, log=lines.append).list_branches() == []
    assert len(rec.requests) == 4
    assert clock.slept == [0.5, 1.0, 2.0]
    retried = [line for line in lines if "retrying" in line]
    assert [line.split(" failed")[0] for line in retried] == ["attempt 1", "attempt 2", "attempt 3"]
    assert retried[0].endswith("retrying in 0.5 s")


def test_get_retries_dropped_connection(make_client: Callable[..., ServiceClient]) -> None:
    rec = Recorder(httpx.RemoteProtocolError("Server disconnected"), ok({"list": []}))
    assert make_client(rec).list_branches() == []
    assert len(rec.requests) == 2


def test_get_retries_bad_json(make_client: Callable[..., ServiceClient]) -> None:
    rec = Recorder(httpx.Response(200, text='{"ok": 1, "li'), ok({"list": []}))
    assert make_client(rec).list_branches() == []
    assert len(rec.requests) == 2


def refused(request: httpx.Request) -> httpx.Response:
    """What httpx raises when nothing listens: a ConnectError caused by the socket's OSError."""
    try:
        raise ConnectionRefusedError(111, "Connection refused")
    except OSError as exc:
        raise httpx.ConnectError(f"[Errno 111] Connection refused ({request.headers['X-Token']})") from exc


def test_get_gives_up_after_bounded_attempts(make_client: Callable[..., ServiceClient], clock: ManualClock) -> None:
    rec = Recorder(refused)
    with pytest.raises(NetworkError) as info:
        make_client(rec).list_branches()
    assert len(rec.requests) == 4
    assert clock.slept == [0.5, 1.0, 2.0]
    # The socket's own words, never the exception's text (httpx may quote request data there).
    assert str(info.value) == (
        "cannot connect to server 'official' at https://screeps.example/ptr for GET /api/user/branches: "
        "ConnectError (Connection refused).\n"
        "Check the url in the manifest, your network, and that the server is running."
    )


def test_a_transport_error_is_named_by_its_type_only(make_client: Callable[..., ServiceClient]) -> None:
    rec = Recorder(httpx.RemoteProtocolError("illegal header b'x-token: abc\\r'"))
    with pytest.raises(NetworkError) as info:
        make_client(rec).list_branches()
    assert str(info.value).startswith(
        "the connection to server 'official' at https://screeps.example/ptr broke during GET /api/user/branches: "
        "RemoteProtocolError.\n"
    )


def test_html_page_says_what_came_back(make_client: Callable[..., ServiceClient]) -> None:
    page = "<!DOCTYPE html><html><head><title>Screeps World</title></head><body>hi</body></html>"
    rec = Recorder(httpx.Response(200, text=page, headers={"Content-Type": "text/html"}))
    with pytest.raises(ServiceError) as info:
        make_client(rec).get_code("default")
    assert str(info.value) == (
        "server 'official' answered GET /api/user/code with an HTML page titled 'Screeps World' instead of JSON.\n"
        "Check that the url 'https://screeps.example/ptr' in the manifest is the game server's base address "
        "(e.g. https://screeps.com or http://127.0.0.1:21025) and that the server is up."
    )


def test_upload_is_retried_at_most_once(make_client: Callable[..., ServiceClient]) -> None:
    rec = Recorder(httpx.Response(502, text="Bad Gateway"))
    with pytest.raises(NetworkError) as info:
        make_client(rec).upload_code("default", {"main": ""})
    assert rec.paths() == ["POST /ptr/api/user/code"] * 2
    assert str(info.value) == (
        "server 'official' answered 502 Bad Gateway to POST /api/user/code (text/plain text starting 'Bad Gateway').\n"
        "The server may be down or overloaded; try again later (the request was retried)."
    )


def test_timeout_message(make_client: Callable[..., ServiceClient]) -> None:
    rec = Recorder(httpx.ReadTimeout("timed out"))
    with pytest.raises(NetworkError) as info:
        make_client(rec, timeout=5).set_active_branch("default", "world")
    assert len(rec.requests) == 2
    assert str(info.value).startswith(
        "server 'official' did not answer POST /api/user/set-active-branch within 5 s (https://screeps.example/ptr)."
    )


# --- rate limits -------------------------------------------------------------------------------------------


def test_429_short_wait_is_waited_out_and_retried(
    make_client: Callable[..., ServiceClient], clock: ManualClock
) -> None:
    waits: list[tuple[float, str]] = []
    rec = Recorder(httpx.Response(429, text="Rate limit exceeded, retry after 5123ms"), ok({"timestamp": 1}))
    make_client(rec, on_wait=lambda s, e: waits.append((s, e))).upload_code("default", {"main": ""})
    assert waits == [(5.123, "POST /api/user/code")]
    assert clock.slept == [5.123]
    assert len(rec.requests) == 2


def test_429_wait_from_reset_header_when_body_says_nothing(
    make_client: Callable[..., ServiceClient], clock: ManualClock
) -> None:
    headers = {"X-RateLimit-Limit": "120", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(START) + 20)}
    rec = Recorder(httpx.Response(429, text="Too Many Requests", headers=headers), ok({"list": []}))
    make_client(rec).list_branches()
    assert clock.slept == [20.0]


def test_429_longer_than_max_wait_is_refused(make_client: Callable[..., ServiceClient], clock: ManualClock) -> None:
    body = (
        "Rate limit exceeded, retry after 7075614ms or disable rate limiting using this link: "
        f"https://screeps.com/a/#!/account/auth-tokens/noratelimit?token={CANARY[:8]}"
    )
    rec = Recorder(httpx.Response(429, text=body))
    with pytest.raises(RateLimitedError) as info:
        make_client(rec, max_wait=60).get_code("default")
    assert clock.slept == []
    assert len(rec.requests) == 1
    assert str(info.value) == (
        "server 'official' refused GET /api/user/code: rate limited by the limit of 60 per hour for "
        "GET /api/user/code; it resets at 2027-01-15 09:57:55 UTC (a wait of 118 min is longer than --max-wait "
        "(60 s)).\n"
        "Wait until then and run again, or lift every limit of the token for two hours on the no-rate-limit page: "
        "`gitops unlock` prints its link."
    )
    assert CANARY[:8] not in str(info.value)
    assert info.value.exit_code == 3


def test_429_global_limit_named_from_header(make_client: Callable[..., ServiceClient]) -> None:
    headers = {"X-RateLimit-Limit": "120", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(START) + 50)}
    rec = Recorder(httpx.Response(429, text="Rate limit exceeded, retry after 50000ms", headers=headers))
    with pytest.raises(RateLimitedError) as info:
        make_client(rec, max_wait=10).get_code("default")
    assert "rate limited by the global limit of 120 per minute; it resets at 2027-01-15 08:00:50 UTC" in str(info.value)


LONG_BODIES = {
    "a wait of 10^20 ms": "Rate limit exceeded, retry after 99999999999999999999999ms",
    "more digits than a float holds": "Rate limit exceeded, retry after " + "9" * 400 + "ms",
}


@pytest.mark.parametrize("body", LONG_BODIES.values(), ids=LONG_BODIES.keys())
@pytest.mark.parametrize("max_wait", [60.0, float("inf")])
def test_429_asking_for_more_than_a_day_is_refused_not_waited(
    make_client: Callable[..., ServiceClient], clock: ManualClock, tmp_path: Path, body: str, max_wait: float
) -> None:
    ledger = Ledger.open(tmp_path, "https://screeps.example/ptr", "f" * 16, clock=clock)
    rec = Recorder(httpx.Response(429, text=body))
    with pytest.raises(RateLimitedError) as info:
        make_client(rec, max_wait=max_wait, observer=ledger).get_code("default")
    assert clock.slept == []
    limit = "more than a day" if max_wait > 86400 else "60 s"
    assert str(info.value).startswith(
        "server 'official' refused GET /api/user/code: rate limited by the limit of 60 per hour for "
        "GET /api/user/code; it resets at 2027-01-16 08:00:00 UTC or later (the server asked for a wait of more than "
        f"a day, longer than --max-wait ({limit})).\n"
    )
    window = ledger.windows()["GET /api/user/code"]
    assert (window.remaining, window.reset) == (0, START + 86400)


def test_429_with_a_reset_header_that_is_not_a_number_waits_a_minute(
    make_client: Callable[..., ServiceClient], clock: ManualClock, tmp_path: Path
) -> None:
    ledger = Ledger.open(tmp_path, "https://screeps.example/ptr", "f" * 16, clock=clock)
    rec = Recorder(
        httpx.Response(429, text="Too Many Requests", headers={"X-RateLimit-Reset": "inf"}), ok({"list": []})
    )
    assert make_client(rec, observer=ledger).list_branches() == []
    assert clock.slept == [60.0]


@pytest.mark.parametrize(
    "odd",
    [
        {"X-RateLimit-Limit": "120", "X-RateLimit-Remaining": "1e400", "X-RateLimit-Reset": str(int(START) + 60)},
        {"X-RateLimit-Limit": "\u00b2", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "nan"},
        {"X-RateLimit-Limit": "9" * 5000, "X-RateLimit-Remaining": "-inf", "X-RateLimit-Reset": "1e999"},
    ],
)
def test_odd_rate_limit_numbers_on_an_answer_are_ignored(
    make_client: Callable[..., ServiceClient], clock: ManualClock, tmp_path: Path, odd: dict[str, str]
) -> None:
    ledger = Ledger.open(tmp_path, "https://screeps.example/ptr", "f" * 16, clock=clock)
    headers = [(k.encode(), v.encode()) for k, v in odd.items()]
    rec = Recorder(httpx.Response(200, json={"ok": 1, "list": []}, headers=headers))
    assert make_client(rec, observer=ledger).list_branches() == []
    assert ledger.windows()["global"].source == "counted"
    rec.answers = [httpx.Response(429, text="Too Many Requests", headers=headers), ok({"list": []})]
    assert make_client(rec, observer=ledger).list_branches() == []


@pytest.mark.parametrize(
    ("content", "until"),
    [
        (b'{"ok": 1, "token": {"full": true}, "unlimitedSeconds": 1e400}', None),
        (b'{"ok": 1, "token": {"full": true}, "unlimitedSeconds": NaN}', None),
        (b'{"ok": 1, "token": {"full": true}, "unlimitedUntil": 1' + b"0" * 400 + b"}", None),
        (b'{"ok": 1, "token": {"full": true}, "unlimitedSeconds": 1e12}', START + 86400),
    ],
)
def test_token_query_with_odd_numbers(
    make_client: Callable[..., ServiceClient], content: bytes, until: float | None
) -> None:
    rec = Recorder(httpx.Response(200, content=content, headers={"Content-Type": "application/json"}))
    assert make_client(rec).query_token().unlimited_until == until


def test_429_retries_are_bounded(make_client: Callable[..., ServiceClient], clock: ManualClock) -> None:
    rec = Recorder(httpx.Response(429, text="Rate limit exceeded, retry after 1000ms"))
    with pytest.raises(RateLimitedError) as info:
        make_client(rec).list_branches()
    assert len(rec.requests) == 4
    assert clock.slept == [1.0, 1.0, 1.0]
    assert "(still refused after waiting 3 times)" in str(info.value)


@pytest.mark.parametrize("with_ledger", [False, True])
def test_pacing_stays_under_the_global_limit(
    make_client: Callable[..., ServiceClient], clock: ManualClock, tmp_path: Path, with_ledger: bool
) -> None:
    ledger = (
        Ledger.open(tmp_path, "https://screeps.example/ptr", TOKEN.fingerprint(), clock=clock) if with_ledger else None
    )
    waits: list[tuple[float, str]] = []
    rec = Recorder(ok({"list": []}))
    client = make_client(rec, observer=ledger, on_wait=lambda s, e: waits.append((s, e)))
    sent_at: list[float] = []
    for _ in range(130):
        client.list_branches()
        sent_at.append(clock.now())
        clock.advance(0.1)
    assert waits
    assert waits[0][1] == "global"
    for i, t in enumerate(sent_at):
        assert sum(1 for u in sent_at[: i + 1] if u > t - 60) <= 120


def test_pacing_counts_earlier_runs_from_the_ledger(
    make_client: Callable[..., ServiceClient], clock: ManualClock, tmp_path: Path
) -> None:
    first = Ledger.open(tmp_path, "https://screeps.example/ptr", TOKEN.fingerprint(), clock=clock)
    for _ in range(120):
        first.record_sent("GET /api/user/branches")
    first.save()
    clock.advance(15)
    ledger = Ledger.open(tmp_path, "https://screeps.example/ptr", TOKEN.fingerprint(), clock=clock)
    make_client(Recorder(ok({"list": []})), observer=ledger).list_branches()
    assert clock.slept == [45.0]


def test_no_pacing_while_unlimited(
    make_client: Callable[..., ServiceClient], clock: ManualClock, tmp_path: Path
) -> None:
    ledger = Ledger.open(tmp_path, "https://screeps.example/ptr", TOKEN.fingerprint(), clock=clock)
    ledger.set_unlimited_until(START + 7200)
    client = make_client(Recorder(ok({"list": []})), observer=ledger)
    for _ in range(130):
        client.list_branches()
    assert clock.slept == []


# --- private servers (screepsmod-auth) ---------------------------------------------------------------------


PASSWORD = "pw-9f8e7d6c5b4a39281706"
ALICE = PasswordAuth("alice", Secret(PASSWORD), "http://127.0.0.1:21025", "the environment variables U and P")


class PrivateServer:
    """screepsmod-auth as the facts describe it: sign-in gives a token; every answer rotates it."""

    def __init__(self, *, signin: bool = True) -> None:
        self.signin = signin
        self.issued = 0
        self.valid: str | None = None
        self.requests: list[httpx.Request] = []
        self.expire_next = False

    def _issue(self) -> str:
        self.issued += 1
        self.valid = f"session{self.issued:04d}abcdefabcdef"
        return self.valid

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.path == "/api/auth/signin":
            if not self.signin:
                return httpx.Response(404, text="Cannot POST /api/auth/signin")
            body = json.loads(request.content)
            if body != {"email": "alice", "password": PASSWORD}:
                return httpx.Response(401, text="Unauthorized")
            return ok({"token": self._issue()})
        if self.expire_next:
            self.expire_next = False
            self.valid = None
        if request.headers.get("X-Token") != self.valid or not request.headers.get("X-Username"):
            return httpx.Response(401, json={"error": "unauthorized"})
        return ok({"list": [{"branch": "default", "activeWorld": True}]}, **{"X-Token": self._issue()})


def test_signin_and_token_rotation(make_client: Callable[..., ServiceClient]) -> None:
    server = PrivateServer()
    client = make_client(server, auth=ALICE, url="http://127.0.0.1:21025")
    assert client.list_branches() == [BranchInfo("default", True, False)]
    client.list_branches()
    client.list_branches()
    tokens = [r.headers.get("X-Token") for r in server.requests]
    assert [r.url.path for r in server.requests] == ["/api/auth/signin"] + ["/api/user/branches"] * 3
    assert tokens[1:] == ["session0001abcdefabcdef", "session0002abcdefabcdef", "session0003abcdefabcdef"]
    assert server.requests[1].headers["X-Username"] == "alice"
    assert "X-Token" not in server.requests[0].headers
    # Each rotating session token is a secret as much as the password.
    assert redact("sent session0001abcdefabcdef, got session0004abcdefabcdef") == "sent <hidden>, got <hidden>"


def test_no_pacing_for_a_private_server(make_client: Callable[..., ServiceClient], clock: ManualClock) -> None:
    # A private server has no rate limits: 130 requests in a minute are sent without a pause.
    server = PrivateServer()
    client = make_client(server, auth=ALICE, url="http://127.0.0.1:21025")
    for _ in range(130):
        client.list_branches()
    assert len(server.requests) == 131  # the sign-in and the 130
    assert clock.slept == []


def test_expired_session_signs_in_again_once(make_client: Callable[..., ServiceClient]) -> None:
    server = PrivateServer()
    client = make_client(server, auth=ALICE, url="http://127.0.0.1:21025")
    client.list_branches()
    server.expire_next = True
    assert client.list_branches() == [BranchInfo("default", True, False)]
    assert [r.url.path for r in server.requests] == [
        "/api/auth/signin",
        "/api/user/branches",
        "/api/user/branches",
        "/api/auth/signin",
        "/api/user/branches",
    ]


def test_refused_again_after_signing_in_again(make_client: Callable[..., ServiceClient]) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/auth/signin":
            return ok({"token": "abcdefabcdef0123456789"})
        return httpx.Response(401, json={"error": "unauthorized"})

    rec = Recorder(handler)
    with pytest.raises(AuthError) as info:
        make_client(rec, auth=ALICE, url="http://127.0.0.1:21025").list_branches()
    assert len(rec.requests) == 4
    assert str(info.value) == (
        "the server refused the credentials for server 'official' (401 on GET /api/user/branches); check the user "
        "name and password in the environment variables U and P.\n"
        "On a private server the password is set with screepsmod-auth (in the server CLI: setPassword)."
    )


def test_wrong_password_at_signin(make_client: Callable[..., ServiceClient]) -> None:
    wrong = PasswordAuth("alice", Secret("not-the-password-123"), "http://127.0.0.1:21025", "entry 'local' of X")
    with pytest.raises(AuthError) as info:
        make_client(PrivateServer(), auth=wrong, url="http://127.0.0.1:21025").list_branches()
    assert str(info.value).startswith(
        "server 'official' refused the sign-in with the user name and password from entry 'local' of X."
    )
    assert "not-the-password-123" not in str(info.value)


def test_no_signin_is_a_clear_auth_error_not_a_basic_fallback(make_client: Callable[..., ServiceClient]) -> None:
    # HTTP Basic would not help: the private server takes it only on POST /api/user/code, so nothing could be
    # planned (GET /api/user/code and the branch list need a session token).
    server = PrivateServer(signin=False)
    client = make_client(server, auth=ALICE, url="http://127.0.0.1:21025")
    with pytest.raises(AuthError) as info:
        client.get_code("default")
    assert str(info.value) == (
        "server 'official' has no /api/auth/signin (404), so the user name and password from the environment "
        "variables U and P cannot be used: a password login needs screepsmod-auth's sign-in.\n"
        "Install screepsmod-auth on the private server (see gitops help private-server); on an official server use a "
        "persistent token (token_env) instead."
    )
    assert info.value.exit_code == 7
    assert [r.url.path for r in server.requests] == ["/api/auth/signin"]
    assert all("Authorization" not in r.headers for r in server.requests)


def test_password_auth_has_no_token_query(make_client: Callable[..., ServiceClient]) -> None:
    client = make_client(PrivateServer(), auth=ALICE, url="http://127.0.0.1:21025")
    with pytest.raises(AuthError):
        client.query_token()
    with pytest.raises(AuthError):
        client.no_rate_limit_url()


# --- token query and the no-rate-limit link ----------------------------------------------------------------


def test_query_token_reads_scope_and_unlimited_time(
    make_client: Callable[..., ServiceClient], clock: ManualClock, tmp_path: Path
) -> None:
    body = {
        "token": {
            "full": False,
            "endpoints": ["GET /api/user/code", "POST /api/user/code"],
            "websockets": ["console"],
            "memorySegments": [0, 3],
            "unlimitedUntil": START + 600,
        }
    }
    ledger = Ledger.open(tmp_path, "https://screeps.example/ptr", TOKEN.fingerprint(), clock=clock)
    lines: list[str] = []
    rec = Recorder(ok(body))
    info = make_client(rec, observer=ledger, log=lines.append).query_token()
    assert info == TokenInfo(
        full=False,
        endpoints=("GET /api/user/code", "POST /api/user/code"),
        websockets=("console",),
        memory_segments=(0, 3),
        unlimited_until=START + 600,
        unlimited_seconds=600.0,
    )
    assert ledger.unlimited_until == START + 600
    assert rec.requests[0].url.params["token"] == CANARY
    assert len(lines) == 1
    assert CANARY not in lines[0]
    assert lines[0].startswith("GET https://screeps.example/ptr/api/auth/query-token?token=<hidden> -> 200 (")


def test_no_rate_limit_url_is_a_secret(make_client: Callable[..., ServiceClient]) -> None:
    link = make_client(Recorder(ok()), url="https://screeps.example/season/").no_rate_limit_url()
    assert link.reveal() == f"https://screeps.example/season/a/#!/account/auth-tokens/noratelimit?token={CANARY}"
    assert CANARY not in f"{link} {link!r}"
    # Logged or printed off a terminal, the link keeps its address and hides only the token.
    assert redact(link.reveal()) == "https://screeps.example/season/a/#!/account/auth-tokens/noratelimit?token=<hidden>"


# --- the ledger --------------------------------------------------------------------------------------------


def test_ledger_learns_from_every_answer(
    make_client: Callable[..., ServiceClient], clock: ManualClock, tmp_path: Path
) -> None:
    limits = {"X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "41", "X-RateLimit-Reset": str(int(START) + 900)}

    def handler(request: httpx.Request) -> httpx.Response:
        key = f"{request.method} {request.url.path}"
        if key == "GET /api/user/code":
            return ok({"branch": "default", "modules": {"main": "secret text", "w": {"binary": "AAEC"}}}, **limits)
        if key == "GET /api/user/branches":
            return ok({"list": [{"branch": "default", "activeWorld": True, "activeSim": True}, {"branch": "b"}]})
        return ok({"timestamp": 1})

    ledger = Ledger.open(tmp_path, "https://screeps.example", TOKEN.fingerprint(), clock=clock)
    client = make_client(handler, url="https://screeps.example", observer=ledger)
    client.get_code("default")
    remembered = ledger.remembered_branch("default")
    assert remembered is not None
    assert remembered.how == "download"
    expected = CodeSet.of([Module("main", text="secret text"), Module("w", binary=b"\0\1\2")])
    assert remembered.digest == expected.digest
    assert remembered.modules is not None
    assert remembered.modules["main"].text is None
    window = ledger.windows()["GET /api/user/code"]
    assert (window.limit, window.remaining, window.reset, window.source) == (60, 41, START + 900, "headers")

    clock.advance(5)
    client.upload_code("b", {"main": "new"})
    uploaded = ledger.remembered_branch("b")
    assert uploaded is not None
    assert uploaded.how == "own-upload"
    assert uploaded.learnt_at == START + 5

    client.list_branches()
    client.set_active_branch("b", "sim")
    client.clone_branch("c", "b")
    listing = ledger.remembered_branch_list()
    assert listing is not None
    assert listing[0] == [BranchInfo("default", True, False), BranchInfo("b", False, True), BranchInfo("c")]
    assert len(ledger.sent_times("POST /api/user/code", 60)) == 1

    ledger.save()  # the client never saves: the session does, once per step
    text = ledger.path.read_text()
    assert "secret text" not in text
    assert CANARY not in text
    reopened = Ledger.open(tmp_path, "https://screeps.example", TOKEN.fingerprint(), clock=clock)
    assert reopened.remembered_branch("b") == uploaded


def test_429_without_headers_is_recorded_as_a_spent_window(
    make_client: Callable[..., ServiceClient], clock: ManualClock, tmp_path: Path
) -> None:
    ledger = Ledger.open(tmp_path, "https://screeps.example", TOKEN.fingerprint(), clock=clock)
    rec = Recorder(httpx.Response(429, text="Rate limit exceeded, retry after 600000ms"))
    with pytest.raises(RateLimitedError):
        make_client(rec, url="https://screeps.example", observer=ledger).upload_code("x", {"main": ""})
    ledger.save()
    window = Ledger.open(tmp_path, "https://screeps.example", TOKEN.fingerprint(), clock=clock).windows()[
        "POST /api/user/code"
    ]
    assert (window.remaining, window.reset, window.source) == (0, START + 600, "headers")


def test_canary_never_in_logs(make_client: Callable[..., ServiceClient], tmp_path: Path) -> None:
    lines: list[str] = []
    rec = Recorder(
        httpx.Response(500, text=f"boom {CANARY}"),
        httpx.Response(200, json={"error": f"no {CANARY}"}),
    )
    with pytest.raises(ServiceError) as info:
        make_client(rec, log=lines.append).list_branches()
    assert lines
    assert all(CANARY not in line for line in lines)
    assert CANARY not in str(info.value)


# --- against the real stand-in over loopback ---------------------------------------------------------------


def standin_client(standin: StandIn, token: str = FULL_TOKEN, **kwargs: Any) -> ServiceClient:
    auth = TokenAuth(Secret(token), "the environment variable SCREEPS_TOKEN")
    return ServiceClient(server_name="local", url=standin.url, auth=auth, clock=standin.clock, **kwargs)


def test_standin_round_trip(standin: StandIn, tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path, standin.url, "f" * 16, clock=standin.clock)
    with standin_client(standin, observer=ledger) as client:
        assert client.get_code("nope") is None
        client.clone_branch("deploy")
        client.upload_code("deploy", {"main": "module.exports.loop = () => {}", "w": {"binary": "AGFzbQ=="}})
        client.set_active_branch("deploy", "world")
        code = client.get_code("deploy")
        assert code is not None
        assert code.modules["w"].binary == b"\0asm"
        assert standin.branch_modules(ALICE_NAME, "deploy") == {
            "main": "module.exports.loop = () => {}",
            "w": {"binary": "AGFzbQ=="},
        }
        listing = client.list_branches()
        assert ("deploy", True, False) in [(b.name, b.active_world, b.active_sim) for b in listing]
        deploy = next(b for b in listing if b.name == "deploy")
        assert deploy.stamp is not None  # the list's 'timestamp', compared only for equality
        assert deploy.modules == standin.branch_modules(ALICE_NAME, "deploy")  # the list carries the modules
        assert {b["branch"] for b in standin.branches(ALICE_NAME)} == {b.name for b in listing}
        with pytest.raises(ServiceError) as info:
            client.upload_code("missing", {"main": ""})
        assert str(info.value) == "server 'local' refused POST /api/user/code: branch does not exist"
    window = ledger.windows()["POST /api/user/code"]
    assert (window.limit, window.source) == (240, "headers")
    assert window.remaining == 240 - 2


def test_standin_restricted_token(standin: StandIn) -> None:
    with standin_client(standin, RESTRICTED_TOKEN) as client:
        assert client.get_code("$activeWorld") is not None
        with pytest.raises(AuthError) as info:
            client.list_branches()
    assert str(info.value).startswith(
        "the token for server 'local' may not use GET /api/user/branches; plan needs GET /api/user/code "
        "(and GET /api/user/branches to see which branches are active); apply also needs POST /api/user/code, "
        "POST /api/user/clone-branch, POST /api/user/set-active-branch — create a token with those endpoints or a "
        "full-access token.\n"
    )


def test_standin_unknown_token(standin: StandIn) -> None:
    with standin_client(standin, "canarywrong0123456789abcdef012345") as client, pytest.raises(AuthError) as info:
        client.list_branches()
    assert str(info.value).startswith(
        "the server refused the credentials for server 'local' (401 on GET /api/user/branches); check the token in "
        "the environment variable SCREEPS_TOKEN."
    )


def test_standin_429_refused_then_waited(standin: StandIn) -> None:
    waits: list[tuple[float, str]] = []
    with standin_client(standin, max_wait=60, on_wait=lambda s, e: waits.append((s, e))) as client:
        for _ in range(60):
            client.get_code("$activeWorld")
        with pytest.raises(RateLimitedError) as info:
            client.get_code("$activeWorld")
    message = str(info.value)
    assert message.startswith(
        "server 'local' refused GET /api/user/code: rate limited by the limit of 60 per hour for GET /api/user/code; "
        "it resets at 2027-01-15 09:00:00 UTC (a wait of 60 min is longer than --max-wait (60 s))."
    )
    assert FULL_TOKEN not in message
    assert waits == []
    with standin_client(standin, max_wait=3600, on_wait=lambda s, e: waits.append((s, e))) as client:
        assert client.get_code("$activeWorld") is not None
    assert waits == [(3600.0, "GET /api/user/code")]
    assert standin.clock.slept == [3600.0]


def test_standin_pacing_avoids_429(standin: StandIn) -> None:
    waits: list[tuple[float, str]] = []
    with standin_client(standin, on_wait=lambda s, e: waits.append((s, e))) as client:
        for _ in range(125):
            client.list_branches()
    assert standin.count("GET /api/user/branches") == 125
    assert [e for _, e in waits] == ["global"]


@pytest.mark.parametrize("kind", ["500", "drop", "badjson", "html"])
def test_standin_read_faults_are_retried(standin: StandIn, kind: str) -> None:
    standin.inject_fault("GET /api/user/code", kind, count=2)
    with standin_client(standin) as client:
        assert client.get_code("$activeWorld") is not None
    assert standin.count("GET /api/user/code") == 3
    assert standin.clock.slept == [0.5, 1.0]


def test_standin_upload_retried_once(standin: StandIn) -> None:
    standin.inject_fault("POST /api/user/code", "500", count=5)
    with standin_client(standin) as client, pytest.raises(NetworkError) as info:
        client.upload_code("default", {"main": "x"})
    assert standin.count("POST /api/user/code") == 2
    assert str(info.value).startswith(
        "server 'local' answered 500 Internal Server Error to POST /api/user/code (text/plain text starting "
        "'Internal Server Error')."
    )


def test_standin_upload_succeeds_on_its_retry(standin: StandIn) -> None:
    standin.inject_fault("POST /api/user/code", "drop")
    with standin_client(standin) as client:
        client.upload_code("default", {"main": "x"})
    assert standin.branch_modules(ALICE_NAME, "default") == {"main": "x"}
    assert standin.count("POST /api/user/code") == 2


def test_standin_slow_answer_times_out(standin: StandIn) -> None:
    standin.inject_fault("POST /api/user/set-active-branch", "delay", count=2, delay=1.0)
    with standin_client(standin, timeout=0.2) as client, pytest.raises(NetworkError) as info:
        client.set_active_branch("default", "sim")
    assert str(info.value).startswith("server 'local' did not answer POST /api/user/set-active-branch within 0.2 s")


def test_standin_query_token_and_unlimited(standin: StandIn, tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path, standin.url, "f" * 16, clock=standin.clock)
    with standin_client(standin, observer=ledger) as client:
        info = client.query_token()
        assert (info.full, info.unlimited_until, info.unlimited_seconds) == (True, None, 0.0)
        until = standin.grant_unlimited(FULL_TOKEN)
        standin.clock.advance(600)
        info = client.query_token()
        assert info.unlimited_until == until
        assert info.unlimited_seconds == 6600.0
    assert ledger.unlimited_until == until
    with standin_client(standin, RESTRICTED_TOKEN) as client:
        restricted = client.query_token()
    assert (restricted.full, restricted.endpoints) == (False, ("GET /api/user/code", "POST /api/user/code"))


def test_standin_a_password_is_refused_without_a_sign_in(standin: StandIn) -> None:
    # The stand-in models the official server: no /api/auth/signin, HTTP Basic on the code endpoint. The tool does
    # not use Basic (a real private server takes it only on POST), so a password login stops before any code call.
    auth = PasswordAuth(ALICE_EMAIL, Secret(ALICE_PASSWORD), standin.url, "the environment variables U and P")
    with ServiceClient(server_name="local", url=standin.url, auth=auth, clock=standin.clock) as client:
        with pytest.raises(AuthError) as info:
            client.get_code("default")
        with pytest.raises(AuthError):
            client.upload_code("default", {"main": "by basic"})
    assert str(info.value).startswith("server 'local' has no /api/auth/signin (404)")
    assert standin.count("GET /api/user/code") == standin.count("POST /api/user/code") == 0


@pytest.mark.parametrize(
    ("token", "failure"),
    [
        ("canaryCR0123456789\rabcdef0123456789", "LocalProtocolError"),
        ("canaryUML0123456789\u00fcabcdef012345", "UnicodeEncodeError"),
    ],
)
def test_standin_a_token_that_cannot_be_sent_is_not_retried_nor_shown(
    standin: StandIn, token: str, failure: str
) -> None:
    # resolve_auth refuses such a token first; this is the client's own guard, with the real HTTP transport (h11
    # refuses the header value and quotes it in its error).
    lines: list[str] = []
    with standin_client(standin, token, log=lines.append) as client, pytest.raises(AuthError) as info:
        client.get_code("default")
    assert str(info.value) == (
        f"the request GET /api/user/code to server 'local' cannot be sent ({failure}): a header value holds a "
        "character HTTP "
        "headers do not allow, and the headers that vary are the credentials.\n"
        "Check the token or user name in the environment variable SCREEPS_TOKEN: printable ASCII letters, digits and "
        "punctuation, without spaces or line endings."
    )
    assert standin.count("GET /api/user/code") == 0
    assert standin.clock.slept == []
    for text in [str(info.value), *lines]:
        for part in (token[:12], token[-12:], repr(token)[1:-1], repr(token.encode())[2:-1]):
            assert part not in text


def test_a_session_token_that_cannot_be_sent_back_is_not_used(make_client: Callable[..., ServiceClient]) -> None:
    server = PrivateServer()
    client = make_client(server, auth=ALICE, url="http://127.0.0.1:21025")
    client.list_branches()

    headers = [(b"X-Token", "bad token\u00e9".encode())]
    rec = Recorder(lambda request: httpx.Response(200, json={"ok": 1, "list": []}, headers=headers))
    client._http._transport = httpx.MockTransport(rec)
    client.list_branches()
    client.list_branches()  # the token of the last good answer is sent again, not the one that cannot be
    assert [r.headers["X-Token"] for r in rec.requests] == ["session0002abcdefabcdef"] * 2


def test_standin_canary_never_leaks(standin: StandIn, tmp_path: Path) -> None:
    lines: list[str] = []
    errors: list[str] = []
    ledger = Ledger.open(tmp_path / "state", standin.url, "f" * 16, clock=standin.clock)
    standin.inject_fault("GET /api/user/code", "html", count=4)

    def attempt(call: Callable[[], object]) -> None:
        try:
            call()
        except (ServiceError, RateLimitedError) as exc:
            errors.append(str(exc))

    with standin_client(standin, observer=ledger, log=lines.append, max_wait=0) as client:
        client.query_token()
        attempt(lambda: client.get_code("default"))  # an HTML page four times
        attempt(lambda: client.upload_code("nope", {"main": ""}))  # the server's error words
        for _ in range(61):  # the 61st is refused: 60 per hour
            attempt(lambda: client.get_code("default"))
    ledger.save()
    assert len(errors) == 3
    state = "".join(p.read_text() for p in (tmp_path / "state").rglob("*") if p.is_file())
    assert "GET /api/user/code" in state
    for text in [*lines, *errors, state]:
        assert FULL_TOKEN not in text
        assert FULL_TOKEN[:8] not in text


def test_a_registered_link_does_not_hide_every_address() -> None:
    # The GitHub Action registers the whole link for masking; only token-like values lose their prefix too.
    Secret("https://screeps.example/a/#!/account/auth-tokens/noratelimit?token=abcdef0123456789abcdef")
    assert redact("see https://other.example/x") == "see https://other.example/x"
    assert redact("retry after 5ms ... token=canary01") == "retry after 5ms ... token=<hidden>"
    assert redact(f"prefix {CANARY[:8]} echoed") == "prefix <hidden> echoed"


def test_without_the_branch_list_a_second_activated_branch_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A token without GET /api/user/branches: the ledger's branch list is only what this tool set, so the second
    # activation must add its branch to that list, or every later plan re-sends it.
    token = "canarynolist0123456789abcdef01234"
    endpoints = ["GET /api/user/code", "POST /api/user/code", "POST /api/user/clone-branch"]
    accounts = {
        "users": [
            {
                "username": ALICE_NAME,
                "tokens": [{"value": token, "endpoints": [*endpoints, "POST /api/user/set-active-branch"]}],
            }
        ]
    }
    with running_standin(accounts, tmp_path / "nolist.sqlite3") as service:
        p = Project(tmp_path / "bot", service, capsys, monkeypatch, token=token)
        p.write({"src/main.js": "module.exports.loop = () => {};\n"})
        p.manifest([{"branch": "trial", "root": "src"}])
        assert p.apply("--yes").code == 0  # trial exists now, cloned while no branch list was recorded
        p.manifest(
            [
                {"branch": "default", "root": "src", "activate": ["world"]},
                {"branch": "trial", "root": "src", "activate": ["sim"]},
            ]
        )
        applied = p.apply("--yes")
        assert applied.code == 0, applied.err
        flags = {b["branch"]: (b["activeWorld"], b["activeSim"]) for b in service.branches(ALICE_NAME)}
        assert (flags["default"], flags["trial"]) == ((True, False), (False, True))
        again = p.plan("--refresh=always")
        assert again.code == 0, again.out + again.err


def test_the_read_only_view_reads_and_cannot_write(make_client: Callable[..., ServiceClient], tmp_path: Path) -> None:
    """What planning gets: the client's reads, and no method that writes (mypy refuses the call; so does Python)."""
    ledger = Ledger.open(tmp_path, "https://screeps.example/ptr", "f" * 16, clock=ManualClock(START))
    rec = Recorder(ok({"list": [{"branch": "main", "activeWorld": True}]}), ok({"modules": {"main": "x"}}))
    reader = ReadOnlyClient(make_client(rec, observer=ledger))
    assert reader.list_branches() == [BranchInfo("main", True, False)]
    code = reader.get_code("main")
    assert code is not None
    assert code.names() == ["main"]
    for write in ("upload_code", "clone_branch", "set_active_branch", "query_token"):
        assert not hasattr(reader, write)
    remembered = ledger.remembered_branch("main")
    assert remembered is not None
    assert remembered.digest == code.digest  # what it read went to the observer


def test_a_request_that_never_connected_is_not_counted_but_one_that_did_is(
    make_client: Callable[..., ServiceClient], clock: ManualClock, tmp_path: Path
) -> None:
    # A day of refused connections must not spend the day's 240 uploads on the tool's own count (issue 18, item 4).
    ledger = Ledger.open(tmp_path, "https://screeps.example/ptr", "fp", clock=clock, lock_wait=0)
    try:

        def refused(request: httpx.Request) -> httpx.Response:
            raise httpx.ConnectError("connection refused", request=request)

        client = make_client(refused, observer=ledger)
        with pytest.raises(NetworkError):
            client.upload_code("main", {"main": "x"})
        assert ledger.sent_after("POST /api/user/code", 0) == 0

        def broken(request: httpx.Request) -> httpx.Response:
            return httpx.Response(500, text="Internal Server Error")

        client = make_client(broken, observer=ledger)
        with pytest.raises(NetworkError):
            client.upload_code("main", {"main": "x"})
        assert ledger.sent_after("POST /api/user/code", 0) == 2  # both attempts reached the server
    finally:
        ledger.close()


def test_a_pacing_wait_longer_than_the_request_deadline_is_not_a_silent_server(
    standin: StandIn, tmp_path: Path
) -> None:
    # 120 requests in the last minute: the next one waits (here 2 s of real time) for the global window; the
    # request's own deadline (1 s here, 30 s by default) is for the server's answer and starts after that wait.
    import time as real_time

    from gitops.core.endpoints import GLOBAL_KEY
    from gitops.edges.clock import SystemClock

    clock = SystemClock()
    ledger = Ledger.open(tmp_path, standin.url, "fp", clock=clock, lock_wait=0)
    try:
        now = clock.now()
        for _ in range(120):
            ledger._data.sent.setdefault(GLOBAL_KEY, []).append((now - 58.0, 0))
        client = ServiceClient(
            server_name="local", url=standin.url, auth=TOKEN, observer=ledger, clock=clock, timeout=1.0
        )
        with client:
            started = real_time.monotonic()
            branches = client.list_branches()
            waited = real_time.monotonic() - started
        assert [b.name for b in branches] == ["default"]
        assert waited >= 1.5
    finally:
        ledger.close()


def test_a_large_upload_reports_how_much_is_sent_and_keeps_its_content_length(
    make_client: Callable[..., ServiceClient],
) -> None:
    from contextlib import contextmanager

    seen: list[tuple[str | None, str | None, int]] = []
    updates: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = request.read()
        seen.append((request.headers.get("content-length"), request.headers.get("transfer-encoding"), len(body)))
        return httpx.Response(200, json={"ok": 1, "timestamp": 1})

    @contextmanager
    def waiting(what: str) -> Iterator[Callable[[str], None]]:
        updates.append(what)
        yield updates.append

    client = make_client(handler, waiting=waiting)
    client.upload_code("main", {"main": "x" * 2_000_000})
    [(length, encoding, size)] = seen
    assert (length, encoding) == (str(size), None)  # sent as its length says, not chunked
    assert updates[0] == "server 'official' to answer POST /api/user/code, sending 2.0 MB"
    assert updates[-1].endswith("sending 2.0 MB (100% sent)")
    assert any(u.endswith("% sent)") and not u.endswith("(100% sent)") for u in updates)
