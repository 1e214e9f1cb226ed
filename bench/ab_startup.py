"""Two versions of gitops started side by side, ``gitops --help`` and ``gitops validate``: a before/after pair.

Issue 38: start-up is what a redesign of the imports can make slower without any test noticing. This runs each
revision's ``gitops`` package taken from Git (``git archive``, byte-compiled) with the measured install's interpreter
(``.bench/gitops-venv``, as ``ab_network.py`` does), alternately, each start through ``bench/launch.py`` (whose
``wait4`` figures are the command's own), and prints the median over rounds of the per-pair ratio B/A of wall time
and each side's median. ``validate`` reads a bundled example's manifest (from the validated-manifest cache after the
first round, as a user's second run does) and its local code; no server is contacted.

    .venv/bin/python bench/ab_startup.py --a main --b HEAD             # 21 rounds
    .venv/bin/python bench/ab_startup.py --a 9f5c5fd --b HEAD --rounds 41
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from ab_network import PYTHON, checkout  # noqa: E402

EXAMPLE = ROOT / "examples" / "basic"
COMMANDS = {"gitops --help": ["--help"], "gitops validate": ["validate", "--manifest", str(EXAMPLE / "gitops.yaml")]}


def start(script: Path, args: list[str], env: dict[str, str], figures: Path) -> float:
    """Wall seconds of one start of ``script`` with ``args``, from spawn to exit."""
    launcher = [sys.executable, "-S", "-E", str(ROOT / "bench" / "launch.py"), str(figures), str(script), *args]
    done = subprocess.run(launcher, env=env, capture_output=True, check=False, timeout=60)
    if done.returncode != 0:
        raise SystemExit(f"{script} {' '.join(args)} exited {done.returncode}: {done.stderr.decode()[-400:]}")
    return float(json.loads(figures.read_text(encoding="utf-8"))["wall"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", required=True, help="the revision before (e.g. main)")
    parser.add_argument("--b", required=True, help="the revision after (e.g. HEAD)")
    parser.add_argument("--rounds", type=int, default=21)
    options = parser.parse_args()
    if not PYTHON.exists():
        raise SystemExit(
            f"{PYTHON} is missing: python3 -m venv .bench/gitops-venv && .bench/gitops-venv/bin/pip install ."
        )
    with tempfile.TemporaryDirectory(prefix="gitops-ab-startup-") as tmp:
        base = Path(tmp)
        scripts = {"A": checkout(options.a, base / "a"), "B": checkout(options.b, base / "b")}
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "GITOPS_", "NODE_"))}
        env["XDG_CACHE_HOME"] = str(base / "cache")  # the manifest cache of these runs only
        env["XDG_STATE_HOME"] = str(base / "state")
        walls: dict[str, dict[str, list[float]]] = {name: {"A": [], "B": []} for name in COMMANDS}
        for number in range(options.rounds + 1):  # the first round warms the caches and is not counted
            order = ("A", "B") if number % 2 else ("B", "A")
            for name, args in COMMANDS.items():
                for side in order:
                    wall = start(scripts[side], args, env, base / "figures.json")
                    if number:
                        walls[name][side].append(wall)
        print(f"A = {options.a}, B = {options.b}; {options.rounds} paired rounds (medians), after 1 warm-up round")
        print(f"{'command':<20} {'B/A wall':>9} | {'A ms':>6} {'B ms':>6}")
        for name, sides in walls.items():
            ratio = statistics.median(b / a for a, b in zip(sides["A"], sides["B"], strict=True))
            a_ms, b_ms = (1000 * statistics.median(sides[s]) for s in ("A", "B"))
            print(f"{name:<20} {ratio:>9.2f} | {a_ms:>6.1f} {b_ms:>6.1f}")


if __name__ == "__main__":
    main()
