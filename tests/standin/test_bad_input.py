"""Bad input never gets a 500: each gets a clear error, with the real server's status where it has one."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import httpx
import pytest

from gitops.standin.app import MAX_BODY
from gitops.standin.endpoints import ENDPOINTS
from gitops.standin.testing import FULL_TOKEN, StandIn
from tests.standin.helpers import JSON_TYPE, client

JSON_HEADERS = {"Content-Type": "application/json; charset=utf-8"}


@pytest.fixture
def http(standin: StandIn) -> Iterator[httpx.Client]:
    standin.grant_unlimited(FULL_TOKEN)
    with client(standin, FULL_TOKEN) as c:
        yield c


def _post(http: httpx.Client, body: bytes | str, path: str = "/api/user/code", **headers: str) -> httpx.Response:
    return http.post(path, content=body, headers={**JSON_HEADERS, **headers})


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"{",
        b'{"modules": {"main": "x"}',
        b"\xff\xfe{}",
        b"NaN",
        b'{"a": Infinity}',
        b"  ",
        b'"text"',
        b"5",
    ],
)
def test_a_body_that_is_not_json_gets_400(http: httpx.Client, body: bytes) -> None:
    answer = _post(http, body)
    assert answer.status_code == 400
    assert answer.headers["content-type"] == JSON_TYPE
    assert answer.json()["error"].startswith("the request body is not valid JSON")


def test_a_body_sent_as_another_type_gets_415(http: httpx.Client) -> None:
    body = json.dumps({"branch": "default", "modules": {"main": "x"}})
    for content_type in ("text/plain", "application/x-www-form-urlencoded"):
        answer = http.post("/api/user/code", content=body, headers={"Content-Type": content_type})
        assert answer.status_code == 415
        assert "Content-Type: application/json" in answer.json()["error"]
    assert http.post("/api/user/code", content=body).status_code == 415  # no Content-Type at all


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "invalid params: the body must be a JSON object"),
        ({}, "invalid params: 'modules' must be an object that maps module names to source text"),
        ({"modules": None}, "invalid params: 'modules' must be an object that maps module names to source text"),
        ({"modules": ["main"]}, "invalid params: 'modules' must be an object that maps module names to source text"),
        ({"branch": 5, "modules": {}}, "invalid params: 'branch' must be a string"),
        ({"modules": {"main": 5}}, "invalid module: module 'main' is neither a string nor {'binary': base64}"),
        ({"modules": {"main": None}}, "invalid module: module 'main' is neither a string nor {'binary': base64}"),
        ({"modules": {"w": {"binary": 5}}}, "invalid module: module 'w' is neither a string nor {'binary': base64}"),
        ({"modules": {"w": {"text": "x"}}}, "invalid module: module 'w' is neither a string nor {'binary': base64}"),
    ],
)
def test_a_wrong_shape_gets_a_logical_error(http: httpx.Client, body: object, message: str) -> None:
    answer = _post(http, json.dumps(body))
    assert answer.status_code == 200
    assert answer.headers["content-type"] == JSON_TYPE
    assert answer.json() == {"error": message}


def test_a_rejected_upload_changes_nothing(standin: StandIn, http: httpx.Client) -> None:
    http.post("/api/user/code", json={"branch": "default", "modules": {"main": "before", "lib": "kept"}})
    _post(http, json.dumps({"branch": "default", "modules": {"main": "after", "bad": 1}}))
    assert standin.branch_modules("alice", "default") == {"main": "before", "lib": "kept"}


def test_a_huge_body_gets_413_without_being_read(http: httpx.Client) -> None:
    huge = b'{"modules":{"main":"' + b"x" * MAX_BODY + b'"}}'
    answer = _post(http, huge)
    assert answer.status_code == 413
    # As the private server's body parser answers (without its stack trace).
    assert answer.headers["content-type"] == "text/html; charset=utf-8"
    assert "<pre>PayloadTooLargeError: request entity too large</pre>" in answer.text


def test_a_huge_chunked_body_gets_413(http: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"modules":{"main":"'
        for _ in range(MAX_BODY // 65536 + 2):
            yield b"x" * 65536

    try:
        answer = http.post("/api/user/code", content=chunks(), headers=JSON_HEADERS)
    except httpx.TransportError:
        return  # the server may close before the client has sent everything; either way no 500
    assert answer.status_code == 413


def test_a_declared_huge_body_gets_413_at_once(standin: StandIn) -> None:
    host, port = standin.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /api/user/code HTTP/1.1\r\nHost: x\r\nX-Token: " + FULL_TOKEN.encode() + b"\r\n"
            b"Content-Type: application/json\r\nContent-Length: 999999999\r\n\r\n{"
        )
        head = sock.recv(65536)
    assert head.startswith(b"HTTP/1.1 413 ")


def test_an_unknown_token_gets_401(http: httpx.Client) -> None:
    answer = http.get("/api/user/branches", headers={"X-Token": "0" * 32})
    assert answer.status_code == 401
    assert answer.json() == {"error": "unauthorized"}


def test_query_string_with_too_many_fields_gets_400(http: httpx.Client) -> None:
    answer = http.get("/api/user/code?" + "&".join(f"a{i}=1" for i in range(500)))
    assert answer.status_code == 400
    assert answer.json()["error"].startswith("the query string")


_BAD_BODIES: list[bytes] = [
    b"",
    b"null",
    b"[]",
    b'"text"',
    b"12",
    b"{}",
    b'{"branch": {}, "newName": [], "activeName": 1, "modules": "x", "segment": {}, "data": 1, "path": []}',
    b'{"branch": null, "newName": null, "value": null, "expression": null, "rooms": null, "token": 5}',
    b'{"defaultModules": [], "newName": "n", "statName": 1, "rooms": [1, 2]}',
    b'{"rooms": ["W1N1"], "statName": "owner0", "shard": 5}',
]
_BAD_QUERIES: list[dict[str, str]] = [
    {},
    {"branch": ""},
    {"branch": "$"},
    {"segment": "", "room": "", "path": "..", "page": "-1", "shard": "", "token": ""},
    {"segment": "99999999999999999999", "room": "W99999N1", "path": "a" * 10000, "page": "9" * 50},
    {"_token": "", "encoded": "1", "resourceType": "\x00"},
]


@pytest.mark.parametrize("key", sorted(ENDPOINTS))
def test_no_endpoint_answers_500_to_bad_input(http: httpx.Client, key: str) -> None:
    method, path = key.split(" ", 1)
    for params in _BAD_QUERIES:
        for body in _BAD_BODIES if method == "POST" else [b""]:
            answer = http.request(method, path, params=params, content=body, headers=JSON_HEADERS)
            assert answer.status_code < 500, (key, params, body, answer.text)
            if answer.headers["content-type"] == JSON_TYPE:
                parsed = answer.json()
                assert ("ok" in parsed) != ("error" in parsed), (key, params, body, answer.text)
