"""``gitops rehearse`` on the real private server: the install of ``scripts/private-server.sh`` (the suite's), pointed
at with ``GITOPS_PRIVATE_SERVER``; each run starts a throwaway world of its own and stops it.

No game account, no token: the environment of each run holds no credential, and the manifest's server is never
contacted. The world's folder is made under the test's ``TMPDIR``, so a server process left behind is found by its
working folder.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops.edges import privateserver
from gitops.errors import ExitCode
from tests.factories import git
from tests.private.harness import ROOT, install_problem

pytestmark = pytest.mark.private_server

INSTALL = Path(os.environ.get("PRIVATE_SERVER_DIR", ROOT / ".private-server"))
TICKS = 12

HEALTHY = """\
'use strict';
module.exports.loop = function () {
    const spawn = Game.spawns.Spawn1;  // the room and spawn the rehearsal gives the bot
    if (!spawn || !spawn.room.controller.my) throw new Error('no room of its own');
    Memory.seen = (Memory.seen || 0) + 1;
    console.log('tick ' + Game.time);
};
"""
THROWING = """\
'use strict';
module.exports.loop = function () {
    console.log('about to fail');
    throw new Error('the bot broke');
};
"""


@pytest.fixture(scope="module")
def installed() -> Path:
    problem = install_problem()
    if problem:
        pytest.fail(problem, pytrace=False)
    return INSTALL


def _bot(repo: Path, main: str) -> None:
    repo.mkdir(exist_ok=True)
    if not (repo / ".git").exists():
        git(repo, "init", "-q")
        manifest = {
            "version": 1,
            "servers": {"live": {"url": "http://127.0.0.1:9", "token_env": "SCREEPS_TOKEN"}},
            "branches": [{"server": "live", "branch": "main", "root": ".", "include": ["main.js"]}],
        }
        (repo / "gitops.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    (repo / "main.js").write_text(main, encoding="utf-8")


def _change(repo: Path, *, server: dict[str, Any] | None = None, branch: dict[str, Any] | None = None) -> None:
    """Set keys of the bot's manifest: its server's, its branch's."""
    manifest = yaml.safe_load((repo / "gitops.yaml").read_text(encoding="utf-8"))
    manifest["servers"]["live"].update(server or {})
    manifest["branches"][0].update(branch or {})
    (repo / "gitops.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")


def _rehearse(
    repo: Path, tmp_path: Path, install: Path, *args: str, ticks: int = TICKS, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``gitops rehearse`` in ``repo`` as a whole process (``env``: variables beside the run's own, e.g. the
    credentials of ``--from-server``); checks that the world's processes and folder are gone after it."""
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    run_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "TMPDIR": str(scratch),
        "GITOPS_PRIVATE_SERVER": str(install),
        "GITOPS_STATE_DIR": str(tmp_path / "state"),
        "NO_COLOR": "1",
        **(env or {}),
    }
    done = subprocess.run(
        [sys.executable, "-m", "gitops", "rehearse", "--ticks", str(ticks), *args],
        cwd=repo,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    # The world was stopped with its whole process group, and its folder removed.
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cwd(p).startswith(str(scratch))]
    assert not left, f"server processes left behind: {left}"
    assert not list(scratch.glob("gitops-rehearsal-*")), "the world's folder was left behind"
    return done


def _cwd(proc: Path) -> str:
    try:
        return os.readlink(proc / "cwd")
    except OSError:
        return ""


def _document(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        pytest.fail(f"not JSON (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    assert isinstance(doc, dict)
    return doc


def test_a_healthy_bot_is_healthy_with_its_cpu_and_memory(installed: Path, tmp_path: Path) -> None:
    repo = tmp_path / "bot"
    _bot(repo, HEALTHY)
    done = _rehearse(repo, tmp_path, installed, "--json")
    doc = _document(done)
    assert done.returncode == ExitCode.OK, done.stderr
    assert doc["result"] == "healthy"
    head = doc["head"]
    assert head["ticks"] == TICKS
    assert head["failed_ticks"] == 0
    assert head["errors"] == []
    assert head["cpu"]["samples"] == TICKS
    assert 0 <= head["cpu"]["mean"] <= head["cpu"]["max"]
    assert head["cpu"]["p95"] <= head["cpu"]["max"]
    assert head["memory_bytes"] == len(json.dumps({"seen": 0}, separators=(",", ":"))) + 1  # {"seen":NN}
    assert doc["base"] is None


def test_a_throwing_bot_against_its_healthy_base_is_failing_with_its_file_and_line(
    installed: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "bot"
    _bot(repo, HEALTHY)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "healthy")
    _bot(repo, THROWING)  # the working tree: the pull request's code
    done = _rehearse(repo, tmp_path, installed, "--base", "HEAD", "--json")
    doc = _document(done)
    assert done.returncode == ExitCode.UNHEALTHY, done.stderr
    assert doc["result"] == "failing"
    head, base = doc["head"], doc["base"]
    for one in (head, base):
        assert {"ticks", "failed_ticks", "errors", "cpu"} <= one.keys()
        assert {"mean", "p95"} <= one["cpu"].keys()
        assert one["ticks"] == TICKS
    assert base["result"] == "healthy"
    assert base["failed_ticks"] == 0
    assert head["failed_ticks"] == TICKS
    assert head["errors"] == [{"message": "Error: the bot broke", "where": "main:4", "count": TICKS}]
    [branch] = doc["branches"]
    assert branch["new_errors"] == head["errors"]
    assert base["commit"] == git(repo, "rev-parse", "HEAD").strip()


def test_an_install_that_is_not_there_is_one_clear_message_and_exit_14(tmp_path: Path) -> None:
    repo = tmp_path / "bot"
    _bot(repo, HEALTHY)
    done = _rehearse(repo, tmp_path, tmp_path / "nowhere")
    assert done.returncode == ExitCode.REHEARSAL_UNKNOWN
    assert "Traceback" not in done.stderr
    assert "holds no complete install" in done.stderr
    assert "GITOPS_PRIVATE_SERVER" in done.stderr
    assert "bash scripts/private-server.sh install" in done.stderr


def test_a_world_too_slow_for_its_ticks_is_unknown_and_exit_14(installed: Path, tmp_path: Path) -> None:
    repo = tmp_path / "bot"
    _bot(repo, HEALTHY)
    done = _rehearse(repo, tmp_path, installed, "--ticks", "5000", "--timeout", "3", "--json")
    doc = _document(done)
    assert done.returncode == ExitCode.REHEARSAL_UNKNOWN, done.stderr
    assert doc["result"] == "unknown"
    assert "not every bot had its ticks within 3 s" in doc["head"]["reason"]
    assert doc["head"]["ticks"] < 5000


def _world_processes(scratch: Path) -> list[Path]:
    return [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cwd(p).startswith(str(scratch))]


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGKILL, -signal.SIGKILL)])
def test_an_interrupted_or_killed_rehearsal_leaves_no_server_process(
    installed: Path, tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    repo = tmp_path / "bot"
    _bot(repo, HEALTHY)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "TMPDIR": str(scratch),
        "GITOPS_PRIVATE_SERVER": str(installed),
        "NO_COLOR": "1",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "gitops", "rehearse", "--ticks", "5000"],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        records: list[Path] = []
        while not any(r.stat().st_size > 0 for r in records) and time.monotonic() < deadline:
            time.sleep(0.2)
            records = list(scratch.glob("gitops-rehearsal-*/record.jsonl"))
        assert records, "the world did not start ticking within 60 s"
        assert _world_processes(scratch)
        process.send_signal(sig)
        assert process.wait(timeout=60) == code
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    # Ctrl-C: stopped by the tool, its folder removed. kill -9: the world's own watcher stops it within a second.
    deadline = time.monotonic() + 20
    while _world_processes(scratch) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _world_processes(scratch), "server processes outlived the rehearsal"
    if sig == signal.SIGINT:
        assert not list(scratch.glob("gitops-rehearsal-*"))


def test_a_base_that_is_no_commit_is_named_as_base_with_exit_6(installed: Path, tmp_path: Path) -> None:
    repo = tmp_path / "bot"
    _bot(repo, HEALTHY)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    done = _rehearse(repo, tmp_path, installed, "--base", "no-such-branch")
    assert done.returncode == ExitCode.LOCAL_CODE
    assert "Traceback" not in done.stderr
    assert "Error: --base no-such-branch: no such commit, branch or tag" in done.stderr


CATCHING = """\
'use strict';
module.exports.loop = function () {
    for (const name in Game.rooms) {
        try {
            Game.rooms[name].find(FIND_SOURCES).forEach(s => s.missing.energy);
        } catch (e) {
            console.log('room ' + name + ' failed: ' + e.stack);  // a real bot's catch per room
        }
    }
    console.log('tick ' + Game.time);
};
"""


def test_a_bot_that_catches_and_logs_its_errors_is_failing_with_its_line(installed: Path, tmp_path: Path) -> None:
    repo = tmp_path / "bot"
    _bot(repo, HEALTHY)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "healthy")
    _bot(repo, CATCHING)
    done = _rehearse(repo, tmp_path, installed, "--base", "HEAD", "--json")
    doc = _document(done)
    assert done.returncode == ExitCode.UNHEALTHY, done.stderr
    head, base = doc["head"], doc["base"]
    assert head["errors"] == []  # nothing reached the server: the bot caught it
    assert head["caught_error_ticks"] == TICKS
    assert head["caught_errors"] == [
        {
            "message": "TypeError: Cannot read properties of undefined (reading 'energy')",
            "where": "main:5",
            "count": TICKS,
        }
    ]
    assert "new caught errors" in head["reason"]
    assert base["result"] == "healthy"
    assert base["caught_error_ticks"] == 0
    [branch] = doc["branches"]
    assert branch["new_caught_errors"] == head["caught_errors"]
    # The console is diffed as patterns: the tick counter is one line, not one per tick.
    patterns = [line["pattern"] for line in branch["new_console_lines"]]
    assert "room WNNN failed: TypeError: Cannot read properties of undefined (reading 'energy')" in patterns
    assert not any(p.startswith("tick") for p in patterns)  # both sides log 'tick N'


BUSY = """\
'use strict';
// Busy enough to use some CPU each tick: path finding across its room, finds, and arithmetic.
module.exports.loop = function () {
    const spawn = Game.spawns.Spawn1;
    const room = spawn.room;
    let steps = 0;
    for (const source of room.find(FIND_SOURCES)) {
        steps += PathFinder.search(spawn.pos, {pos: source.pos, range: 1}).path.length;
        steps += room.findPath(spawn.pos, room.controller.pos, {ignoreCreeps: true}).length;
    }
    for (let i = 0; i < 40; i++) {  // to every corner of the room and back, without the cost matrix cache
        const target = new RoomPosition(i % 2 ? 3 : 46, i % 4 < 2 ? 3 : 46, room.name);
        steps += PathFinder.search(spawn.pos, {pos: target, range: 2}, {maxOps: 20000, roomCallback: () => {
            const costs = new PathFinder.CostMatrix();
            for (let j = 0; j < 2500; j += 7) costs.set(j % 50, Math.floor(j / 50), 2);
            return costs;
        }}).path.length;
    }
    Memory.steps = steps;
    Memory.status = Game.map.getRoomStatus(room.name).status;
};
"""


def test_an_a_a_run_reports_no_significant_change(installed: Path, tmp_path: Path) -> None:
    repo = tmp_path / "bot"
    _bot(repo, BUSY)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "busy")
    done = _rehearse(repo, tmp_path, installed, "--base", "HEAD", "--ticks", "40", "--json")
    doc = _document(done)
    assert done.returncode == ExitCode.OK, done.stderr
    [branch] = doc["branches"]
    head, base = doc["head"], doc["base"]
    # It does use CPU: about 3 per tick on a quiet 2-core machine (2.85 in one CI run), up to 10 under load.
    assert head["cpu"]["mean"] >= 1, head["cpu"]
    # The same room shape: the same paths, so the same memory, byte for byte.
    assert head["memory_bytes"] == base["memory_bytes"]
    cpu = branch["cpu_change"]
    assert cpu["low"] <= 0 <= cpu["high"], cpu
    assert cpu["significant"] is False
    assert branch["memory_change"]["significant"] is False
    assert branch["new_console_lines"] == []


ROOM_STATUS = """\
'use strict';
module.exports.loop = function () {
    const here = Game.spawns.Spawn1.room.name;
    console.log(here + ' is ' + Game.map.getRoomStatus(here).status);
    if (Memory.bucket === undefined) Memory.bucket = Game.cpu.bucket;  // the bucket it started with
    if (Game.cpu.limit !== 37 || Memory.bucket !== 4321) {
        throw new Error('limit ' + Game.cpu.limit + ', first bucket ' + Memory.bucket);
    }
};
"""


def test_a_bot_reading_the_room_status_is_healthy_with_its_servers_cpu(installed: Path, tmp_path: Path) -> None:
    repo = tmp_path / "bot"
    _bot(repo, ROOM_STATUS)
    _change(repo, server={"cpu": {"limit": 37, "bucket": 4321}})
    done = _rehearse(repo, tmp_path, installed, "--json")
    doc = _document(done)
    assert done.returncode == ExitCode.OK, done.stderr
    assert doc["head"]["errors"] == []
    assert doc["head"]["failed_ticks"] == 0
    # The server's cpu: in the manifest, else the bot would throw: Game.cpu.limit 37, the bucket 4321 at the start.
    assert doc["head"]["ticks"] == TICKS


SPINNING = """\
'use strict';
module.exports.loop = function () {
    for (;;) {}  // never returns: the server ends every tick at the CPU limit
};
"""


def test_a_bot_over_its_cpu_limit_has_its_terminations_counted(installed: Path, tmp_path: Path) -> None:
    repo = tmp_path / "bot"
    _bot(repo, SPINNING)
    # A small limit (the manifest's) and an empty bucket (the command line's, over the manifest's): each tick ends at
    # 20 CPU, and the empty bucket then skips ticks.
    _change(repo, server={"cpu": {"limit": 20, "bucket": 10000}})
    done = _rehearse(repo, tmp_path, installed, "--bucket", "0", "--json")
    doc = _document(done)
    assert done.returncode == ExitCode.UNHEALTHY, done.stderr
    head = doc["head"]
    assert head["cpu_terminations"] == TICKS
    assert head["failed_ticks"] == TICKS
    messages = {e["message"] for e in head["errors"]}
    assert any(m.startswith("Script execution timed out") for m in messages), messages
    assert any("CPU bucket is empty" in m for m in messages), messages


MAPPED_TS = """\
interface Counter {
  seen: number;
}

export function loop(): void {
  const memory = (globalThis as any).Memory as Counter;
  memory.seen = (memory.seen || 0) + 1;
  if (memory.seen > 0) {
    throw new Error("mapped failure");
  }
}
"""
# What tsc 5 (--sourceMap --module commonjs --target es2019) wrote for MAPPED_TS, kept as a bundle and its map.
MAPPED_JS = """\
"use strict";
Object.defineProperty(exports, "__esModule", { value: true });
exports.loop = void 0;
function loop() {
    const memory = globalThis.Memory;
    memory.seen = (memory.seen || 0) + 1;
    if (memory.seen > 0) {
        throw new Error("mapped failure");
    }
}
exports.loop = loop;
//# sourceMappingURL=main.js.map
"""
MAPPED_MAP = (
    '{"version":3,"file":"main.js","sourceRoot":"","sources":["../../src/main.ts"],"names":[],"mappings":";;;AAIA,'
    "SAAgB,IAAI;IAClB,MAAM,MAAM,GAAI,UAAkB,CAAC,MAAiB,CAAC;IACrD,MAAM,CAAC,IAAI,GAAG,CAAC,MAAM,CAAC,IAAI,IAAI,CAAC,CAAC,GAAG,CAAC,CAAC;"
    'IACrC,IAAI,MAAM,CAAC,IAAI,GAAG,CAAC,EAAE;QACnB,MAAM,IAAI,KAAK,CAAC,gBAAgB,CAAC,CAAC;KACnC;AACH,CAAC;AAND,oBAMC"}'
)


def test_a_source_mapped_bundle_names_the_source_file_and_line(installed: Path, tmp_path: Path) -> None:
    repo = tmp_path / "bot"
    _bot(repo, MAPPED_JS)
    (repo / "main.js.map").write_text(MAPPED_MAP, encoding="utf-8")
    (repo / "src").mkdir()
    (repo / "src" / "main.ts").write_text(MAPPED_TS, encoding="utf-8")
    _change(repo, branch={"include": ["main.js", "main.js.map"]})
    done = _rehearse(repo, tmp_path, installed, "--json")
    doc = _document(done)
    assert done.returncode == ExitCode.UNHEALTHY, done.stderr
    assert doc["head"]["errors"] == [{"message": "Error: mapped failure", "where": "src/main.ts:9", "count": TICKS}]


def test_a_branch_without_main_is_the_bots_fault_before_any_bot_runs(installed: Path, tmp_path: Path) -> None:
    repo = tmp_path / "bot"
    _bot(repo, HEALTHY)
    _change(repo, branch={"include": ["lib.js"]})
    (repo / "lib.js").write_text("module.exports = 1;\n", encoding="utf-8")
    done = _rehearse(repo, tmp_path, installed)
    assert done.returncode == ExitCode.LOCAL_CODE, done.stderr
    assert "Traceback" not in done.stderr
    assert "has no module 'main'" in done.stderr
    assert "the bot's fault, not the server's" in done.stderr


def test_code_that_does_not_parse_is_refused_before_any_bot_runs(installed: Path, tmp_path: Path) -> None:
    repo = tmp_path / "bot"
    _bot(repo, "module.exports.loop = function () {\n")
    started = time.monotonic()
    done = _rehearse(repo, tmp_path, installed)
    assert done.returncode == ExitCode.LOCAL_CODE, done.stderr
    assert "does not parse" in done.stderr
    assert "main.js" in done.stderr
    assert time.monotonic() - started < 30  # no bot ran: the world launched meanwhile was stopped (_rehearse checks)


def test_a_base_without_main_is_failing_for_the_bots_fault_and_the_head_is_judged(
    installed: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "bot"
    _bot(repo, HEALTHY)
    (repo / "main.js").rename(repo / "lib.js")  # the base: no main
    _change(repo, branch={"include": ["*.js"]})
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "no main")
    _bot(repo, HEALTHY)  # the pull request adds it
    done = _rehearse(repo, tmp_path, installed, "--base", "HEAD", "--json")
    doc = _document(done)
    assert done.returncode == ExitCode.OK, done.stderr
    assert doc["head"]["result"] == "healthy"
    assert doc["base"]["result"] == "failing"
    assert doc["base"]["reason"] == "no module 'main': the base's code does not run (the bot's fault, not the server's)"
    assert "1 bot(s) in a throwaway world" in done.stderr  # the base needed no world of its own


def test_a_head_that_uses_more_cpu_is_a_significant_change(installed: Path, tmp_path: Path) -> None:
    repo = tmp_path / "bot"
    _bot(repo, BUSY)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "busy")
    # The pull request: 15 CPU more in every tick, as its own Game.cpu.getUsed() counts it.
    burn = "const until = Game.cpu.getUsed() + 15;\n    while (Game.cpu.getUsed() < until) steps += 1e-9;\n"
    _bot(repo, BUSY.replace("Memory.steps = steps;", burn + "    Memory.steps = steps;"))
    done = _rehearse(repo, tmp_path, installed, "--base", "HEAD", "--ticks", "40", "--json")
    doc = _document(done)
    assert done.returncode == ExitCode.OK, done.stderr
    [branch] = doc["branches"]
    cpu = branch["cpu_change"]
    assert cpu["significant"] is True, cpu
    assert cpu["low"] > 0, cpu
    # About the 15 it added, within 5 either side of the interval: the head's ticks read the 15 plus its loop's own
    # overhead and the game's rounding up (18-19 against the base's 2-3 on a quiet tick), and a tick's spikes
    # (garbage collection, the machine's other work) widen or shift the interval; 16.5 to 18.6 was seen.
    assert cpu["low"] - 5 <= 15 <= cpu["high"] + 5, cpu


def test_a_world_whose_port_was_taken_meanwhile_starts_on_another(
    installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another program binds the port chosen for a world's admin CLI before the world does: the world ends itself
    (EADDRINUSE in its log) and is started again on another port, and that one is this world's (its identity)."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        chosen = [taken]
        free_port = privateserver.free_port
        monkeypatch.setattr(privateserver, "free_port", lambda: chosen.pop() if chosen else free_port())
        with privateserver.running_world(installed, {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}) as world:
            assert world.cli_port != taken
            assert world.cli("gitopsRehearsal") == world.identity
            assert "EADDRINUSE" not in world.logs()  # the second attempt's log, fresh
        assert chosen == []  # the taken port was the first chosen
        assert not world.data_dir.exists()


def test_worlds_launched_and_never_waited_for_are_stopped_with_their_folders(installed: Path) -> None:
    """A rehearsal launches its worlds before it reads the code (``launched_worlds``); when the code is refused they
    are stopped before anything waited for them: no process of theirs, and no folder, is left."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    with privateserver.launched_worlds(installed, env, 2) as worlds:
        groups = [world._process.pid for world in worlds if world._process is not None]
        folders = [world.data_dir for world in worlds]
        assert len(groups) == 2
        assert all(folder.is_dir() for folder in folders)
    assert not any(privateserver._group_alive(group) for group in groups)
    assert not any(folder.exists() for folder in folders)


def test_a_launched_world_waited_for_later_answers_with_its_identity(installed: Path) -> None:
    """``ready_worlds`` waits for worlds launched earlier: the admin CLI that answers is this world's."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    with privateserver.launched_worlds(installed, env, 1) as worlds:
        privateserver.ready_worlds(worlds)
        assert worlds[0].cli("gitopsRehearsal") == worlds[0].identity
    assert not worlds[0].data_dir.exists()
