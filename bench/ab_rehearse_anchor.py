"""``gitops rehearse`` against the community's test harness: the same bot's 100 ticks, paired (issue 48).

    .venv/bin/python bench/ab_rehearse_anchor.py --install      # once: the harness into .bench/anchor (npm)
    .venv/bin/python bench/ab_rehearse_anchor.py                # 5 interleaved rounds
    .venv/bin/python bench/ab_rehearse_anchor.py --rounds 9 --json

The anchor is npm ``screeps-server-mockup`` (1.5.1, what players use to test a bot on the real engine), installed
into the git-ignored ``.bench/anchor``. Its own ``screeps`` does not build on Node.js 20 here (its nested
``@screeps/driver`` native module fails to compile against Node 20's headers; isolated-vm needs 5.x), so it is
installed without install scripts and its ``screeps`` and ``@screeps/*`` removed: it runs on the same engine as the
rehearsal, the install ``GITOPS_PRIVATE_SERVER`` names (``NODE_PATH``). ``bench/anchor_mockup.js`` drives it as its
README shows: start, reset the world, one room with a controller and two sources, the bot with its spawn,
``server.tick()`` in a loop. The bot is ``examples/typescript`` built once (``node build.mjs``; its ``dist/main.js``
is the anchor's ``main``), in a fresh Git repository as ``bench_rehearse.py`` makes it. Each round runs, as whole
processes, in alternating order (A B, then B A, ...):

* **rehearse**: ``gitops rehearse --ticks 100 --json`` (build reused from the build cache, start a world, seed the
  bot, 100 ticks plus the settling ones, judge, stop);
* **anchor**: ``node --require no_snapshot.js bench/anchor_mockup.js MODULES 100`` (start the harness's server, add
  the bot, 100 ticks, stop; checked: the game time advanced by 100 and the bot's code ran in each of them, no error).
  The preload is the rehearsal's own (``scripts/private-server/no_snapshot.js``), and the harness's forked runner
  inherits it: without it every tick of the bot failed at the runtime's start (``ReferenceError: _ is not defined``:
  the engine's V8 snapshot is broken on Node.js 20), so no bot code ran on the anchor's side (before 2026-12-02).

It prints each round's wall times (spawn to exit) and the ratio anchor / rehearse, then the medians; the goal of
issue 48 is a median ratio of at least 5.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_rehearse import bench_env, gitops, interleaved, make_repo  # noqa: E402

ANCHOR_DIR = ROOT / ".bench" / "anchor"
ANCHOR_SCRIPT = ROOT / "bench" / "anchor_mockup.js"
#: The rehearsal's own preload (the engine's V8 snapshot is broken on Node.js 20): without it no bot code runs.
PRELOAD = ROOT / "scripts" / "private-server" / "no_snapshot.js"
ANCHOR_PACKAGE = {
    "name": "gitops-bench-anchor",
    "private": True,
    "dependencies": {"screeps-server-mockup": "1.5.1"},
    # Its screeps' own pins name a Git tarball of isolated-vm (not reachable here); removed after the install anyway.
    "overrides": {"isolated-vm": "5.0.4", "node-gyp": "12.2.0"},
}
#: What is removed after the install: the harness then finds the engine through NODE_PATH (the rehearsal's install).
NESTED_ENGINE = ("screeps", "@screeps", "isolated-vm")
TICKS = 100
GOAL = 5.0


def install(folder: Path) -> None:
    """The harness from the npm registry into ``folder``, without install scripts and without its own engine."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text(json.dumps(ANCHOR_PACKAGE, indent=2) + "\n")
    npm = shutil.which("npm")
    if npm is None:
        sys.exit("Error: npm is not on PATH: install Node.js 20 or newer")
    done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=folder, check=False)
    if done.returncode != 0:
        sys.exit(f"Error: npm install of screeps-server-mockup in {folder} exited {done.returncode}")
    for name in NESTED_ENGINE:
        shutil.rmtree(folder / "node_modules" / name, ignore_errors=True)


def check_anchor(figures: dict[str, object], out: str) -> None:
    """Like for like: the anchor's world ran 100 ticks, and the bot's code ran in each of them without an error."""
    if figures["game_ticks"] != TICKS or figures["ran_ticks"] != TICKS or figures["failed_ticks"] != 0:
        sys.exit(f"Error: the anchor did not run the bot's code in each of its {TICKS} ticks:\n{out[-2000:]}")


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"Error: {' '.join(command[:3])} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return wall, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--anchor-dir", type=Path, default=ANCHOR_DIR, help="where the harness is installed")
    parser.add_argument("--install", action="store_true", help="install the harness first (npm registry)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    anchor = args.anchor_dir.resolve()
    if args.install:
        install(anchor)
    if not (anchor / "node_modules" / "screeps-server-mockup").is_dir():
        sys.exit(f"Error: screeps-server-mockup is not installed in {anchor}: run this with --install first")
    env = bench_env()
    server = os.environ.get("GITOPS_PRIVATE_SERVER") or str(ROOT / ".private-server")
    rehearse_env = {**env, "GITOPS_PRIVATE_SERVER": server}
    anchor_env = {
        **env,
        "NODE_PATH": os.pathsep.join([str(anchor / "node_modules"), str(Path(server) / "node_modules")]),
    }
    with tempfile.TemporaryDirectory(prefix="bench-anchor-") as scratch:
        repo = make_repo(Path(scratch))
        subprocess.run(["node", "build.mjs"], cwd=repo, check=True, capture_output=True)
        modules = Path(scratch) / "modules.json"
        modules.write_text(json.dumps({"main": (repo / "dist" / "main.js").read_text()}))
        where = {"rehearse": repo, "anchor": Path(scratch) / "anchor"}  # the harness writes ./server
        where["anchor"].mkdir()
        commands = {
            "rehearse": ([gitops(), "rehearse", "--ticks", str(TICKS), "--json"], rehearse_env),
            "anchor": (["node", "--require", str(PRELOAD), str(ANCHOR_SCRIPT), str(modules), str(TICKS)], anchor_env),
        }

        def run(name: str) -> float:
            command, command_env = commands[name]
            wall, out = timed(command, where[name], command_env)
            if name == "rehearse" and json.loads(out)["result"] != "healthy":
                sys.exit(f"Error: the rehearsal was not HEALTHY:\n{out[-2000:]}")
            if name == "anchor":
                check_anchor(json.loads(out.splitlines()[-1]), out)
            return wall

        rounds = interleaved(args.rounds, "anchor", "rehearse", run, quiet=args.json)
    median = {name: statistics.median(r[name] for r in rounds) for name in ("rehearse", "anchor", "ratio")}
    figures = {"ticks": TICKS, "rounds": rounds, "median": median, "cpus": os.cpu_count(), "goal": GOAL}
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(
            f"{TICKS} ticks of examples/typescript, {args.rounds} rounds, {os.cpu_count()} CPUs: median rehearse "
            f"{median['rehearse']:.2f} s, anchor {median['anchor']:.2f} s, ratio {median['ratio']:.2f} "
            f"(goal {GOAL:g}x: {'met' if median['ratio'] >= GOAL else 'not met'})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
