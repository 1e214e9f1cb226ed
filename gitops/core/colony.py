"""What ``gitops rehearse --from-server`` copies of a player's colony into the throwaway world: pure choices.

The reading (``gitops.edges.service.colonyread``) brings the server's answers; the seeding
(``gitops.edges.worldseed``) writes a copy into the world. In between, this module decides, without I/O:

- **which rooms**: the owned rooms of the account's overview, in its order (highest controller level first), at
  most :data:`MAX_ROOMS`, so that a large account stays a bounded number of requests;
- **which objects**: the account's own (structures, creeps, construction sites) and the neutral ones of those rooms
  (sources, minerals, the controller); another player's objects are left out, at most :data:`MAX_OBJECTS` a room;
- **what is remapped**: each copy gets the world's room names, its bot user's id and fresh object ids, and the
  same renaming runs over Memory (keys and string values that are exactly an old room name or object id), so
  ``Memory.rooms[room.name]`` and ``Game.getObjectById(Memory.x)`` still find what they found on the server;
- **what is timed**: absolute game ticks of the server (a creep's ``ageTime``, a source's regeneration) become
  ticks from now, so the world, at another game time, keeps their distance;
- **what it costs**: :func:`colony_needs`, the requests per endpoint, counted against the budget before any is sent.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gitops.core.endpoints import MEMORY_READ, OVERVIEW, ROOM_OBJECTS, TERRAIN

#: The most rooms copied (the overview's first ones: highest controller level first).
MAX_ROOMS = 3
#: The most objects copied of one room (a full room of level 8 has a few hundred).
MAX_OBJECTS = 2000
#: The game's Memory limit: 2 MiB of ``JSON.stringify(Memory)``; a larger Memory is not copied.
MAX_MEMORY_CHARS = 2 * 1024 * 1024
#: The account's own objects that are copied.
OWNED_TYPES = frozenset(
    {
        "spawn",
        "extension",
        "road",
        "constructedWall",
        "rampart",
        "link",
        "storage",
        "tower",
        "observer",
        "powerSpawn",
        "extractor",
        "lab",
        "terminal",
        "container",
        "nuker",
        "factory",
        "creep",
        "constructionSite",
        "controller",
    }
)
#: Objects without an owner that are copied (roads, walls and containers have none either).
NEUTRAL_TYPES = frozenset({"source", "mineral", "controller", "road", "constructedWall", "container"})
#: Fields holding an absolute game tick: copied as ticks from the server's time, placed at the world's.
TICK_FIELDS = ("ageTime", "decayTime", "nextRegenerationTime", "nextDecayTime", "downgradeTime", "cooldownTime")
#: Fields dropped: a spawn's spawning names a creep being made (not copied: the spawn is idle in the copy); a
#: controller's safe mode, upgrade block and sign name ticks and players of the server; ``meta`` (and every field
#: starting with ``$``, such as ``$loki``) is the server's database bookkeeping, and a ``$`` key would be an operator.
DROPPED_FIELDS = ("spawning", "safeMode", "safeModeCooldown", "upgradeBlocked", "sign", "meta")

_ROOM = re.compile(r"^[WE]\d{1,3}[NS]\d{1,3}$")
_TERRAIN = re.compile(r"^[0-3]{2500}$")


#: The largest CPU limit an account has (the game's 300 for GCL, and 500 a tick from the bucket).
MAX_CPU_LIMIT = 500


@dataclass(frozen=True, slots=True)
class RoomCopy:
    """One room as copied: its name on the server, its 2,500 terrain digits, its chosen objects (server ids)."""

    name: str
    terrain: str
    objects: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Colony:
    """What is copied of an account: its rooms, its Memory (JSON text) and the notes on what was left out."""

    server: str
    user_id: str
    rooms: tuple[RoomCopy, ...]
    memory: str
    notes: tuple[str, ...] = ()
    #: The account's CPU limit as the server states it (``GET /api/auth/me``'s ``cpu``), ``None`` when it states none.
    cpu: int | None = None

    def describe(self) -> str:
        objects = sum(len(r.objects) for r in self.rooms)
        limit = f", CPU limit {self.cpu}" if self.cpu is not None else ""
        return (
            f"server '{self.server}': {len(self.rooms)} room(s) ({', '.join(r.name for r in self.rooms) or 'none'}), "
            f"{objects} object(s), Memory of {len(self.memory)} characters{limit}"
        )


def account_cpu(me: object) -> int | None:
    """The CPU limit in a ``GET /api/auth/me`` answer: a whole number the game allows (1 to 500), else ``None``."""
    cpu = me.get("cpu") if isinstance(me, dict) else None
    return cpu if isinstance(cpu, int) and not isinstance(cpu, bool) and 1 <= cpu <= MAX_CPU_LIMIT else None


def colony_needs(rooms: int = MAX_ROOMS) -> dict[str, int]:
    """The requests a copy of ``rooms`` rooms costs, per endpoint: the overview, Memory, and per room its terrain
    and its objects (``GET /api/auth/me`` and ``GET /api/game/time``, one each, count only against the global
    limit and are included there)."""
    needs = {OVERVIEW: 1, MEMORY_READ: 1, "GET /api/auth/me": 1, "GET /api/game/time": 1}
    if rooms:
        needs[TERRAIN] = rooms
        needs[ROOM_OBJECTS] = rooms
    return needs


def chosen_rooms(overview: object) -> tuple[list[str], list[str]]:
    """The rooms to copy from the overview's ``rooms`` (in its order, valid names only, at most
    :data:`MAX_ROOMS`), and the notes on what was left out."""
    names = [r for r in overview if isinstance(r, str)] if isinstance(overview, list) else []
    valid = [r for r in dict.fromkeys(names) if _ROOM.fullmatch(r)]
    notes = []
    if len(valid) < len(names):
        notes.append(f"{len(names) - len(valid)} room name(s) of the overview are not room names: not copied")
    if len(valid) > MAX_ROOMS:
        notes.append(
            f"the account owns {len(valid)} rooms; the first {MAX_ROOMS} are copied ({', '.join(valid[:MAX_ROOMS])})"
        )
    return valid[:MAX_ROOMS], notes


def room_copy(
    room: str, terrain: object, objects: object, owner: str, server_time: int
) -> tuple[RoomCopy | None, list[str]]:
    """The copy of ``room`` from its terrain answer and its objects answer, keeping the objects of ``owner`` (the
    account's user id) and the neutral ones; ``None`` (with a note) when the terrain is not a room's."""
    if not isinstance(terrain, str) or not _TERRAIN.fullmatch(terrain):
        return None, [f"{room}: the server's terrain is not 2,500 digits: the room is not copied"]
    notes: list[str] = []
    kept: list[dict[str, Any]] = []
    others = 0
    for raw in objects if isinstance(objects, list) else []:
        chosen = _chosen_object(raw, owner, server_time)
        if chosen is None:
            others += 1
        elif len(kept) < MAX_OBJECTS:
            kept.append(chosen)
    if others:
        notes.append(f"{room}: {others} object(s) of other players or of kinds not copied were left out")
    if len(kept) == MAX_OBJECTS:
        notes.append(f"{room}: only the first {MAX_OBJECTS} objects are copied")
    return RoomCopy(room, terrain, tuple(kept)), notes


def _chosen_object(raw: object, owner: str, server_time: int) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        return None
    kind, ident, x, y = raw.get("type"), raw.get("_id"), raw.get("x"), raw.get("y")
    if not isinstance(kind, str) or not isinstance(ident, str) or not ident:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 49 for v in (x, y)):
        return None
    user = raw.get("user")
    if user == owner:
        if kind not in OWNED_TYPES:
            return None
    elif user or kind not in NEUTRAL_TYPES:
        return None
    copied = {k: v for k, v in raw.items() if k not in DROPPED_FIELDS and not k.startswith("$")}
    for name in TICK_FIELDS:
        value = copied.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            copied[name] = {"ticksFromNow": max(0, int(value) - server_time)}
    return copied


def memory_text(memory: object) -> tuple[str, list[str]]:
    """Memory as JSON text (``{}`` when the server has none, or when it exceeds :data:`MAX_MEMORY_CHARS`)."""
    if not isinstance(memory, dict):
        return "{}", [] if memory is None else ["Memory is not an object: the copy starts with {}"]
    text = json.dumps(memory, separators=(",", ":"), ensure_ascii=False)
    if len(text) > MAX_MEMORY_CHARS:
        return "{}", [f"Memory has {len(text)} characters, more than the game's {MAX_MEMORY_CHARS}: not copied"]
    return text, []


#: How many names of creeps left out a note lists (the rest are counted).
NAMED_CREEPS = 5


def absent_creeps(memory_json: str, rooms: Sequence[RoomCopy]) -> list[str]:
    """A note on the creeps ``Memory.creeps`` names that no copied room holds, else none.

    The copy holds the owned rooms only; a creep in another room (a remote harvester, a scout, a creep that stepped
    over an exit) is not copied. Without the note the bot's first tick deletes their Memory as dead creeps', and the
    rehearsal runs a colony smaller than the player's, silently (seen in bench/colony_trial.py: 4 of 6 creeps had
    walked into the next room)."""
    memory = json.loads(memory_json)
    creeps = memory.get("creeps") if isinstance(memory, dict) else None
    if not isinstance(creeps, dict) or not creeps:
        return []
    present = {str(o.get("name")) for room in rooms for o in room.objects if o.get("type") == "creep"}
    absent = sorted(name for name in creeps if name not in present)
    if not absent:
        return []
    named = ", ".join(absent[:NAMED_CREEPS]) + (
        f" and {len(absent) - NAMED_CREEPS} more" if len(absent) > NAMED_CREEPS else ""
    )
    return [
        f"Memory.creeps names {len(absent)} creep(s) that are not in the copied rooms ({named}): creeps in other "
        "rooms (remote harvesters, scouts) are not copied; the bot finds their Memory but no creep"
    ]


@dataclass(frozen=True, slots=True)
class Placed:
    """One copy of a colony placed in the world: its objects per world room, and its Memory, all renamed."""

    rooms: Mapping[str, tuple[str, tuple[Mapping[str, Any], ...]]]
    memory: str


def placed(colony: Colony, user_id: str, world_rooms: Sequence[str], tag: str) -> Placed:
    """``colony`` renamed for the world: its rooms become ``world_rooms`` (one each, in order), its owner
    ``user_id``, every object id a fresh one derived from ``tag`` (distinct per copy, so two copies can share a
    world). The same renaming runs over Memory; strings that only contain a name (``"W7N3:25:30"``) are kept."""
    if len(world_rooms) < len(colony.rooms):
        raise ValueError(f"{len(colony.rooms)} rooms to place, {len(world_rooms)} world rooms given")
    names: dict[str, str] = {colony.user_id: user_id}
    for copy, world_room in zip(colony.rooms, world_rooms, strict=False):
        names[copy.name] = world_room
        for obj in copy.objects:
            names[str(obj["_id"])] = _new_id(tag, str(obj["_id"]))
    rooms = {
        names[copy.name]: (copy.terrain, tuple(_renamed(dict(o), names) for o in copy.objects)) for copy in colony.rooms
    }
    memory = json.dumps(_renamed(json.loads(colony.memory), names), separators=(",", ":"), ensure_ascii=False)
    return Placed(rooms, memory)


def _new_id(tag: str, old: str) -> str:
    """A Mongo-like 24-hex-digit id, the same for the same copy and old id."""
    return hashlib.sha256(f"{tag}\0{old}".encode()).hexdigest()[:24]


def _renamed(value: Any, names: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, dict):
        return {names.get(k, k): _renamed(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed(v, names) for v in value]
    return value


__all__ = [
    "MAX_CPU_LIMIT",
    "MAX_MEMORY_CHARS",
    "MAX_OBJECTS",
    "MAX_ROOMS",
    "NAMED_CREEPS",
    "Colony",
    "Placed",
    "RoomCopy",
    "absent_creeps",
    "account_cpu",
    "chosen_rooms",
    "colony_needs",
    "memory_text",
    "placed",
    "room_copy",
]
