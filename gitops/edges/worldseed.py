"""A copy of the player's colony written into a throwaway world (``gitops rehearse --from-server``).

Beside :mod:`gitops.edges.privateserver` (the world's life cycle, the fresh bot it seeds): after a bot is seeded
with its fresh room, :func:`plant_colony` replaces that room (and takes one more free room per further copied room)
with the copy :mod:`gitops.core.colony` placed for the bot: the room's objects removed, the copied terrain and
objects written, Memory set, the world's terrain cache rebuilt (the runtime reads it at its first tick, so the
bots path-find on the copied terrain). Each side's bot gets its own copy, identical but for names and ids.

Everything from the server (Memory, names, objects) crosses into the world's admin CLI as one JSON text, written
by a serializer as a JavaScript string literal and parsed there with ``JSON.parse``: no outside text becomes code.
"""

from __future__ import annotations

import json

from gitops.core.colony import Colony, placed
from gitops.edges.privateserver import Bot, World

#: Seconds the world's CLI may take to write a copy (thousands of objects are inserted one by one).
SEED_TIMEOUT = 60.0

#: Run in the world's admin CLI; ``__DATA__`` becomes a JSON string literal (never code).
_SEED = """(async () => {
  const d = JSON.parse(__DATA__), db = storage.db, env = storage.env;
  const time = Number(await env.get(env.keys.GAMETIME)) || 1;
  for (const r of d.rooms) {
    await db['rooms.objects'].removeWhere({room: r.room});
    await db['rooms.terrain'].update({room: r.room}, {$set: {terrain: r.terrain}});
    for (const o of r.objects) {
      for (const k of Object.keys(o)) {
        const v = o[k];
        if (v && typeof v === 'object' && typeof v.ticksFromNow === 'number') o[k] = time + v.ticksFromNow;
      }
      o.room = r.room;
      await db['rooms.objects'].insert(o);
    }
    await db.rooms.update({_id: r.room}, {$set: {status: 'normal', active: true, invaderGoal: 1000000}});
    await env.sadd(env.keys.ACTIVE_ROOMS, r.room);
  }
  await env.set(env.keys.MEMORY + d.user, d.memory);
  await map.updateTerrainData();
  return d.rooms.length;
})()"""


def plant_colony(world: World, bot: Bot, colony: Colony, tag: str) -> list[str]:
    """Write ``colony`` into ``world`` as ``bot``'s: its first room replaces the bot's fresh room, each further one
    takes a free room. ``tag`` makes this copy's object ids its own. The world rooms used, in order."""
    rooms = [bot.room, *(world.take_free_room() for _ in colony.rooms[1:])]
    copy = placed(colony, bot.user_id, rooms, tag)
    data = {
        "user": bot.user_id,
        "memory": copy.memory,
        "rooms": [{"room": room, "terrain": t, "objects": list(o)} for room, (t, o) in copy.rooms.items()],
    }
    # json.dumps twice: the JSON text, then that text as a string literal (JSON's strings are JavaScript's).
    script = " ".join(line.strip() for line in _SEED.splitlines())  # the CLI reads one line
    world.cli(script.replace("__DATA__", json.dumps(json.dumps(data, ensure_ascii=False))), timeout=SEED_TIMEOUT)
    return rooms[: max(1, len(colony.rooms))]


__all__ = ["plant_colony"]
