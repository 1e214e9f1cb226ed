"""The throwaway world's start, made like for like (pure: works on the world's database as a value, no I/O).

A rehearsal compares the head's bot with the base's in one world of the private server. The npm server's default
world has rooms of other shapes (terrain, one source or two, the controller elsewhere), and a bot's CPU and memory
depend on them: main against main on a large bot differed by up to 7 CPU per tick between two rooms (issue 48).
:func:`twin_rooms` therefore makes the rooms the bots will get identical *before* the server loads its database
(its runner reads the terrain once, at its first tick): the first free room is the template, and each other room
gets its terrain, its controller's, sources' and mineral's places, and the same spawn place (:func:`spawn_place`).

It also seeds the world data a bot may read at its start that the default database lacks: the room status data
(``Game.map.getRoomStatus`` throws ``No runtime status data`` every tick until the engine first computes it, after
20 ticks, and the runner caches the empty answer for a minute), with what the server computes for this world.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

#: The room status data of a world whose rooms are all ``normal`` (what ``driver.updateRoomStatusData`` writes).
ROOM_STATUS: dict[str, dict[str, int]] = {"novice": {}, "respawn": {}, "closed": {}}
_SIZE = 50
#: Terrain characters that are walls (``1``: wall, ``3``: wall and swamp).
_WALLS = frozenset("13")


class WorldShapeError(ValueError):
    """The world's database cannot give that many like rooms."""


@dataclass(frozen=True, slots=True)
class Twins:
    """The rooms the bots get, in order (all of the template's shape), and the spawn place in each."""

    rooms: tuple[str, ...]
    spawn: tuple[int, int]


def _collection(db: dict[str, Any], name: str) -> list[dict[str, Any]]:
    for collection in db.get("collections", []):
        if collection.get("name") == name:
            data: list[dict[str, Any]] = collection["data"]
            return data
    raise WorldShapeError(f"the world's database has no {name} collection")


def free_rooms(db: dict[str, Any]) -> list[str]:
    """Rooms a bot may get: normal, no source keepers, a controller nobody owns; every other one (sorted), so that
    the bots' neighbours are empty."""
    normal = {r["_id"] for r in _collection(db, "rooms") if r.get("status") == "normal" and not r.get("sourceKeepers")}
    owned_by_nobody = {
        o["room"] for o in _collection(db, "rooms.objects") if o.get("type") == "controller" and not o.get("user")
    }
    return sorted(normal & owned_by_nobody)[::2]


def _objects(db: dict[str, Any], room: str, kind: str) -> list[dict[str, Any]]:
    found = [o for o in _collection(db, "rooms.objects") if o.get("room") == room and o.get("type") == kind]
    return sorted(found, key=lambda o: (o["x"], o["y"]))


def _shape(db: dict[str, Any], room: str) -> tuple[int, int, int]:
    return (
        len(_objects(db, room, "source")),
        len(_objects(db, room, "mineral")),
        len(_objects(db, room, "controller")),
    )


def _around(x: int, y: int, radius: int) -> Iterator[tuple[int, int]]:
    for dy in range(-radius, radius + 1):
        for dx in range(-radius, radius + 1):
            yield x + dx, y + dy


def spawn_place(terrain: str, taken: list[tuple[int, int]]) -> tuple[int, int]:
    """A spawn place a player would choose: a tile with no wall within 1 (room to spawn and walk), at least 3 from
    the edge, not next to a source, the controller or the mineral (``taken``), nearest to all of them together;
    ties by position. Deterministic: the same terrain gives the same place."""
    best: tuple[int, int, int] | None = None
    for y in range(3, _SIZE - 3):
        for x in range(3, _SIZE - 3):
            if any(terrain[j * _SIZE + i] in _WALLS for i, j in _around(x, y, 1)):
                continue
            if any(max(abs(x - tx), abs(y - ty)) <= 1 for tx, ty in taken):
                continue
            cost = sum(max(abs(x - tx), abs(y - ty)) for tx, ty in taken)
            if best is None or (cost, y, x) < best:
                best = (cost, y, x)
    if best is None:
        raise WorldShapeError("the template room has no place for a spawn")
    return best[2], best[1]


def twin_rooms(db: dict[str, Any], count: int) -> Twins:
    """Make ``count`` free rooms of ``db`` (the server's LokiJS database, changed in place) the same shape as the
    first, and seed the room status data; the rooms in order and the spawn place. Only fields that no index covers
    change (the terrain string, objects' ``x``/``y`` and the mineral's kind), so the database stays consistent."""
    free = free_rooms(db)
    if not free:
        raise WorldShapeError("the world has no free room")
    template = free[0]
    shape = _shape(db, template)
    twins = [template, *[r for r in free[1:] if _shape(db, r) == shape][: count - 1]]
    if len(twins) < count:
        raise WorldShapeError(f"the world has only {len(twins)} free rooms like {template} for {count} bots")
    terrains = {t["room"]: t for t in _collection(db, "rooms.terrain")}
    for room in twins[1:]:
        terrains[room]["terrain"] = terrains[template]["terrain"]
        for kind in ("controller", "source", "mineral"):
            for mine, theirs in zip(_objects(db, room, kind), _objects(db, template, kind), strict=True):
                mine["x"], mine["y"] = theirs["x"], theirs["y"]
                for key in ("mineralType", "density", "mineralAmount", "energy", "energyCapacity"):
                    if key in theirs:
                        mine[key] = theirs[key]
    taken = [(o["x"], o["y"]) for kind in ("controller", "source", "mineral") for o in _objects(db, template, kind)]
    env = _collection(db, "env")
    if env and isinstance(env[0].get("data"), dict):
        env[0]["data"]["roomStatusData"] = json.dumps(ROOM_STATUS)
    return Twins(tuple(twins), spawn_place(terrains[template]["terrain"], taken))


__all__ = ["ROOM_STATUS", "Twins", "WorldShapeError", "free_rooms", "spawn_place", "twin_rooms"]
