"""The reads of a colony (``rehearse --from-server``) as the real servers answer them: the owned rooms (overview),
a room's objects, the game time."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from gitops.standin.testing import ALICE, BOB_TOKEN, FULL_TOKEN, StandIn
from tests.standin.helpers import client


@pytest.fixture
def http(standin: StandIn) -> Iterator[httpx.Client]:
    with client(standin, FULL_TOKEN) as c:
        yield c


def alice_id(http: httpx.Client) -> str:
    user_id: str = http.get("/api/auth/me").json()["_id"]
    return user_id


def test_the_overview_lists_owned_rooms_highest_level_first(http: httpx.Client, standin: StandIn) -> None:
    me = alice_id(http)
    standin.set_colony(
        {
            "W1N1": [{"_id": "c1", "type": "controller", "x": 1, "y": 1, "room": "W1N1", "user": me, "level": 2}],
            "W2N2": [{"_id": "c2", "type": "controller", "x": 1, "y": 1, "room": "W2N2", "user": me, "level": 6}],
            "W3N3": [{"_id": "c3", "type": "controller", "x": 1, "y": 1, "room": "W3N3", "user": "other"}],
        }
    )
    answer = http.get("/api/user/overview", params={"interval": "8", "statName": "energyHarvested"}).json()
    assert answer["ok"] == 1
    assert answer["rooms"] == ["W2N2", "W1N1"]
    assert set(answer) >= {"stats", "statsMax", "totals", "gametimes"}  # the private server's keys
    with client(standin, BOB_TOKEN) as bob:
        assert bob.get("/api/user/overview").json()["rooms"] == []
    assert httpx.get(standin.url + "/api/user/overview").status_code == 401


def test_room_objects_are_every_object_of_the_room(http: httpx.Client, standin: StandIn) -> None:
    objects = [{"_id": "s", "type": "source", "x": 5, "y": 5, "room": "W1N1", "energy": 3000}]
    standin.set_colony({"W1N1": objects}, time=4321)
    answer = http.get("/api/game/room-objects", params={"room": "W1N1"}).json()
    assert answer == {"ok": 1, "objects": objects, "users": {}}
    assert http.get("/api/game/room-objects", params={"room": "W9N9"}).json()["objects"] == []
    bad = http.get("/api/game/room-objects", params={"room": "nowhere"})
    assert bad.status_code == 200
    assert bad.json() == {"error": "invalid room"}
    assert httpx.get(standin.url + "/api/game/time").json() == {"ok": 1, "time": 4321}  # no login needed
    assert standin.count("GET /api/game/room-objects", ALICE) == 3
