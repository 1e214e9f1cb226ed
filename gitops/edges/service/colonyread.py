"""Reading a player's colony for ``gitops rehearse --from-server``: read-only requests through the one client.

Every request is a ``GET`` of :meth:`ServiceClient.read` (paced, counted by the ledger, retried as any), in the
order and number :func:`gitops.core.colony.colony_needs` budgets: who the account is, the server's game time, the
owned rooms (the overview), Memory, and per room its terrain and its objects. What is kept of the answers is
:mod:`gitops.core.colony`'s choice; this module only unpacks them (Memory comes gzip'ed and base64'ed, read within a
bound so that a hostile answer cannot exhaust memory).
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from typing import Any

from gitops.core.colony import MAX_MEMORY_CHARS, Colony, chosen_rooms, memory_text, room_copy
from gitops.core.endpoints import MEMORY_READ, OVERVIEW, ROOM_OBJECTS, TERRAIN
from gitops.edges.service.client import ServiceClient
from gitops.errors import ServiceError

#: The most bytes of Memory's JSON inflated from the answer (UTF-8 of 2 MiB characters is at most 6 MiB).
_MEMORY_BYTES = 3 * MAX_MEMORY_CHARS
#: What :func:`_memory` answers for a Memory past that bound.
_TOO_LARGE = object()


def read_colony(client: ServiceClient) -> Colony:
    """The account's colony as :mod:`gitops.core.colony` chooses it, read with read-only requests."""
    server = client.server_name
    me = client.read("GET /api/auth/me")
    owner = me.get("_id")
    if not isinstance(owner, str) or not owner:
        raise _shape(server, "GET /api/auth/me", "'_id' is missing")
    time = client.read("GET /api/game/time").get("time")
    server_time = time if isinstance(time, int) and not isinstance(time, bool) else 0
    rooms, notes = chosen_rooms(client.read(OVERVIEW, {"interval": "8", "statName": "energyHarvested"}).get("rooms"))
    loaded = _memory(server, client.read(MEMORY_READ).get("data"))
    if loaded is _TOO_LARGE:
        memory, memory_notes = "{}", [f"Memory is larger than the game's {MAX_MEMORY_CHARS} characters: not copied"]
    else:
        memory, memory_notes = memory_text(loaded)
    notes.extend(memory_notes)
    copies = []
    for room in rooms:
        terrain = _terrain(client.read(TERRAIN, {"room": room, "encoded": "1"}).get("terrain"))
        objects = client.read(ROOM_OBJECTS, {"room": room}).get("objects")
        copy, room_notes = room_copy(room, terrain, objects, owner, server_time)
        notes.extend(room_notes)
        if copy is not None:
            copies.append(copy)
    return Colony(server=server, user_id=owner, rooms=tuple(copies), memory=memory, notes=tuple(notes))


def _terrain(answer: object) -> object:
    """The 2,500 digits of an encoded terrain answer (``[{"room", "terrain", "type": "terrain"}]``)."""
    if isinstance(answer, list) and len(answer) == 1 and isinstance(answer[0], dict):
        return answer[0].get("terrain")
    return None


def _memory(server: str, data: object) -> Any:
    """Memory from ``data``: ``gz:`` + base64 of gzip'ed JSON (both servers), or nothing (no Memory yet)."""
    if data is None:
        return None
    if not isinstance(data, str) or not data.startswith("gz:"):
        raise _shape(server, MEMORY_READ, "'data' is not gz: + base64 of Memory")
    try:
        packed = base64.b64decode(data[3:], validate=True)
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        raw = inflater.decompress(packed, _MEMORY_BYTES + 1)
        if len(raw) > _MEMORY_BYTES or inflater.unconsumed_tail:
            return _TOO_LARGE
        return json.loads(raw)
    except (binascii.Error, zlib.error, ValueError, RecursionError) as exc:
        raise _shape(server, MEMORY_READ, f"Memory cannot be read ({type(exc).__name__})") from None


def _shape(server: str, endpoint: str, what: str) -> ServiceError:
    return ServiceError(
        f"server '{server}' answered {endpoint} with something this tool cannot read: {what}",
        hint="Check that the server is a Screeps server (gitops status), or rehearse without --from-server.",
    )


__all__ = ["read_colony"]
