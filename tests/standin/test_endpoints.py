"""The other endpoints of the limit table: small but real behaviour, so that their limits and scopes are real."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gitops.standin.testing import BOB_TOKEN, FULL_TOKEN, StandIn
from tests.standin.helpers import JSON_TYPE, SAMPLE_REQUESTS, client, send


@pytest.fixture
def http(standin: StandIn) -> Iterator[httpx.Client]:
    standin.grant_unlimited(FULL_TOKEN)
    with client(standin, FULL_TOKEN) as c:
        yield c


def _memory(answer: httpx.Response) -> Any:
    body = answer.json()
    assert body["ok"] == 1
    data = body["data"]
    assert data.startswith("gz:")
    return json.loads(gzip.decompress(base64.b64decode(data[3:])))


@pytest.mark.parametrize("endpoint", sorted(SAMPLE_REQUESTS))
def test_every_limited_endpoint_answers_ok_json(http: httpx.Client, endpoint: str) -> None:
    answer = send(http, endpoint)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == JSON_TYPE
    assert answer.json()["ok"] == 1


def test_memory_is_stored_and_returned_by_path(http: httpx.Client) -> None:
    assert _memory(http.get("/api/user/memory")) == {}
    # As `Memory['creeps']['h1']['role'] = ...` in the game: the objects on the path must exist.
    http.post("/api/user/memory", json={"path": "creeps", "value": {"h1": {}}})
    answer = http.post("/api/user/memory", json={"path": "creeps.h1.role", "value": "harvester"})
    assert answer.json()["ok"] == 1
    http.post("/api/user/memory", json={"path": "rooms", "value": ["W1N1"]})
    assert _memory(http.get("/api/user/memory")) == {"creeps": {"h1": {"role": "harvester"}}, "rooms": ["W1N1"]}
    assert _memory(http.get("/api/user/memory", params={"path": "creeps.h1"})) == {"role": "harvester"}
    assert _memory(http.get("/api/user/memory", params={"path": "rooms.0"})) == "W1N1"
    # An undefined value has no 'data'; a property of undefined is the real server's text answer.
    assert http.get("/api/user/memory", params={"path": "nothing"}).json() == {"ok": 1}
    assert http.get("/api/user/memory", params={"path": "nothing.deeper"}).json() == {
        "ok": 1,
        "data": "Incorrect memory path",
    }
    # Without a value the path is deleted; without a path the whole memory is replaced.
    http.post("/api/user/memory", json={"path": "creeps.h1"})
    assert _memory(http.get("/api/user/memory", params={"path": "creeps"})) == {}
    http.post("/api/user/memory", json={"value": {"fresh": True}})
    assert _memory(http.get("/api/user/memory")) == {"fresh": True}
    assert _memory(http.get("/api/user/memory", params={"shard": "shard1"})) == {}


def test_memory_errors(http: httpx.Client) -> None:
    assert http.post("/api/user/memory", json={"value": "x" * (1024 * 1024)}).json() == {
        "error": "memory size is too large"
    }
    http.post("/api/user/memory", json={"path": "a", "value": 5})
    # A path through a number or through nothing: accepted as on the real server, whose tick then fails to apply
    # it (`Memory['a']['b'] = 1`), so nothing changes.
    for path in ("a.b", "nothing.b"):
        assert http.post("/api/user/memory", json={"path": path, "value": 1}).json()["ok"] == 1
    assert _memory(http.get("/api/user/memory")) == {"a": 5}
    assert http.post("/api/user/memory", json={"path": 5, "value": 1}).json()["error"].startswith("invalid params")
    assert http.get("/api/user/memory", params={"shard": "../etc"}).json()["error"].startswith("invalid params")


def test_memory_segments_are_stored_per_user(http: httpx.Client, standin: StandIn) -> None:
    # A segment never written: no 'data' at all, as the private server answers (python screepsapi relies on it).
    assert http.get("/api/user/memory-segment", params={"segment": "3"}).json() == {"ok": 1}
    assert http.post("/api/user/memory-segment", json={"segment": "3", "data": "three"}).json() == {"ok": 1}
    assert http.get("/api/user/memory-segment", params={"segment": "3"}).json() == {"ok": 1, "data": "three"}
    with client(standin, BOB_TOKEN) as bob:
        assert bob.get("/api/user/memory-segment", params={"segment": "3"}).json() == {"ok": 1}
    limit = 100 * 1024
    assert http.post("/api/user/memory-segment", json={"segment": 4, "data": "x" * limit}).json() == {"ok": 1}
    assert http.post("/api/user/memory-segment", json={"segment": 4, "data": "x" * (limit + 1)}).json() == {
        "error": "length limit exceeded"
    }


@pytest.mark.parametrize(
    "segment", ["", "abc", "-1", "100", "0x64", " x1", "e", "9" * 5000, "0x" + "f" * 5000, "12345678901234567890123"]
)
def test_bad_segment_numbers(http: httpx.Client, segment: str) -> None:
    assert http.get("/api/user/memory-segment", params={"segment": segment}).json() == {"error": "invalid segment ID"}


@pytest.mark.parametrize(
    ("segment", "read"),
    [("5,6", 5), ("5", 5), (" 7", 7), ("1.5", 1), ("0x1f", 31), ("12abc", 12), ("-0", 0), ("0" * 5000 + "9", 9)],
)
def test_segment_numbers_are_read_as_the_private_server_reads_them(http: httpx.Client, segment: str, read: int) -> None:
    # parseInt(segment): "5,6" is the list form node-screeps-api's CLI sends; the private server reads segment 5.
    assert http.post("/api/user/memory-segment", json={"segment": read, "data": f"seg{read}"}).json() == {"ok": 1}
    assert http.get("/api/user/memory-segment", params={"segment": segment}).json() == {"ok": 1, "data": f"seg{read}"}


@pytest.mark.parametrize(
    ("segment", "read"),
    # 23 digits are a double there, "1.2345678901234568e+22" as text: segment 1 (measured on the private server).
    [("5,6", 5), (1.5, 1), ([8, 9], 8), ("0x10", 16), (12345678901234567890123, 1)],
)
def test_segment_numbers_on_write_are_read_as_the_private_server_reads_them(
    http: httpx.Client, segment: object, read: int
) -> None:
    assert http.post("/api/user/memory-segment", json={"segment": segment, "data": "w"}).json() == {"ok": 1}
    assert http.get("/api/user/memory-segment", params={"segment": str(read)}).json() == {"ok": 1, "data": "w"}


@pytest.mark.parametrize("segment", [None, -1, 100, True, "x", [], {"n": 1}])
def test_bad_segment_numbers_on_write(http: httpx.Client, segment: object) -> None:
    answer = http.post("/api/user/memory-segment", json={"segment": segment, "data": "x"})
    assert answer.status_code == 200
    assert answer.json() == {"error": "invalid segment ID"}


def test_console(http: httpx.Client) -> None:
    answer = http.post("/api/user/console", json={"expression": "Game.time"}).json()
    assert answer["ok"] == 1
    assert answer["result"] == {"ok": 1, "n": 1}
    assert answer["ops"][0]["expression"] == "Game.time"
    assert http.post("/api/user/console", json={"expression": "x" * 1100}).json() == {
        "error": "expression size is too large"
    }
    # As the real server (measured): any JSON value is stored, only a missing one fails, on its length.
    for value in (5, True, None, {"a": 1}):
        assert http.post("/api/user/console", json={"expression": value}).json()["ops"][0]["expression"] == value
    assert http.post("/api/user/console", json={}).json() == {
        "error": "TypeError: Cannot read properties of undefined (reading 'length')"
    }


def test_room_terrain(http: httpx.Client) -> None:
    encoded = http.get("/api/game/room-terrain", params={"room": "W7N3", "encoded": "1"}).json()
    [terrain] = encoded["terrain"]
    assert terrain["room"] == "W7N3"
    assert len(terrain["terrain"]) == 2500
    assert set(terrain["terrain"]) <= {"0", "1", "2"}
    again = http.get("/api/game/room-terrain", params={"room": "W7N3", "encoded": "1"}).json()
    assert again == encoded  # a room's terrain never changes
    tiles = http.get("/api/game/room-terrain", params={"room": "W7N3"}).json()["terrain"]
    assert {t["type"] for t in tiles} <= {"wall", "swamp"}
    walls = sum(1 for c in terrain["terrain"] if c == "1")
    assert sum(1 for t in tiles if t["type"] == "wall") == walls
    assert http.get("/api/game/room-terrain", params={"room": "nowhere"}).json() == {"error": "invalid room"}


def test_map_stats(http: httpx.Client) -> None:
    answer = http.post("/api/game/map-stats", json={"rooms": ["W1N1", "E2S3"], "statName": "owner0"}).json()
    assert answer["ok"] == 1
    assert sorted(answer["stats"]) == ["E2S3", "W1N1"]
    assert (
        http.post("/api/game/map-stats", json={"rooms": "W1N1", "statName": "owner0"})
        .json()["error"]
        .startswith("invalid params")
    )


def test_market_and_money_history(http: httpx.Client) -> None:
    assert http.get("/api/game/market/orders-index").json() == {"ok": 1, "list": [{"_id": "energy", "count": 0}]}
    assert http.get("/api/game/market/orders", params={"resourceType": "energy"}).json() == {"ok": 1, "list": []}
    assert http.get("/api/game/market/my-orders").json() == {"ok": 1, "list": []}
    assert http.get("/api/game/market/stats", params={"resourceType": "energy"}).json() == {"ok": 1, "stats": []}
    assert http.get("/api/game/user/money-history", params={"page": "2"}).json() == {
        "ok": 1,
        "page": 2,
        "list": [],
        "hasMore": False,
    }


def test_version_needs_no_authentication(standin: StandIn) -> None:
    with client(standin) as c:
        answer = c.get("/api/version").json()
    assert answer["ok"] == 1
    assert answer["standin"] is True


@pytest.mark.parametrize(
    ("method", "path"), [("GET", "/api/nope"), ("PUT", "/api/user/code"), ("DELETE", "/"), ("GET", "/socket/xhr")]
)
def test_unknown_routes_get_a_json_404(http: httpx.Client, method: str, path: str) -> None:
    answer = http.request(method, path)
    assert answer.status_code == 404
    assert answer.headers["content-type"] == JSON_TYPE
    assert answer.json()["error"].startswith("no such endpoint")


def test_control_routes_exist_only_in_testing_mode(standin: StandIn) -> None:
    with client(standin) as c:
        assert c.get("/__standin__/now").json() == {"ok": 1, "now": standin.clock.now()}
    standin.app.testing = False
    try:
        with client(standin) as c:
            assert c.get("/__standin__/now").status_code == 404
    finally:
        standin.app.testing = True
