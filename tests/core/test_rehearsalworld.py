"""The world's start, the same for head and base (``gitops.core.rehearsalworld``): on a database of the npm server's
shape."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gitops.core.rehearsalworld import (
    ROOM_STATUS,
    WAITING_TICK_MS,
    Placement,
    WorldShapeError,
    free_rooms,
    idle_players,
    paused_at_start,
    placements,
    seed_world_data,
    spawn_place,
    world_start,
)

PLAIN = "0" * 2500


def _terrain(walls: set[tuple[int, int]]) -> str:
    return "".join("1" if (i % 50, i // 50) in walls else "0" for i in range(2500))


def _db(rooms: dict[str, Any]) -> dict[str, Any]:
    """A LokiJS database as the npm server's ``db.json``: rooms, their terrain and objects, the env document."""
    objects: list[dict[str, Any]] = []
    for name, room in rooms.items():
        objects.append({"room": name, "type": "controller", "x": room["controller"][0], "y": room["controller"][1],
                        **({"user": "u1"} if room.get("owned") else {})})  # fmt: skip
        objects += [{"room": name, "type": "source", "x": x, "y": y, "energy": 3000} for x, y in room["sources"]]
        objects += [{"room": name, "type": "mineral", "x": x, "y": y, "mineralType": room.get("mineral", "H"),
                     "density": 3} for x, y in room.get("minerals", [(40, 40)])]  # fmt: skip
    return {
        "collections": [
            {
                "name": "rooms",
                "data": [
                    {"_id": n, "status": "normal", "sourceKeepers": r.get("keepers", False)} for n, r in rooms.items()
                ],
            },
            {
                "name": "rooms.terrain",
                "data": [{"room": n, "terrain": r.get("terrain", PLAIN)} for n, r in rooms.items()],
            },
            {"name": "rooms.objects", "data": objects},
            {"name": "env", "data": [{"data": {"gameTime": 1}}]},
        ]
    }


def _collection(db: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return next(c["data"] for c in db["collections"] if c["name"] == name)


def test_the_bots_rooms_are_free_rooms_in_order_with_a_spawn_place_each_the_same_every_time() -> None:
    walls = {(x, 20) for x in range(10, 40)}
    rooms = {
        "W1N1": {"controller": (25, 10), "sources": [(10, 30), (40, 30)], "terrain": _terrain(walls)},
        "W1N2": {"controller": (5, 5), "sources": [(1, 1)]},  # every other room is skipped (neighbours)
        "W1N3": {"controller": (7, 7), "sources": [(20, 40)]},
        "W1N4": {"controller": (9, 9), "sources": [(2, 2), (3, 3)]},
        "W1N5": {"controller": (30, 30), "sources": [(5, 45), (45, 5)], "mineral": "O"},
        "W1N7": {"controller": (12, 12), "sources": [(30, 12), (44, 44)], "keepers": True},
        "W1N9": {"controller": (8, 40), "sources": [(3, 3), (46, 46)], "owned": True},
    }
    db = _db(rooms)
    before = json.dumps(db, sort_keys=True)
    assert free_rooms(db) == ["W1N1", "W1N3", "W1N5"]
    chosen = placements(db, 2)
    assert [p.room for p in chosen] == ["W1N1", "W1N3"]
    x, y = chosen[0].spawn
    assert _terrain(walls)[y * 50 + x] == "0"
    assert all(max(abs(x - ox), abs(y - oy)) > 1 for ox, oy in [(25, 10), (10, 30), (40, 30), (40, 40)])
    assert placements(_db(rooms), 2) == chosen  # the same database, the same start: head's world and base's
    assert json.dumps(db, sort_keys=True) == before  # choosing changes nothing
    assert chosen[1] == Placement("W1N3", chosen[1].spawn)
    with pytest.raises(WorldShapeError, match="3 free rooms for 4 bots"):
        placements(db, 4)


def test_the_room_status_data_is_seeded_as_the_server_computes_it() -> None:
    db = _db({"W1N1": {"controller": (25, 10), "sources": [(10, 30)]}})
    seed_world_data(db)
    env = _collection(db, "env")[0]["data"]
    assert json.loads(env["roomStatusData"]) == ROOM_STATUS == {"novice": {}, "respawn": {}, "closed": {}}
    assert env["gameTime"] == 1


def test_the_spawn_place_keeps_clear_of_walls_edges_and_the_rooms_objects() -> None:
    walls = {(x, y) for x in range(50) for y in range(50) if x < 20}
    x, y = spawn_place(_terrain(walls), [(30, 30)])
    assert x >= 21  # no wall within 1
    assert max(abs(x - 30), abs(y - 30)) == 2  # next to the object is taken; the nearest beyond it
    with pytest.raises(WorldShapeError, match="no place for a spawn"):
        spawn_place("1" * 2500, [])


def test_the_default_worlds_ai_players_are_idle_and_their_rooms_stay_as_they_were() -> None:
    rooms = {
        "W1N1": {"controller": (25, 10), "sources": [(10, 30)], "owned": True},  # owned by the AI player u1
        "W1N3": {"controller": (7, 7), "sources": [(20, 40)]},
    }
    db = _db(rooms)
    _collection(db, "rooms")[0]["active"] = True
    _collection(db, "rooms")[1]["active"] = True
    db["collections"].append(
        {
            "name": "users",
            "data": [
                {"_id": "2", "username": "Invader", "active": 1, "cpu": 0},
                {"_id": "u1", "username": "MichaelBot", "bot": "simplebot", "active": True, "cpu": 100},
            ],
        }
    )
    objects = json.dumps(_collection(db, "rooms.objects"), sort_keys=True)
    assert idle_players(db) == ["u1"]
    users = {u["_id"]: u for u in _collection(db, "users")}
    assert users["u1"]["active"] == 0  # the engine runs users that are active and have CPU: not this one
    assert users["2"]["active"] == 1  # the server's own NPC users are not players
    assert [r.get("active") for r in _collection(db, "rooms")] == [False, True]  # its room is not processed
    assert json.dumps(_collection(db, "rooms.objects"), sort_keys=True) == objects  # its controller stays its own
    assert free_rooms(db) == ["W1N3"]  # and its room is not a bot's
    _collection(db, "env")[0]["data"]["activeRooms"] = ["W1N1", "W1N3"]  # a database of version 9
    idle_players(db)
    assert _collection(db, "env")[0]["data"]["activeRooms"] == ["W1N3"]


def test_the_world_starts_paused_and_looks_often_whether_it_was_resumed() -> None:
    db = _db({"W1N1": {"controller": (25, 10), "sources": [(10, 30)]}})
    paused_at_start(db)
    env = _collection(db, "env")[0]["data"]
    assert env["mainLoopPaused"] == "1"  # as system.pauseSimulation() writes it: no tick before the bots are seeded
    assert env["tickRate"] == WAITING_TICK_MS == 25  # not the default 1000 ms: the first tick comes soon after
    assert env["gameTime"] == 1


def test_the_worlds_start_is_its_data_nobody_else_playing_and_paused() -> None:
    db = _db({"W1N1": {"controller": (25, 10), "sources": [(10, 30)], "owned": True}})
    db["collections"].append({"name": "users", "data": [{"_id": "u1", "bot": "simplebot", "active": True, "cpu": 9}]})
    world_start(db)
    env = _collection(db, "env")[0]["data"]
    assert json.loads(env["roomStatusData"]) == ROOM_STATUS
    assert _collection(db, "users")[0]["active"] == 0
    assert env["mainLoopPaused"] == "1"
