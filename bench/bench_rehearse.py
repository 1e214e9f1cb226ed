"""How long ``gitops rehearse`` takes on a built TypeScript starter bot (issue 39: fast enough for every pull request).

    .venv/bin/python bench/bench_rehearse.py                  # 3 rounds, the install of .private-server
    .venv/bin/python bench/bench_rehearse.py --rounds 5 --json
    .venv/bin/python bench/bench_rehearse.py --first-install  # also: a fresh install into an empty cache (network)

The bot is ``examples/typescript`` (built by its ``build: node build.mjs``), copied into a fresh Git repository with
two commits: the base is the example, the head adds a log line. Each round runs, as whole processes:

* **head**: ``gitops rehearse --ticks 100`` (build the working tree, start a world, 100 ticks, stop);
* **base+head**: ``gitops rehearse --ticks 100 --base HEAD~1`` (and the base built in a temporary checkout; two
  worlds of the same start, side by side).

The server is the one ``GITOPS_PRIVATE_SERVER`` names, else ``.private-server`` (``bash scripts/private-server.sh
install``). The budget (issue 39): head at most 60 s, base+head at most 100 s, wall time from spawn to exit.
``--first-install`` first times a rehearsal whose server is installed into an empty cache folder (``npm ci`` of the
pinned server, native modules built): that is what the first use costs, and what the Action's cache saves.
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
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "typescript"
BUDGET = {"head": 60.0, "base+head": 100.0}
TICKS = 100


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=Bench", "-c", "user.email=bench@example.invalid", "-c", "commit.gpgsign=false", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def make_repo(where: Path) -> Path:
    repo = where / "bot"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("dist", "node_modules"))
    (repo / ".gitignore").write_text("dist/\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base: the TypeScript starter")
    main = repo / "src" / "main.ts"
    main.write_text(
        main.read_text().replace(
            "export function loop(): void {", "export function loop(): void {\n  console.log(`tick ${Game.time}`);"
        )
    )
    _git(repo, "commit", "-qam", "head: log every tick")
    return repo


def bench_env() -> dict[str, str]:
    """This environment without the tool's, Python's and node's own variables, and without colours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITOPS_", "PYTHON", "NODE_"))}
    env["NO_COLOR"] = "1"
    return env


def interleaved(
    rounds: int, first: str, second: str, run: Callable[[str], float], *, quiet: bool = False
) -> list[dict[str, float]]:
    """``rounds`` rounds of ``run(first)`` and ``run(second)`` (wall seconds), in alternating order (first second,
    then second first, ...); each round's walls and ``ratio``, first / second, printed as they come unless
    ``quiet``."""
    done: list[dict[str, float]] = []
    for index in range(rounds):
        order = (first, second) if index % 2 == 0 else (second, first)
        walls = {name: run(name) for name in order}
        walls["ratio"] = walls[first] / walls[second]
        done.append(walls)
        if not quiet:
            print(
                f"  round {index + 1}: {first} {walls[first]:6.2f} s  {second} {walls[second]:6.2f} s"
                f"  {first}/{second} {walls['ratio']:5.2f}",
                flush=True,
            )
    return done


def gitops() -> str:
    beside = Path(sys.executable).parent / "gitops"
    return str(beside) if beside.exists() else "gitops"


def run(repo: Path, env: dict[str, str], *args: str) -> tuple[float, dict[str, object], str]:
    started = time.perf_counter()
    done = subprocess.run(
        [gitops(), "rehearse", "--ticks", str(TICKS), "--json", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    wall = time.perf_counter() - started
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        sys.exit(f"gitops rehearse {' '.join(args)} exited {done.returncode} without JSON:\n{done.stderr}")
    if done.returncode != 0:
        sys.exit(f"gitops rehearse {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return wall, doc, done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--first-install", action="store_true", help="also time a fresh install (uses the network)")
    args = parser.parse_args()
    env = bench_env()
    install = os.environ.get("GITOPS_PRIVATE_SERVER") or str(ROOT / ".private-server")
    figures: dict[str, object] = {"ticks": TICKS, "rounds": args.rounds, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="bench-rehearse-") as scratch:
        repo = make_repo(Path(scratch))
        if args.first_install:
            cache = Path(scratch) / "cache"
            wall, _, stderr = run(repo, {**env, "GITOPS_CACHE_DIR": str(cache)})
            said = [line for line in stderr.splitlines() if "installed the private server" in line]
            figures["first_install"] = {"wall": round(wall, 1), "said": said[0] if said else None}
        env["GITOPS_PRIVATE_SERVER"] = install
        walls: dict[str, list[float]] = {"head": [], "base+head": []}
        for _ in range(args.rounds):
            for name, extra in (("head", ()), ("base+head", ("--base", "HEAD~1"))):
                wall, doc, _ = run(repo, env, *extra)
                walls[name].append(wall)
                figures[f"{name}_result"] = doc["result"]
        figures["wall"] = {
            name: {"min": round(min(w), 2), "median": round(statistics.median(w), 2), "max": round(max(w), 2)}
            for name, w in walls.items()
        }
        figures["within_budget"] = {name: max(w) <= BUDGET[name] for name, w in walls.items()}
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"gitops rehearse --ticks {TICKS}, examples/typescript, {args.rounds} rounds, {os.cpu_count()} CPUs")
        if "first_install" in figures:
            print(f"  first use (install into an empty cache, then the rehearsal): {figures['first_install']}")
        for name, w in walls.items():
            verdict = "within" if max(w) <= BUDGET[name] else "OVER"
            print(
                f"  {name:<10} wall min {min(w):6.2f} s  median {statistics.median(w):6.2f} s  max {max(w):6.2f} s"
                f"  ({verdict} the {BUDGET[name]:.0f} s budget)"
            )
    return 0 if all(max(w) <= BUDGET[n] for n, w in walls.items()) else 1


if __name__ == "__main__":
    sys.exit(main())
