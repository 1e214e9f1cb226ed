"""A colony grown on the real private server, copied and rehearsed as a player would (issue 48; not part of CI).

    PYTHONPATH=. .venv/bin/python bench/colony_trial.py                 # 300 ticks of growth
    PYTHONPATH=. .venv/bin/python bench/colony_trial.py --grow 500 --json

Everything runs on loopback and every process it starts is stopped at the end, also after an error:

1. The real npm private server (``tests/private/harness.py``: ``scripts/private-server.sh run`` on two free
   loopback ports, a fresh data folder), its tick duration shortened through the admin CLI.
2. A user registers (``POST /api/register/submit``), places its spawn as a player does (``POST
   /api/game/place-spawn``, on a free room's clear tile), and deploys a small bot with ``gitops apply`` (it
   harvests, spawns harvesters, upgraders and builders with a Memory ``role``, upgrades the controller, places
   extension construction sites from level 2 and builds them, keeps ``Memory.rooms[room]``).
3. The world ticks ``--grow`` ticks; then it is paused (the copy reads a colony that does not move under it).
4. Three rehearsals, as whole ``gitops rehearse`` processes, ``--ticks`` each:
   * ``--from-server live --base HEAD~1`` with a head that changes something harmless: exit 0;
   * ``--base HEAD~1`` (a fresh start) with a head that throws once a creep of Memory role ``builder`` exists:
     the fresh world has no builder in its first ticks, so the rehearsal misses it (exit 0);
   * the same with ``--from-server live``: the copy has builders, the head fails every tick (exit 9).
   Each rehearsal keeps its world folder (``GITOPS_KEEP_REHEARSAL_WORLD=1``) so the bot's own count lines (creeps by
   role, extensions, construction sites, controller level, Memory's creeps) are read from its ``record.jsonl``.

Printed: the grown colony (as the live server's storage holds it), each rehearsal's exit code, wall time, the
colony line of its stderr, the bot's counts seen inside the rehearsal, and the requests the copy spent (the
ledger's ``GET`` counts of the state folder).
"""

from __future__ import annotations

import argparse
import contextlib
import html
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_rehearse import _git  # noqa: E402  (bench/ is on sys.path: the script's own folder)

from tests.private.harness import PrivateServer, PrivateServerError, ServerUser  # noqa: E402

#: The base: harvests, spawns, upgrades, builds; logs its counts every 10 ticks (and on a fresh global).
BOT = """\
'use strict';
const WANT = [['harvester', 2], ['builder', 1], ['scout', 1], ['upgrader', UPGRADERS], ['builder', 2]];
function count(room) {
    const creeps = Object.values(Game.creeps);
    const roles = {};
    for (const c of creeps) roles[c.memory.role] = (roles[c.memory.role] || 0) + 1;
    const ext = room.find(FIND_MY_STRUCTURES, {filter: s => s.structureType === STRUCTURE_EXTENSION}).length;
    const sites = room.find(FIND_MY_CONSTRUCTION_SITES).length;
    return 'colony ' + JSON.stringify({room: room.name, time: Game.time, level: room.controller.level,
        progress: room.controller.progress, roles, creeps: creeps.length, extensions: ext, sites,
        memoryCreeps: Object.keys(Memory.creeps || {}).length,
        memoryRoom: !!(Memory.rooms && Memory.rooms[room.name])});
}
function go(creep, target) {
    return creep.moveTo(target, {maxRooms: 1});  // exits are walkable: a path over one leaves the room
}
function work(creep, spawn) {
    if (creep.memory.role === 'scout') {  // stands in the next room: a creep of the colony outside its own rooms
        const next = Object.values(Game.map.describeExits(creep.memory.home || creep.room.name))[0];
        creep.memory.home = creep.memory.home || creep.room.name;
        const spot = new RoomPosition(25, 25, next);  // inside: a creep left on an exit tile crosses back and forth
        if (!creep.pos.inRangeTo(spot, 3)) creep.moveTo(spot);
        return;
    }
    if (creep.memory.role === 'builder') {
        REMEMBER
        if (remembered) creep.memory.site = remembered.id;
    }
    if (creep.store.getFreeCapacity() > 0 && !creep.memory.full) {
        const source = creep.pos.findClosestByPath(FIND_SOURCES_ACTIVE);
        if (source && creep.harvest(source) === ERR_NOT_IN_RANGE) go(creep, source);
        if (creep.store.getFreeCapacity() === 0) creep.memory.full = true;
        return;
    }
    if (creep.store[RESOURCE_ENERGY] === 0) { creep.memory.full = false; return; }
    const room = creep.room;
    if (creep.memory.role === 'harvester') {
        const sink = creep.pos.findClosestByPath(FIND_MY_STRUCTURES,
            {filter: s => s.store && s.store.getFreeCapacity(RESOURCE_ENERGY) > 0});
        if (sink) { if (creep.transfer(sink, RESOURCE_ENERGY) === ERR_NOT_IN_RANGE) go(creep, sink); return; }
    }
    if (creep.memory.role === 'builder') {
        const site = creep.pos.findClosestByPath(FIND_MY_CONSTRUCTION_SITES);
        if (site) { if (creep.build(site) === ERR_NOT_IN_RANGE) go(creep, site); return; }
    }
    if (creep.upgradeController(room.controller) === ERR_NOT_IN_RANGE) go(creep, room.controller);
}
module.exports.loop = function () {
    const spawn = Object.values(Game.spawns)[0];
    if (!spawn) return;
    const room = spawn.room;
    for (const name in Memory.creeps) if (!Game.creeps[name]) delete Memory.creeps[name];
    Memory.rooms = Memory.rooms || {};
    Memory.rooms[room.name] = {sources: room.find(FIND_SOURCES).map(s => s.id), spawn: spawn.id};
    const roles = {};
    for (const c of Object.values(Game.creeps)) roles[c.memory.role] = (roles[c.memory.role] || 0) + 1;
    const want = WANT.find(([role, n]) => (roles[role] || 0) < n);
    const body = want && want[0] === 'scout' ? [MOVE] : [WORK, CARRY, MOVE];
    if (want && !spawn.spawning) spawn.spawnCreep(body, want[0] + Game.time, {memory: {role: want[0]}});
    if (Game.time % 25 === 0) {
        for (const source of room.find(FIND_SOURCES)) {  // a container beside each source (allowed at level 1)
            const path = spawn.pos.findPathTo(source, {ignoreCreeps: true});
            const by = path[path.length - 2];
            if (by) room.createConstructionSite(by.x, by.y, STRUCTURE_CONTAINER);
        }
    }
    if (room.controller.level >= 2 && Game.time % 10 === 0) {
        const around = [[-2, -2], [2, -2], [-2, 2], [2, 2], [0, -3], [0, 3]];
        for (const [dx, dy] of around) {
            room.createConstructionSite(spawn.pos.x + dx, spawn.pos.y + dy, STRUCTURE_EXTENSION);
        }
    }
    for (const creep of Object.values(Game.creeps)) if (!creep.spawning) work(creep, spawn);
    if (Game.time % 10 === 0 || !global.counted) { global.counted = true; console.log(count(room)); }
};
"""
GOOD_BUILD = "const remembered = creep.memory.site && Game.getObjectById(creep.memory.site);"
#: The regression: a "refactor" of the builder that reads a Memory field no builder has (only builders reach it).
BAD_BUILD = "const remembered = Game.getObjectById(creep.memory.target.id);"


def bot(upgraders: int, build: str) -> str:
    return BOT.replace("UPGRADERS", str(upgraders)).replace("REMEMBER", build)


def commit(repo: Path, code: str, message: str) -> None:
    (repo / "main.js").write_text(code, encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", message)


def env_for(user: ServerUser, home: Path) -> dict[str, str]:
    scratch = home / "tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "TMPDIR": str(scratch),
        "GITOPS_PRIVATE_SERVER": os.environ.get("PRIVATE_SERVER_DIR", str(ROOT / ".private-server")),
        "GITOPS_STATE_DIR": str(home / "state"),
        "GITOPS_KEEP_REHEARSAL_WORLD": "1",
        "NO_COLOR": "1",
        "SCREEPS_USER": user.username,
        "SCREEPS_PASSWORD": user.password,
    }


def gitops(
    repo: Path, env: dict[str, str], *args: str, timeout: float = 600
) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "gitops", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return done, time.monotonic() - started


def spawn_place(server: PrivateServer) -> tuple[str, int, int]:
    """A free room (normal, no owner, no keepers, the most sources) and a plain tile at least 3 from walls, exits
    and objects, nearest the room's objects."""
    found = server.cli(
        "(async () => { const db = storage.db;"
        " const free = (await db['rooms.objects'].find({type: 'controller'})).filter(c => !c.user).map(c => c.room);"
        " const rooms = await db.rooms.find({status: 'normal'});"
        " const open = new Set(rooms.filter(r => !r.sourceKeepers).map(r => r._id));"
        " const sources = {}; for (const s of await db['rooms.objects'].find({type: 'source'}))"
        " sources[s.room] = (sources[s.room] || 0) + 1;"
        " const room = free.filter(r => open.has(r))"
        ".sort((a, b) => (sources[b] || 0) - (sources[a] || 0) || (a < b ? -1 : 1))[0];"
        " const terrain = (await db['rooms.terrain'].findOne({room})).terrain;"
        " const objects = (await db['rooms.objects'].find({room})).map(o => [o.x, o.y]);"
        " return {room, terrain, objects}; })()"
    )
    room, terrain, objects = found["room"], found["terrain"], found["objects"]
    best: tuple[float, int, int] | None = None
    for y in range(5, 45):
        for x in range(5, 45):
            clear = all(terrain[(y + dy) * 50 + x + dx] == "0" for dx in range(-3, 4) for dy in range(-3, 4))
            near = any(abs(ox - x) <= 3 and abs(oy - y) <= 3 for ox, oy in objects)
            if clear and not near:
                distance = sum(abs(ox - x) + abs(oy - y) for ox, oy in objects)
                if best is None or distance < best[0]:
                    best = (distance, x, y)
    assert best is not None, f"no clear tile in {room}"
    return room, best[1], best[2]


def live_colony(server: PrivateServer, user: ServerUser) -> dict[str, Any]:
    data = json.dumps(user.username)
    return dict(
        server.cli(
            f"(async () => {{ const db = storage.db; const u = await db.users.findOne({{username: {data}}});"
            " const mine = await db['rooms.objects'].find({user: u._id});"
            " const types = {};"
            " for (const o of mine) { const k = o.type + ' in ' + o.room; types[k] = (types[k] || 0) + 1; }"
            " const ctrl = mine.find(o => o.type === 'controller');"
            " const memory = JSON.parse(await storage.env.get(storage.env.keys.MEMORY + u._id) || '{}');"
            " return {time: Number(await storage.env.get(storage.env.keys.GAMETIME)), types,"
            " level: ctrl && ctrl.level, progress: ctrl && ctrl.progress,"
            " memoryCreeps: Object.keys(memory.creeps || {}).length, memoryRooms: Object.keys(memory.rooms || {}),"
            " memoryChars: JSON.stringify(memory).length}; })()"
        )
    )


def game_time(server: PrivateServer, within: float = 60.0) -> int:
    """The live server's game time; its backend crashes now and then under load (lokijs' "fun is not a function",
    docs/private-server-facts.md) and restarts within seconds: ride that out."""
    deadline = time.monotonic() + within
    while True:
        try:
            return int(server.http.get("/api/game/time").json()["time"])
        except (PrivateServerError, ValueError, KeyError):
            if time.monotonic() > deadline:
                raise
            time.sleep(2)


def grow(server: PrivateServer, ticks: int, limit: float) -> tuple[int, float]:
    start, started = game_time(server), time.monotonic()
    while game_time(server) - start < ticks:
        if time.monotonic() - started > limit:
            break
        time.sleep(2)
    return game_time(server) - start, time.monotonic() - started


def counts_seen(tmp: Path, before: set[Path]) -> list[dict[str, Any]]:
    """The bot's last count line in each kept world's record (the worlds made since ``before``)."""
    seen: list[dict[str, Any]] = []
    for folder in sorted(set(tmp.glob("gitops-rehearsal-*")) - before):
        record = folder / "record.jsonl"
        lines = record.read_text("utf-8", errors="replace").splitlines() if record.exists() else []
        last: dict[str, Any] | None = None
        for line in lines:
            with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
                entry = json.loads(line)
                if entry["channel"] != "console":
                    continue
                for logged in json.loads(entry["data"])["messages"]["log"]:
                    text = html.unescape(logged)  # the server escapes a console line for the game's web page
                    if text.startswith("colony {"):
                        last = json.loads(text.removeprefix("colony "))
        if last is not None:
            seen.append(last)
    return seen


def requests_sent(state: Path) -> dict[str, int]:
    """How many requests of each endpoint the ledgers of ``state`` hold (every request a command sent)."""
    counts: dict[str, int] = {}
    for path in state.rglob("*.json"):
        with contextlib.suppress(ValueError, AttributeError):
            for endpoint, stamps in json.loads(path.read_text("utf-8")).get("sent", {}).items():
                counts[endpoint] = counts.get(endpoint, 0) + len(stamps)
    return counts


@contextlib.contextmanager
def running_server(tick_ms: int) -> Iterator[PrivateServer]:
    server = PrivateServer.start()
    try:
        server.cli(f"system.setTickDuration({tick_ms})")
        yield server
    finally:
        server.stop()


def rehearse(label: str, repo: Path, env: dict[str, str], ticks: int, *args: str) -> dict[str, Any]:
    tmp = Path(env["TMPDIR"])
    before = set(tmp.glob("gitops-rehearsal-*"))
    sent = requests_sent(Path(env["GITOPS_STATE_DIR"]))
    done, seconds = gitops(repo, env, "rehearse", "--ticks", str(ticks), "--json", *args)
    colony = [line for line in done.stderr.splitlines() if "colony of" in line or "--from-server:" in line]
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        doc = {}
    after = requests_sent(Path(env["GITOPS_STATE_DIR"]))
    verdicts = {side: (doc.get(side) or {}).get("result") for side in ("head", "base")}
    failed = {side: (doc.get(side) or {}).get("failed_ticks") for side in ("head", "base")}
    result = {
        "label": label,
        "args": " ".join(args),
        "exit": done.returncode,
        "seconds": round(seconds, 1),
        "verdicts": verdicts,
        "failed_ticks": failed,
        "colony_lines": colony,
        "counts_seen": counts_seen(tmp, before),
        "requests": {k: n - sent.get(k, 0) for k, n in after.items() if n > sent.get(k, 0)},
    }
    if done.returncode not in (0, 9):
        result["stderr"] = done.stderr[-3000:]
    for folder in set(tmp.glob("gitops-rehearsal-*")) - before:
        shutil.rmtree(folder, ignore_errors=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grow", type=int, default=600, help="ticks the live colony grows (default 600)")
    parser.add_argument("--tick-ms", type=int, default=20, help="the live server's tick duration (default 20)")
    parser.add_argument("--ticks", type=int, default=30, help="ticks of each rehearsal (default 30)")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    report: dict[str, Any] = {}
    home = Path(tempfile.mkdtemp(prefix="colony-trial-"))
    try:
        with running_server(options.tick_ms) as server:
            user = server.register()
            room, x, y = spawn_place(server)
            user.call("POST", "/api/game/place-spawn", json={"room": room, "x": x, "y": y, "name": "Spawn1"})
            repo = home / "bot"
            repo.mkdir()
            _git(repo, "init", "-q")
            manifest = {
                "version": 1,
                "servers": {
                    "live": {"url": server.url, "username_env": "SCREEPS_USER", "password_env": "SCREEPS_PASSWORD"}
                },
                "branches": [
                    {"server": "live", "branch": "main", "root": ".", "include": ["main.js"], "activate": ["world"]}
                ],
            }
            (repo / "gitops.yaml").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
            commit(repo, bot(2, GOOD_BUILD), "the colony's bot")
            env = env_for(user, home)
            applied, seconds = gitops(repo, env, "apply", "--yes")
            report["apply"] = {"exit": applied.returncode, "seconds": round(seconds, 1), "room": room, "spawn": [x, y]}
            if applied.returncode != 0:
                report["apply"]["output"] = (applied.stdout + applied.stderr)[-3000:]
                raise SystemExit(json.dumps(report, indent=2))
            grown, seconds = grow(server, options.grow, limit=options.grow * 3.0 + 60)
            server.cli("system.pauseSimulation()")
            time.sleep(3)  # the tick in flight still ends: read the colony once it has
            report["grow"] = {"ticks": grown, "seconds": round(seconds, 1), "colony": live_colony(server, user)}

            commit(repo, bot(3, GOOD_BUILD), "a third upgrader")
            runs = [
                rehearse("harmless head, colony", repo, env, options.ticks, "--from-server", "live", "--base", "HEAD~1")
            ]
            commit(repo, bot(3, BAD_BUILD), "builders: the remembered site is now memory.target")
            runs.append(rehearse("regression, fresh start", repo, env, options.ticks, "--base", "HEAD~1"))
            runs.append(
                rehearse("regression, colony", repo, env, options.ticks, "--from-server", "live", "--base", "HEAD~1")
            )
            report["rehearsals"] = runs
            report["password_in_output"] = any(user.password in json.dumps(r) for r in runs)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(json.dumps(report, indent=2) if options.json else _text(report))
    return 0


def _text(report: dict[str, Any]) -> str:
    lines = [f"apply: {report['apply']}", f"grow: {report['grow']}"]
    for run in report.get("rehearsals", []):
        lines.append(json.dumps(run))
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
