"""The throwaway world's start, the same for head and base (pure: works on the world's database as a value, no I/O).

A rehearsal compares the head's bot with the base's. In one world they would get rooms of other shapes (terrain,
one source or two, other neighbours), and a bot's CPU and memory depend on them: main against main on a large bot
differed by up to 7 CPU per tick and 11 kB of memory (issue 48), and even rooms made alike differ in their
neighbours, which path finding and a bot's planner read. So the head's bots and the base's run in two worlds
started from the same database, each bot in the same room with its spawn on the same place: :func:`placements`
chooses them, the same for the same database. Nothing of the world is changed but what a bot would find on a real
server at its start:

the room status data (``Game.map.getRoomStatus`` throws ``No runtime status data`` every tick until the engine
first computes it, after 20 ticks, and the runner caches the missing answer for a minute), seeded with what the
server computes for this world (:func:`seed_world_data`); and nobody else plays: the default world's AI players
stay in their rooms, idle (:func:`idle_players`).
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
    """The world's database cannot give that many rooms."""


@dataclass(frozen=True, slots=True)
class Placement:
    """A bot's room and its spawn's place in it."""

    room: str
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
        raise WorldShapeError("the room has no place for a spawn")
    return best[2], best[1]


def placements(db: dict[str, Any], count: int) -> tuple[Placement, ...]:
    """The rooms of the first ``count`` bots (:func:`free_rooms`, in order) and the spawn place in each
    (:func:`spawn_place`, next to none of the room's objects): the same for the same database."""
    free = free_rooms(db)
    if len(free) < count:
        raise WorldShapeError(f"the world has {len(free)} free rooms for {count} bots")
    terrains = {t["room"]: t["terrain"] for t in _collection(db, "rooms.terrain")}
    chosen: list[Placement] = []
    for room in free[:count]:
        taken = [(o["x"], o["y"]) for kind in ("controller", "source", "mineral") for o in _objects(db, room, kind)]
        chosen.append(Placement(room, spawn_place(terrains[room], taken)))
    return tuple(chosen)


def seed_world_data(db: dict[str, Any]) -> None:
    """The world data a bot may read at its start that the default database lacks, written into ``db``: the room
    status data (:data:`ROOM_STATUS`: every room of the default world is ``normal``)."""
    env = _collection(db, "env")
    if env and isinstance(env[0].get("data"), dict):
        env[0]["data"]["roomStatusData"] = json.dumps(ROOM_STATUS)


#: The world's tick duration while it waits for its bots (ms): the engine's main loop looks whether it is paused once
#: a tick duration (one storage request each); at 1 ms it would spin through the seeding, at the npm server's
#: default (1000 ms) the first tick would wait up to a second after the resume.
WAITING_TICK_MS = 25


def paused_at_start(db: dict[str, Any]) -> None:
    """The world starts paused, in ``db``'s env (as the admin CLI's ``system.pauseSimulation()`` writes it, without
    a call after the start), looking every :data:`WAITING_TICK_MS` whether it was resumed: it ticks only when the
    rehearsal has seeded its bots and resumes it (then at a 1 ms tick duration)."""
    env = _collection(db, "env")
    if env and isinstance(env[0].get("data"), dict):
        env[0]["data"]["mainLoopPaused"] = "1"
        env[0]["data"]["tickRate"] = WAITING_TICK_MS


def idle_players(db: dict[str, Any]) -> list[str]:
    """The default world's AI players (users with a ``bot`` AI: the npm server's four ``simplebot`` players in its
    corner rooms) made idle in ``db``: their code does not run (``active: 0``: the engine's main loop runs the users
    that are active and have CPU) and their rooms are not processed (out of the active rooms), so a tick is the
    rehearsed bots' alone. Their rooms, controllers and spawns stay as they were, so the map a bot sees is the
    same. Before, they ran every tick, four fifths of a tick's work, and spawned creeps a rehearsed bot never
    met in its room (docs/rehearsal.md: nobody else). Their user ids, sorted."""
    idle = sorted(u["_id"] for u in _collection(db, "users") if u.get("bot"))
    for user in _collection(db, "users"):
        if user["_id"] in idle:
            user["active"] = 0
    their_rooms = {
        o["room"] for o in _collection(db, "rooms.objects") if o.get("type") == "controller" and o.get("user") in idle
    }
    for room in _collection(db, "rooms"):
        if room["_id"] in their_rooms:
            room["active"] = False  # a database before version 9: the storage makes the active rooms of this flag
    env = _collection(db, "env")
    active = env[0].get("data", {}).get("activeRooms") if env else None
    if isinstance(active, list):  # a database of version 9: the list itself
        active[:] = [room for room in active if room not in their_rooms]
    return idle


def world_start(db: dict[str, Any]) -> None:
    """The rehearsal's start, written into the default world's database ``db``: the world data a bot may read at
    its start (:func:`seed_world_data`), nobody else playing (:func:`idle_players`), and paused until the bots are
    seeded (:func:`paused_at_start`)."""
    seed_world_data(db)
    idle_players(db)
    paused_at_start(db)


__all__ = [
    "ROOM_STATUS",
    "WAITING_TICK_MS",
    "Placement",
    "WorldShapeError",
    "free_rooms",
    "idle_players",
    "paused_at_start",
    "placements",
    "seed_world_data",
    "spawn_place",
    "world_start",
]
