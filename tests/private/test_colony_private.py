"""``gitops rehearse --from-server`` with the real private server as the live server: a colony grown there
(objects and Memory written through its admin CLI), copied into the throwaway world, and rehearsed by a bot that
fails unless it finds the copy (its Memory, its level-3 room, its spawn, extensions and creep, its source by id).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from gitops.errors import ExitCode
from tests.factories import git
from tests.private.harness import PrivateServer, ServerUser, install_problem
from tests.private.test_rehearse_private import INSTALL, _document
from tests.private.test_rehearse_private import _rehearse as rehearse

pytestmark = pytest.mark.private_server

TICKS = 5

#: Fails every tick unless the colony was copied (and renamed to the world's room and ids).
GROWN_BOT = """\
'use strict';
module.exports.loop = function () {
    if (Memory.mark !== 'grown') throw new Error('no copied Memory');
    const room = Object.values(Game.rooms).find(r => r.controller && r.controller.my && r.controller.level === 3);
    if (!room) throw new Error('no copied room of level 3');
    if (!Game.spawns.Home) throw new Error('no copied spawn');
    const extensions = room.find(FIND_MY_STRUCTURES, {filter: s => s.structureType === STRUCTURE_EXTENSION});
    if (extensions.length !== 2) throw new Error('no copied extensions: ' + extensions.length);
    if (!Game.creeps.Worker1) throw new Error('no copied creep');
    const mine = Memory.rooms && Memory.rooms[room.name];
    if (!mine) throw new Error('Memory.rooms does not name the room');
    if (!Game.getObjectById(mine.source)) throw new Error('the source id in Memory finds nothing');
    console.log('colony of ' + room.name + ' found');
};
"""


def grow_colony(server: PrivateServer, user: ServerUser) -> str:
    """A level-3 room with a spawn, two extensions and a creep for ``user``, and Memory naming the room and a
    source by id, written through the server's CLI (its storage, as the game's ticks would leave it)."""
    data = json.dumps({"username": user.username})
    room = server.cli(
        f"(async () => {{ const d = JSON.parse({json.dumps(data)}); const db = storage.db;"
        " const u = await db.users.findOne({username: d.username});"
        " const free = (await db['rooms.objects'].find({type: 'controller'})).filter(c => !c.user).map(c => c.room);"
        " const open = (await db.rooms.find({status: 'normal'})).filter(r => !r.sourceKeepers);"
        " const rooms = new Set(open.map(r => r._id));"
        " const room = free.filter(r => rooms.has(r)).sort().pop();"
        " const time = Number(await storage.env.get(storage.env.keys.GAMETIME)) || 1;"
        " await db['rooms.objects'].update({room, type: 'controller'}, {$set: {user: u._id, level: 3, progress: 7,"
        " downgradeTime: time + 20000}});"
        " const at = (x, y) => ({room, x, y, user: u._id});"
        " await db['rooms.objects'].insert({...at(25, 25), type: 'spawn', name: 'Home', store: {energy: 300},"
        " storeCapacityResource: {energy: 300}, hits: 5000, hitsMax: 5000, spawning: null, notifyWhenAttacked: true});"
        " for (const x of [23, 27]) await db['rooms.objects'].insert({...at(x, 23), type: 'extension',"
        " store: {energy: 50}, storeCapacityResource: {energy: 50}, hits: 1000, hitsMax: 1000, off: false});"
        " await db['rooms.objects'].insert({...at(26, 27), type: 'creep', name: 'Worker1', body: ['work', 'carry',"
        " 'move'].map(type => ({type, hits: 100})), store: {}, storeCapacity: 50, hits: 300, hitsMax: 300,"
        " fatigue: 0, spawning: false, ageTime: time + 1200, notifyWhenAttacked: true, actionLog: {}});"
        " const source = await db['rooms.objects'].findOne({room, type: 'source'});"
        " await storage.env.set(storage.env.keys.MEMORY + u._id, JSON.stringify({mark: 'grown',"
        " rooms: {[room]: {source: source._id}}, creeps: {Worker1: {role: 'harvester'}}}));"
        " return room; })()"
    )
    assert isinstance(room, str)
    return room


def _rehearse(repo: Path, tmp_path: Path, user: ServerUser, *args: str) -> subprocess.CompletedProcess[str]:
    credentials = {"SCREEPS_USER": user.username, "SCREEPS_PASSWORD": user.password}
    return rehearse(repo, tmp_path, INSTALL, "--json", *args, ticks=TICKS, env=credentials)


def test_a_colony_grown_on_the_live_server_is_copied_for_head_and_base(
    private_server: PrivateServer, private_user: ServerUser, tmp_path: Path
) -> None:
    problem = install_problem()
    if problem:
        pytest.fail(problem, pytrace=False)
    room = grow_colony(private_server, private_user)
    repo = tmp_path / "bot"
    repo.mkdir()
    git(repo, "init", "-q")
    manifest = {
        "version": 1,
        "servers": {
            "live": {"url": private_server.url, "username_env": "SCREEPS_USER", "password_env": "SCREEPS_PASSWORD"}
        },
        "branches": [{"server": "live", "branch": "main", "root": ".", "include": ["main.js"]}],
    }
    (repo / "gitops.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    (repo / "main.js").write_text(GROWN_BOT, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a bot of a grown colony")

    fresh = _rehearse(repo, tmp_path, private_user)
    assert fresh.returncode == ExitCode.UNHEALTHY, fresh.stderr  # a fresh start has none of it
    assert "no copied Memory" in json.dumps(_document(fresh)["head"]["errors"])

    copied = _rehearse(repo, tmp_path, private_user, "--from-server", "live", "--base", "HEAD")
    assert copied.returncode == ExitCode.OK, copied.stderr + copied.stdout
    doc = _document(copied)
    assert f"1 room(s) ({room})" in copied.stderr
    assert doc["head"]["failed_ticks"] == 0
    assert doc["base"]["failed_ticks"] == 0  # the base ran on its own, identical copy
    assert private_user.password not in copied.stdout + copied.stderr
