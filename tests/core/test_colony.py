"""The pure choice of what ``rehearse --from-server`` copies of a colony (gitops.core.colony)."""

from __future__ import annotations

import json

import pytest

from gitops.core.colony import (
    MAX_MEMORY_CHARS,
    MAX_OBJECTS,
    MAX_ROOMS,
    NAMED_CREEPS,
    Colony,
    RoomCopy,
    absent_creeps,
    chosen_rooms,
    colony_needs,
    memory_text,
    placed,
    room_copy,
)

ME = "me0000000000000000000001"
THEM = "them00000000000000000002"
TERRAIN = "0" * 2400 + "1" * 100


def obj(kind: str, ident: str, user: str | None = ME, **extra: object) -> dict[str, object]:
    found: dict[str, object] = {"_id": ident, "type": kind, "x": 10, "y": 20, "room": "W7N3", **extra}
    if user is not None:
        found["user"] = user
    return found


def test_the_needs_are_one_overview_one_memory_and_two_requests_a_room() -> None:
    needs = colony_needs(3)
    assert needs["GET /api/user/overview"] == 1
    assert needs["GET /api/user/memory"] == 1
    assert needs["GET /api/game/room-terrain"] == 3
    assert needs["GET /api/game/room-objects"] == 3
    assert "GET /api/game/room-terrain" not in colony_needs(0)


def test_rooms_keep_the_overview_order_drop_bad_names_and_stop_at_the_cap() -> None:
    overview = ["W1N1", "../etc", "W1N1", 7, *[f"E{n}S1" for n in range(5)]]
    rooms, notes = chosen_rooms(overview)
    assert rooms == ["W1N1", "E0S1", "E1S1"][:MAX_ROOMS]
    assert any("not room names" in n for n in notes)
    assert any(f"the first {MAX_ROOMS} are copied" in n for n in notes)
    assert chosen_rooms(None) == ([], [])


def test_own_and_neutral_objects_are_kept_others_left_out() -> None:
    objects = [
        {**obj("spawn", "s1", store={"energy": 300}, spawning={"name": "x", "spawnTime": 5}), "$loki": 7},
        obj("creep", "c1", ageTime=1600, name="Harv1"),
        obj("source", "src1", user=None, nextRegenerationTime=1010),
        obj("controller", "ctl", level=4, progress=123),
        obj("creep", "enemy", user=THEM),
        obj("tower", "t-them", user=THEM),
        obj("portal", "p", user=None),
        obj("spawn", "bad-place", x=50),
        "not an object",
    ]
    copy, notes = room_copy("W7N3", TERRAIN, objects, ME, server_time=1000)
    assert copy is not None
    assert [o["_id"] for o in copy.objects] == ["s1", "c1", "src1", "ctl"]
    spawn, creep, source, controller = copy.objects
    assert "spawning" not in spawn  # the copy's spawn is idle
    assert "$loki" not in spawn  # the server's database bookkeeping
    assert creep["ageTime"] == {"ticksFromNow": 600}
    assert source["nextRegenerationTime"] == {"ticksFromNow": 10}
    assert controller["level"] == 4
    assert controller["progress"] == 123
    assert notes == ["W7N3: 5 object(s) of other players or of kinds not copied were left out"]


def test_a_room_without_real_terrain_is_not_copied() -> None:
    copy, notes = room_copy("W7N3", "0" * 10, [], ME, 0)
    assert copy is None
    assert "terrain" in notes[0]


def test_objects_stop_at_the_cap() -> None:
    objects = [obj("road", f"r{n}", user=None) for n in range(MAX_OBJECTS + 5)]
    copy, notes = room_copy("W7N3", TERRAIN, objects, ME, 0)
    assert copy is not None
    assert len(copy.objects) == MAX_OBJECTS
    assert any("only the first" in n for n in notes)


def test_memory_is_json_text_and_too_large_memory_is_left_out() -> None:
    assert memory_text({"a": 1}) == ('{"a":1}', [])
    assert memory_text(None) == ("{}", [])
    text, notes = memory_text({"big": "x" * MAX_MEMORY_CHARS})
    assert text == "{}"
    assert "not copied" in notes[0]


def test_placing_renames_rooms_owner_and_ids_in_objects_and_memory() -> None:
    copy, _ = room_copy("W7N3", TERRAIN, [obj("spawn", "s1"), obj("source", "src1", user=None)], ME, 0)
    assert copy is not None
    memory = {"rooms": {"W7N3": {"source": "src1", "where": "W7N3:1:2"}}, "owner": ME}
    colony = Colony(server="live", user_id=ME, rooms=(copy,), memory=json.dumps(memory))
    one = placed(colony, "bot1", ["W3N3"], tag="a")
    two = placed(colony, "bot2", ["W5N5"], tag="b")
    terrain, objects = one.rooms["W3N3"]
    assert terrain == TERRAIN
    spawn, source = objects
    assert spawn["user"] == "bot1"
    assert spawn["room"] == "W3N3"
    assert "user" not in source
    copied = json.loads(one.memory)
    assert copied["rooms"]["W3N3"]["source"] == source["_id"] != "src1"
    assert copied["rooms"]["W3N3"]["where"] == "W7N3:1:2"  # only whole strings are renamed
    assert copied["owner"] == "bot1"
    # Two copies in one world: the same shape, ids of their own.
    assert {o["_id"] for o in two.rooms["W5N5"][1]}.isdisjoint(o["_id"] for o in objects)
    assert placed(colony, "bot1", ["W3N3"], tag="a") == one


def test_placing_needs_a_world_room_per_copied_room() -> None:
    copy, _ = room_copy("W7N3", TERRAIN, [], ME, 0)
    assert copy is not None
    with pytest.raises(ValueError, match="1 rooms to place"):
        placed(Colony("live", ME, (copy,), "{}"), "bot", [], "t")


def test_creeps_of_memory_outside_the_copied_rooms_are_named_in_a_note() -> None:
    # Seen on a colony grown on the real private server (bench/colony_trial.py): 4 of its 6 creeps had stepped into
    # the next room, which the account does not own; the copy left them out and said nothing.
    room = RoomCopy("W7N3", TERRAIN, (obj("creep", "c1", name="upgrader1"), obj("spawn", "s1", name="Spawn1")))
    memory = json.dumps({"creeps": {"upgrader1": {}, "harvester2": {}, "scout3": {}}})
    [note] = absent_creeps(memory, [room])
    assert note.startswith("Memory.creeps names 2 creep(s) that are not in the copied rooms (harvester2, scout3)")
    assert absent_creeps(json.dumps({"creeps": {"upgrader1": {}}}), [room]) == []
    assert absent_creeps("{}", [room]) == []
    assert absent_creeps(json.dumps({"creeps": ["not", "an", "object"]}), [room]) == []
    many = json.dumps({"creeps": {f"c{n:02}": {} for n in range(NAMED_CREEPS + 3)}})
    [long_note] = absent_creeps(many, [])
    assert f"({', '.join(f'c{n:02}' for n in range(NAMED_CREEPS))} and 3 more)" in long_note
