"""The world's like-for-like start (``gitops.core.rehearsalworld``): on a database of the npm server's shape."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gitops.core.rehearsalworld import ROOM_STATUS, WorldShapeError, free_rooms, spawn_place, twin_rooms

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


def test_the_rooms_get_the_templates_terrain_objects_and_one_spawn_place() -> None:
    walls = {(x, 20) for x in range(10, 40)}
    rooms = {
        "W1N1": {"controller": (25, 10), "sources": [(10, 30), (40, 30)], "terrain": _terrain(walls)},
        "W1N2": {"controller": (5, 5), "sources": [(1, 1)]},  # every other room is skipped (neighbours)
        "W1N3": {"controller": (7, 7), "sources": [(20, 40)]},  # one source: not like the template
        "W1N4": {"controller": (9, 9), "sources": [(2, 2), (3, 3)]},
        "W1N5": {"controller": (30, 30), "sources": [(5, 45), (45, 5)], "mineral": "O"},
        "W1N7": {"controller": (12, 12), "sources": [(30, 12), (44, 44)], "keepers": True},
        "W1N9": {"controller": (8, 40), "sources": [(3, 3), (46, 46)], "owned": True},
    }
    db = _db(rooms)
    assert free_rooms(db) == ["W1N1", "W1N3", "W1N5"]
    twins = twin_rooms(db, 2)
    assert twins.rooms == ("W1N1", "W1N5")
    terrain = {t["room"]: t["terrain"] for t in _collection(db, "rooms.terrain")}
    assert terrain["W1N5"] == terrain["W1N1"] == _terrain(walls)
    assert terrain["W1N3"] == PLAIN  # untouched
    placed = {(o["room"], o["type"], o["x"], o["y"]) for o in _collection(db, "rooms.objects")}
    for kind, x, y in [("controller", 25, 10), ("source", 10, 30), ("source", 40, 30), ("mineral", 40, 40)]:
        assert ("W1N5", kind, x, y) in placed
    [mineral] = [o for o in _collection(db, "rooms.objects") if o["room"] == "W1N5" and o["type"] == "mineral"]
    assert mineral["mineralType"] == "H"
    assert json.loads(_collection(db, "env")[0]["data"]["roomStatusData"]) == ROOM_STATUS
    x, y = twins.spawn
    assert terrain["W1N1"][y * 50 + x] == "0"
    assert twin_rooms(_db(rooms), 2) == twins  # deterministic


def test_a_world_without_enough_like_rooms_says_so() -> None:
    db = _db({"W1N1": {"controller": (25, 10), "sources": [(10, 30)]},
              "W1N3": {"controller": (5, 5), "sources": [(1, 1), (2, 2)]}})  # fmt: skip
    with pytest.raises(WorldShapeError, match="only 1 free rooms like W1N1 for 2 bots"):
        twin_rooms(db, 2)
    with pytest.raises(WorldShapeError, match="no free room"):
        twin_rooms(_db({"W1N1": {"controller": (1, 1), "sources": [], "owned": True}}), 1)


def test_the_spawn_place_keeps_clear_of_walls_edges_and_the_rooms_objects() -> None:
    walls = {(x, y) for x in range(50) for y in range(50) if x < 20}
    x, y = spawn_place(_terrain(walls), [(30, 30)])
    assert x >= 21  # no wall within 1
    assert max(abs(x - 30), abs(y - 30)) == 2  # next to the object is taken; the nearest beyond it
    with pytest.raises(WorldShapeError, match="no place for a spawn"):
        spawn_place("1" * 2500, [])
