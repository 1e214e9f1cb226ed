"""The differential: the same requests to the real private server and to the stand-in, and their answers compared.

Each case below is a short list of requests (issue 40's causes: charsets, a malformed Content-Type, branch names in
UTF-16 units, the memory path, sizes of UTF-8 text, ``1e400``, bad UTF-8, deep nesting, form bodies, HEAD and
OPTIONS, path case, repeated query parameters, ``parseInt`` page and segment numbers, a repeated ``X-Token``, a
lower-case method, operator objects as branch names; and the game socket). Every request goes to both servers and
the answers must agree: the status, and for a 200 whether it is ``ok`` or an ``error`` (messages differ on purpose),
plus what the case picks from it (a page number, modules read back, the allowed methods).

A case in :data:`DOCUMENTED` must instead **differ**, and the phrase beside it must be in docs/serve.md's
differences. So a new difference fails here until it is fixed or written down, and a documented one that went away
fails until its line is removed.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from gitops.standin.testing import ALICE, DEMO_ACCOUNTS, FULL_TOKEN, StandIn, running_standin
from tests.private.harness import PrivateServer, ServerUser
from tests.private.test_bots_in_game import give_world_object, ticking

pytestmark = pytest.mark.private_server

ROOT = Path(__file__).resolve().parents[2]
SERVE_DOC = ROOT / "docs" / "serve.md"
TIMEOUT = 5.0
#: Stands for each server's own token in a case's headers.
TOKEN = "<token>"
JSON = "application/json"
UPLOAD = json.dumps({"branch": "default", "modules": {"main": "a"}}).encode()


def upload(text: str) -> bytes:
    return json.dumps({"branch": "default", "modules": {"main": text}}, ensure_ascii=False).encode()


def modules(body: dict[str, Any]) -> Any:
    return body.get("modules")


def branch(body: dict[str, Any]) -> Any:
    return body.get("branch")


def page(body: dict[str, Any]) -> Any:
    return body.get("page")


def data(body: dict[str, Any]) -> Any:
    return body.get("data")


@dataclass(frozen=True)
class Step:
    method: str
    path: str
    content: bytes | None = None
    content_type: str | None = JSON
    headers: tuple[tuple[str, str], ...] = ()
    #: Send the server's own token (and, to the private server, ``X-Username``).
    auth: bool = True
    #: What else of a 200 JSON answer must agree.
    pick: Callable[[dict[str, Any]], Any] | None = None


@dataclass(frozen=True)
class Case:
    name: str
    steps: tuple[Step, ...] = field(default_factory=tuple)


def case(name: str, *steps: Step) -> Case:
    return Case(name, steps)


def post(path: str, content: bytes, content_type: str | None = JSON, **kwargs: Any) -> Step:
    return Step("POST", path, content, content_type, **kwargs)


def get(path: str, **kwargs: Any) -> Step:
    return Step("GET", path, None, None, **kwargs)


FORM = "application/x-www-form-urlencoded"
PAGES = ("2x", "-1", "0x10", "1e3", "abc", "%203", "3&page=4")
SEGMENTS = ("5,6", "1e1", "5.9", "100", "-1", "5&segment=6")
READ_BACK = get("/api/user/code?branch=default", pick=modules)
EMOJI = "\U0001f600"
DEEP_3000 = b"[" * 3000 + b"]" * 3000

CASES: tuple[Case, ...] = (
    # -- charsets, as body-parser and Node read them
    case("charset utf-8 upper case and quoted", post("/api/user/code", UPLOAD, 'application/json; charset="UTF-8"')),
    case("charset utf8", post("/api/user/code", UPLOAD, "application/json; charset=utf8")),
    case("charset utf-16", post("/api/user/code", upload("x").decode().encode("utf-16"), f"{JSON}; charset=utf-16")),
    case(
        "charset utf-16le",
        post("/api/user/code", upload("le \u00e9").decode().encode("utf-16-le"), f"{JSON}; charset=utf-16le"),
        READ_BACK,
    ),
    *(
        case(f"charset {name}", post("/api/user/code", upload("x").decode().encode(codec), f"{JSON}; charset={name}"))
        for name, codec in (("utf-16be", "utf-16-be"), ("utf-32", "utf-32"))
    ),
    case("charset iso-8859-1", post("/api/user/code", UPLOAD, f"{JSON}; charset=iso-8859-1")),
    case("a byte order mark", post("/api/user/code", b"\xef\xbb\xbf" + upload("bom")), READ_BACK),
    # -- what is not JSON, or not sent as JSON
    case("malformed content type", post("/api/user/code", UPLOAD, f"{JSON}; charset")),
    case("text/plain body", post("/api/user/code", UPLOAD, "text/plain")),
    case("form body", post("/api/user/code", b"branch=default&modules[main]=form", FORM), READ_BACK),
    case("bad utf-8", post("/api/user/code", b'{"branch":"default","modules":{"main":"a\xff\xfeb"}}'), READ_BACK),
    case("empty body", post("/api/user/code", b"")),
    case("white space body", post("/api/user/code", b"  ")),
    case("a bare string body", post("/api/user/code", b'"text"')),
    case("not json", post("/api/user/code", b"{")),
    case("nesting 500 deep", post("/api/user/memory", b'{"path":"d","value":' + b"[" * 500 + b"]" * 500 + b"}")),
    case("nesting 2000 deep", post("/api/user/memory", b'{"path":"d","value":' + b"[" * 2000 + b"]" * 2000 + b"}")),
    case("nesting 5000 deep", post("/api/user/memory", b'{"path":"d","value":' + b"[" * 5000 + b"]" * 5000 + b"}")),
    case("1e400", post("/api/user/memory", b'{"path":"x","value":1e400}')),
    case(
        "an upload nested 3000 deep",
        post("/api/user/code", b'{"branch":"default","modules":{"main":"deep"},"x":' + DEEP_3000 + b"}"),
        READ_BACK,
    ),
    # -- sizes and lengths as JavaScript counts them
    case("600 e-acute in the console", post("/api/user/console", json.dumps({"expression": "\u00e9" * 600}).encode())),
    case(
        "600,000 e-acute of memory",
        post("/api/user/memory", json.dumps({"path": "t", "value": "\u00e9" * 600_000}, ensure_ascii=False).encode()),
    ),
    case(
        "memory path through a number",
        post("/api/user/memory", b'{"path":"n","value":5}'),
        post("/api/user/memory", b'{"path":"n.b","value":1}'),
    ),
    case("memory path through nothing", post("/api/user/memory", b'{"path":"none.b","value":1}')),
    case("memory path __proto__", get("/api/user/memory?path=__proto__", pick=data)),
    case("memory path __proto__ written", post("/api/user/memory", b'{"path":"__proto__","value":1}')),
    case("a console expression that is a number", post("/api/user/console", b'{"expression":5}')),
    case("a console expression missing", post("/api/user/console", b"{}")),
    case(
        "a source branch of 16 emoji",
        post("/api/user/clone-branch", json.dumps({"branch": EMOJI * 16, "newName": "e16"}).encode()),
    ),
    case(
        "a source branch of 15 emoji",
        post("/api/user/clone-branch", json.dumps({"branch": EMOJI * 15, "newName": "e15"}).encode()),
    ),
    case("a new branch of 16 emoji", post("/api/user/clone-branch", json.dumps({"newName": EMOJI * 16}).encode())),
    case(
        "a clone from a 16 emoji branch to a new name",
        post("/api/user/clone-branch", json.dumps({"branch": EMOJI * 16, "newName": "from16"}).encode()),
        get("/api/user/code?branch=from16", pick=modules),
    ),
    case("set-active-branch without a branch", post("/api/user/set-active-branch", b'{"activeName":"activeWorld"}')),
    # -- routing as Express routes
    case("HEAD", Step("HEAD", "/api/user/code")),
    case("OPTIONS", Step("OPTIONS", "/api/user/code", auth=False)),
    case("path case", get("/API/User/Code", pick=branch)),
    case("repeated slashes", get("/api//user//code", pick=branch)),
    case("trailing slash", get("/api/user/code/", pick=branch)),
    case("a slash more after each mount", get("/api//user//code", pick=branch)),
    *(
        case(f"path {p}", get(p, pick=branch))
        for p in ("/api/user/code//", "/api///user/code", "//api/user/code", "/api/user/%63ode", "/api/%75ser/code")
    ),
    case("unknown route", get("/api/user/nope")),
    # -- query parameters as qs and parseInt read them
    case("branch given twice", get("/api/user/code?branch=default&branch=x")),
    case("branch as an array", get("/api/user/code?branch[]=default")),
    case("branch as an operator object", get("/api/user/code?branch[$ne]=x")),
    *(case(f"page {p!r}", get(f"/api/user/money-history?page={p}", pick=page)) for p in PAGES),
    *(case(f"segment {s!r}", get(f"/api/user/memory-segment?segment={s}")) for s in SEGMENTS),
    case("segment as a list", get("/api/user/memory-segment?segment[]=5")),
    case("segment of 23 digits", get("/api/user/memory-segment?segment=12345678901234567890123")),
    case(
        "segment of 23 digits written",
        post("/api/user/memory-segment", b'{"segment":12345678901234567890123,"data":"x"}'),
    ),
    case("segment true", post("/api/user/memory-segment", b'{"segment":true,"data":"x"}')),
    case("segment 1e-7", post("/api/user/memory-segment", b'{"segment":1e-7,"data":"x"}')),
    # -- credentials
    case(
        "X-Token twice",
        Step("GET", "/api/auth/me", auth=False, headers=(("X-Token", TOKEN), ("X-Token", TOKEN), ("X-Username", "u"))),
    ),
    case("no credentials", get("/api/user/code", auth=False)),
    # -- operator objects where the real server would write every branch
    case(
        "an operator object in set-active-branch",
        post("/api/user/set-active-branch", b'{"branch":{"$ne":"x"},"activeName":"activeSim"}'),
    ),
    case("an operator object in POST code", post("/api/user/code", b'{"branch":{"$ne":"x"},"modules":{"main":"op"}}')),
)

#: The cases whose answers differ on purpose, each with the phrase of docs/serve.md that says so.
DOCUMENTED: dict[str, str] = {
    "malformed content type": "a `Content-Type` that does not parse",
    "text/plain body": "A body without the media type `application/json`",
    "form body": "Form bodies",
    "nesting 2000 deep": "Nesting deeper than about 900 levels",
    "an upload nested 3000 deep": "Nesting deeper than about 900 levels",
    "set-active-branch without a branch": "`set-active-branch` without `branch`",
    "memory path __proto__": "`__proto__`, `constructor`",
    "a new branch of 16 emoji": "`clone-branch`: `newName` missing, empty, not a string, longer than 30",
    "branch as an operator object": "`branch` given twice, as a list or as an object",
    "an operator object in set-active-branch": "An object or array as `branch`",
    "an operator object in POST code": "An object or array as `branch`",
}

#: Socket behaviours that differ on purpose (see test_the_game_socket_answers_as_the_real_one).
SOCKET_DOCUMENTED = {
    "auth ok token over HTTP": "The token in `auth ok TOKEN`",
    "xhr": "SockJS's other transports, polling and streaming, are 404",
    "xhr without a session": "SockJS's other transports, polling and streaming, are 404",
}


@dataclass
class Side:
    name: str
    url: str
    token: str
    username: str | None  # sent as X-Username (the private server needs it)

    def headers(self, step: Step) -> list[tuple[str, str]]:
        headers = [(k, self.token if v == TOKEN else v) for k, v in step.headers]
        if step.auth:
            headers.append(("X-Token", self.token))
            if self.username is not None:
                headers.append(("X-Username", self.username))
        if step.content_type is not None:
            headers.append(("Content-Type", step.content_type))
        return headers


@dataclass
class Pair:
    private: ServerUser
    standin: StandIn

    def sides(self) -> tuple[Side, Side]:
        return (
            Side("private server", self.private.url, self.private.signin(), self.private.username),
            Side("stand-in", self.standin.url, FULL_TOKEN, None),
        )


@pytest.fixture(scope="module")
def pair(private_server: PrivateServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    user = private_server.register()
    data = tmp_path_factory.mktemp("differential") / "standin.sqlite3"
    with running_standin(DEMO_ACCOUNTS, data) as standin:
        standin.grant_unlimited(FULL_TOKEN)
        yield Pair(user, standin)


def view(step: Step, response: httpx.Response) -> tuple[Any, ...]:
    """What must agree: the status; for a 200 JSON answer ``ok``, ``error`` and the case's pick."""
    if step.method == "OPTIONS" and response.status_code == 200:
        return (200, frozenset(response.text.split(",")))
    if step.method == "HEAD":
        return (response.status_code, response.content)
    if response.status_code != 200:
        return (response.status_code,)  # error bodies differ in shape on purpose (docs/serve.md, "Error shapes")
    body = response.json()
    return (200, body.get("ok") == 1, "error" in body, step.pick(body) if step.pick else None)


def _send(side: Side, step: Step) -> tuple[Any, ...]:
    with httpx.Client(base_url=side.url, timeout=TIMEOUT) as http:
        response = http.request(step.method, step.path, content=step.content, headers=side.headers(step))
    return view(step, response)


@pytest.mark.parametrize("example", CASES, ids=[c.name for c in CASES])
def test_the_same_request_gets_the_same_answer(pair: Pair, example: Case) -> None:
    private, standin = pair.sides()
    seen = [(_send(private, step), _send(standin, step)) for step in example.steps]
    differs = any(a != b for a, b in seen)
    if example.name in DOCUMENTED:
        assert differs, f"{example.name}: the answers now agree; remove it from DOCUMENTED and docs/serve.md: {seen}"
    else:
        assert not differs, f"{example.name}: (private server, stand-in) answered {seen}"


def _raw_status(url: str, request: bytes) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=TIMEOUT) as raw:
        raw.sendall(request)
        return raw.recv(4096).split(b"\r\n", 1)[0]


def test_a_lower_case_method_is_a_bad_request_on_both(pair: Pair) -> None:
    request = b"get /api/version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    private, standin = (_raw_status(side.url, request) for side in pair.sides())
    assert private.split()[:2] == standin.split()[:2] == [b"HTTP/1.1", b"400"]


def _recv(ws: ClientConnection) -> str:
    message = ws.recv(timeout=TIMEOUT)
    assert isinstance(message, str)
    return message


def _close_of(ws: ClientConnection) -> tuple[int, str] | None:
    """The code and reason the server closes ``ws`` with (within five messages), ``None`` if it does not."""
    try:
        for _ in range(5):
            ws.recv(timeout=TIMEOUT)
    except ConnectionClosed as closed:
        return None if closed.rcvd is None else (closed.rcvd.code, closed.rcvd.reason)
    return None


def _socket_answers(side: Side) -> dict[str, Any]:
    """What one server's game socket and SockJS endpoints answer."""
    ws_url = "ws" + side.url.removeprefix("http") + "/socket"
    found: dict[str, Any] = {}
    with connect(ws_url + "/websocket", open_timeout=TIMEOUT) as ws:
        greeting = [_recv(ws).split()[0], _recv(ws)]
        ws.send("auth " + side.token)
        answer = _recv(ws)
        found["greeting"] = greeting
        found["auth"] = answer.split()[:2]
        new_token = answer.split()[-1]
    with connect(ws_url + "/websocket", open_timeout=TIMEOUT) as ws:
        _recv(ws), _recv(ws)
        ws.send("auth not-a-token")
        found["bad auth"] = _recv(ws)
    for path in ("/websocket/", "/123/abcdefgh/websocket", "/123/abcdefgh/websocket/"):
        with connect(ws_url + path, open_timeout=TIMEOUT) as ws:
            found[f"opens {path}"] = _recv(ws)[:1]
    with connect(ws_url + "/123/abcdefgh/websocket", open_timeout=TIMEOUT) as ws:
        _recv(ws), _recv(ws), _recv(ws)  # o, time, protocol
        ws.send("not json")
        found["broken framing"] = _close_of(ws)
    with httpx.Client(base_url=side.url, timeout=TIMEOUT) as http:
        info = http.get("/socket/info")
        found["info"] = (info.status_code, sorted(info.json()), info.json()["websocket"])
        found["greeting page"] = http.get("/socket/").text
        xhr = http.post("/socket/123/abcdefgh/xhr")  # SockJS's polling transport: opens a session there
        found["xhr"] = (xhr.status_code, xhr.text)
        found["xhr without a session"] = http.get("/socket/123/abcdefgh/xhr").status_code
        me = http.get("/api/auth/me", headers={"X-Token": new_token, "X-Username": side.username or "x"})
        found["auth ok token over HTTP"] = me.status_code
    return found


def test_the_game_socket_answers_as_the_real_one(pair: Pair) -> None:
    private_side, standin_side = pair.sides()
    private, standin = _socket_answers(private_side), _socket_answers(standin_side)
    assert private.keys() == standin.keys()
    for key in private:
        if key in SOCKET_DOCUMENTED:
            assert private[key] != standin[key], f"{key}: now agree ({private[key]!r}); update SOCKET_DOCUMENTED"
        else:
            assert private[key] == standin[key], f"{key}: private server {private[key]!r}, stand-in {standin[key]!r}"
    assert standin["greeting"] == ["time", "protocol 14"]
    assert standin["broken framing"] == (3000, "Broken framing.")


def test_every_documented_difference_is_in_docs_serve_md() -> None:
    text = " ".join(SERVE_DOC.read_text(encoding="utf-8").split())
    differences = text[text.index("## Differences from the private server") :]
    missing = [p for p in {**DOCUMENTED, **SOCKET_DOCUMENTED}.values() if p not in differences]
    assert not missing, f"docs/serve.md's differences do not mention: {missing}"
    assert set(DOCUMENTED) <= {c.name for c in CASES}


#: A bot that logs every tick: the console and cpu channels of its user then carry a message each tick.
LOGGER = "module.exports.loop = function () { console.log('tick ' + Game.time); };"
#: (sent before subscribing, sent after subscribing): no auth at all, a failed auth after, a failed auth before.
AUTH_ORDERS = ((None, None), (None, "auth not-a-token"), ("auth not-a-token", None))


def _channel_messages(ws_url: str, user_id: str, before: str | None, after: str | None) -> list[str]:
    """The messages of ``user_id``'s console and cpu channels a socket receives within 4 s of subscribing to them,
    sending ``before`` and ``after`` around the subscriptions."""
    got: list[str] = []
    with connect(ws_url, open_timeout=TIMEOUT) as ws:
        _recv(ws), _recv(ws)  # time, protocol
        if before is not None:
            ws.send(before)
            assert _recv(ws).startswith("auth ")  # failed, or ok for the good token
        ws.send(f"subscribe user:{user_id}/console")
        ws.send(f"subscribe user:{user_id}/cpu")
        if after is not None:
            ws.send(after)
        with contextlib.suppress(TimeoutError):
            end = time.monotonic() + 4
            while time.monotonic() < end:
                message = ws.recv(timeout=max(0.1, end - time.monotonic()))
                assert isinstance(message, str)
                got.append(message)
    return [m for m in got if m.startswith(f'["user:{user_id}/')]


def test_the_console_and_cpu_channels_need_a_good_auth_on_the_stand_in_only(tmp_path: Path) -> None:
    # Measured: the private server sends a user's console and cpu to any socket that subscribes, signed in or not
    # (its flaw: anyone who knows a user id reads that player's console). The stand-in does not copy it, and
    # docs/serve.md says so.
    assert "subscribes without a good `auth`" in " ".join(SERVE_DOC.read_text(encoding="utf-8").split())
    with ticking() as server:
        user = server.register()
        give_world_object(server, user.username)
        code = {"branch": "default", "modules": {"main": LOGGER}}
        assert user.request("POST", "/api/user/code", json=code).is_success
        user_id = user.request("GET", "/api/auth/me").json()["_id"]
        ws_url = "ws" + server.url.removeprefix("http") + "/socket/websocket"
        for before, after in AUTH_ORDERS:
            real = _channel_messages(ws_url, user_id, before, after)
            assert any("/console" in m for m in real), (before, after, real)
            assert any("/cpu" in m for m in real), (before, after, real)
    with running_standin(DEMO_ACCOUNTS, tmp_path / "standin.sqlite3") as standin:
        standin.set_tick_seconds(0.2)
        account = standin.app.accounts.user(ALICE)
        assert account is not None
        for before, after in AUTH_ORDERS:
            assert _channel_messages(standin.socket_url, account.user_id, before, after) == [], (before, after)
        # The same socket with a good auth first receives both channels: the silence above is the refusal.
        signed_in = _channel_messages(standin.socket_url, account.user_id, f"auth {FULL_TOKEN}", None)
        assert any("/console" in m for m in signed_in)
        assert any("/cpu" in m for m in signed_in)
