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
import time as clock
import zlib
from typing import TYPE_CHECKING, Any

from gitops.core.colony import (
    MAX_MEMORY_CHARS,
    Colony,
    absent_creeps,
    account_cpu,
    chosen_rooms,
    memory_text,
    room_copy,
)
from gitops.core.endpoints import MEMORY_READ, OVERVIEW, ROOM_OBJECTS, TERRAIN
from gitops.edges.socket import GameSocket, SocketProblem, socket_url
from gitops.errors import ServiceError

if TYPE_CHECKING:
    # The client is given, never made here: its module (httpx) is the session's to import (the HTTP client boundary).
    from gitops.edges.service.client import ServiceClient

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
    by_socket: dict[str, object] | None = None
    for room in rooms:
        terrain = _terrain(client.read(TERRAIN, {"room": room, "encoded": "1"}).get("terrain"))
        if by_socket is None:
            try:
                objects = client.read(ROOM_OBJECTS, {"room": room}).get("objects")
            except ServiceError as exc:
                if f"answered 404 Not Found to {ROOM_OBJECTS}" not in exc.message:
                    raise
                by_socket = _objects_by_socket(client, rooms)  # the npm private server has no such endpoint
        if by_socket is not None:
            objects = by_socket.get(room)
            if objects is None:
                notes.append(f"{room}: the game socket gave none of the room's objects: the room is copied empty")
        copy, room_notes = room_copy(room, terrain, objects, owner, server_time)
        notes.extend(room_notes)
        if copy is not None:
            copies.append(copy)
    notes.extend(absent_creeps(memory, copies))
    return Colony(
        server=server, user_id=owner, rooms=tuple(copies), memory=memory, notes=tuple(notes), cpu=account_cpu(me)
    )


#: Seconds the game socket may take to answer the rooms' subscriptions (each answers at once with its objects).
SOCKET_SECONDS = 20.0


def _objects_by_socket(client: ServiceClient, rooms: list[str]) -> dict[str, object]:
    """The rooms' objects as the game socket's ``room:NAME`` channel gives them on subscribing (the npm private
    server's only way: it has no ``GET /api/game/room-objects``): ``{"objects": {id: object}}``, the whole room."""
    _user, token = client.socket_login()
    found: dict[str, object] = {}
    try:
        with GameSocket(socket_url(client.base_url), token, deadline=clock.monotonic() + SOCKET_SECONDS) as sock:
            for room in rooms:
                sock.subscribe(f"room:{room}")
            for message in sock.messages(max_messages=10 * len(rooms) + 10):
                room = message.channel.removeprefix("room:")
                data = message.data
                if room in rooms and room not in found and isinstance(data, dict):
                    objects = data.get("objects")
                    if isinstance(objects, dict):
                        found[room] = [{**o, "_id": k} for k, o in objects.items() if isinstance(o, dict)]
                if len(found) == len(rooms):
                    break
    except SocketProblem as exc:
        raise ServiceError(
            f"server '{client.server_name}' has no GET /api/game/room-objects, and its game socket did not give the "
            f"rooms' objects: {exc}",
            hint="Rehearse without --from-server (a fresh start), or check the server's socket (gitops console).",
        ) from None
    return found


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
