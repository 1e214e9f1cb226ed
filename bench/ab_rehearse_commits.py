"""``gitops rehearse`` of two commits of this repository, paired: how much a change to the rehearsal saves (issue 48).

    .venv/bin/python bench/ab_rehearse_commits.py OLD NEW               # 5 interleaved rounds, head alone
    .venv/bin/python bench/ab_rehearse_commits.py OLD NEW --base --rounds 4 --json
    .venv/bin/python bench/ab_rehearse_commits.py OLD NEW --ticks 1 --rounds 12   # the start-up, without most ticks

Each commit is checked out into a temporary worktree and run from there as a whole process (``python
run-from-tree``: the tree's ``gitops`` package and its ``scripts/private-server/`` files, ahead of the editable
install), on the same bot as ``bench_rehearse.py`` (``examples/typescript`` in a fresh Git repository, built before
the first round), ``gitops rehearse --ticks 100 --json`` (``--ticks N``: N ticks; with one, a change to the start-up
is seen without the noise of the ticks; ``--base``: also ``--base HEAD~1``, two worlds). Rounds alternate the order
(A B, then B A, ...); it prints each round's wall times (spawn to exit), the ratio old / new, and the medians. Every
run must be HEALTHY. The server is ``GITOPS_PRIVATE_SERVER``'s, else ``.private-server``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_rehearse import bench_env, interleaved, make_repo  # noqa: E402

TICKS = 100
#: Runs ``gitops`` from the source tree named first, not from the editable install (whose finder comes first).
RUN_FROM_TREE = """
import sys
tree = sys.argv.pop(1)
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, tree)
import gitops.cli
gitops.cli.main(sys.argv[1:])
"""


def worktree(commit: str, where: Path) -> Path:
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(where), commit], cwd=ROOT, check=True)
    return where


def timed(tree: Path, repo: Path, env: dict[str, str], extra: list[str], ticks: int = TICKS) -> float:
    command = [sys.executable, "-c", RUN_FROM_TREE, str(tree), "rehearse", "--ticks", str(ticks), "--json", *extra]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=900, check=False)
    wall = time.perf_counter() - started
    try:
        result = json.loads(done.stdout)["result"]
    except (ValueError, KeyError):
        result = None
    if result != "healthy":
        sys.exit(f"Error: rehearse from {tree} exited {done.returncode}, not HEALTHY:\n{done.stderr[-2000:]}")
    return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--base", action="store_true", help="base and head (two worlds), not head alone")
    parser.add_argument("--ticks", type=int, default=TICKS, help="ticks each bot runs (few: the start-up alone)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    env = bench_env()
    env["GITOPS_PRIVATE_SERVER"] = os.environ.get("GITOPS_PRIVATE_SERVER") or str(ROOT / ".private-server")
    extra = ["--base", "HEAD~1"] if args.base else []
    rounds: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-ab-rehearse-") as scratch:
        trees = {name: worktree(getattr(args, name), Path(scratch) / name) for name in ("old", "new")}
        try:
            repo = make_repo(Path(scratch))
            subprocess.run(["node", "build.mjs"], cwd=repo, check=True, capture_output=True)
            rounds = interleaved(
                args.rounds,
                "old",
                "new",
                lambda name: timed(trees[name], repo, env, extra, args.ticks),
                quiet=args.json,
            )
        finally:
            for tree in trees.values():
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)
    median = {name: statistics.median(r[name] for r in rounds) for name in ("old", "new", "ratio")}
    what = "base+head" if args.base else "head"
    if args.json:
        print(
            json.dumps(
                {
                    "what": what,
                    "ticks": args.ticks,
                    "old": args.old,
                    "new": args.new,
                    "rounds": rounds,
                    "median": median,
                }
            )
        )
    else:
        print(
            f"{what}, {args.ticks} ticks, {args.rounds} rounds: median old {median['old']:.2f} s, new "
            f"{median['new']:.2f} s, old/new {median['ratio']:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
