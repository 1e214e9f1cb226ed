"""Two versions of gitops side by side over the emulated internet path: a before/after pair of commits (issue 23).

``bench_network.py`` pairs gitops with node-screeps-api; on a shared machine its absolute times move by a factor
of two, and comparing two runs of it compares two machine loads. This pairs two versions of gitops instead, in the
same run: each revision's ``gitops`` package is taken from Git (``git archive``) into a temporary folder and run
with the measured install's interpreter (``.bench/gitops-venv``: the same dependencies for both), its source
byte-compiled first. Per round and scenario both versions run once, in rotating order, each against its own
account of one official-mode stand-in behind one ``netem`` path; every run is checked on the server afterwards
(the branch holds exactly the repository's modules). Reported: the median over rounds of the per-pair ratio B/A of
wall time, and each side's median.

    .venv/bin/python bench/ab_network.py --a main --b HEAD                   # RTT 80 ms, 20/100 Mbit/s, 5 rounds
    .venv/bin/python bench/ab_network.py --a main --b HEAD --rtt-ms 20 --up-mbit 100
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench_network import change_modules, expected_modules, make_repo, services, write_manifest  # noqa: E402
from bench_peer import BenchError, measure  # noqa: E402
from netem import Link, proxy  # noqa: E402
from official_standin import token_of  # noqa: E402
from proc_usage import clean_env  # noqa: E402

PYTHON = ROOT / ".bench" / "gitops-venv" / "bin" / "python"
SCENARIOS = ("first deploy", "no-op, ledger kept", "no-op, fresh ledger", "20 changed")


def checkout(rev: str, into: Path) -> Path:
    """The ``gitops`` package of ``rev`` in ``into``, byte-compiled; a launcher script that runs it."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev, "gitops"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    subprocess.run([str(PYTHON), "-m", "compileall", "-q", str(into / "gitops")], check=True, capture_output=True)
    script = into / "run-gitops"
    code = "import sys; sys.argv[0] = 'gitops'; from gitops.cli import main; main()"
    script.write_text(f'#!/bin/sh\nPYTHONPATH={into} exec {PYTHON} -c "{code}" "$@"\n', encoding="utf-8")
    script.chmod(0o755)
    return script


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="the revision measured first (e.g. main)")
    parser.add_argument("--b", required=True, help="the revision compared with it (e.g. HEAD)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rtt-ms", type=float, default=80)
    parser.add_argument("--up-mbit", type=float, default=20)
    parser.add_argument("--down-mbit", type=float, default=100)
    args = parser.parse_args()
    if not PYTHON.exists():
        raise SystemExit("run bash bench/network.sh once first: it makes .bench/gitops-venv")
    link = Link.of(args.rtt_ms, args.up_mbit, args.down_mbit)
    walls: dict[str, dict[str, list[float]]] = {s: {"A": [], "B": []} for s in SCENARIOS}
    with tempfile.TemporaryDirectory(prefix="gitops-bench-ab-") as folder:
        tmp = Path(folder)
        scripts = {"A": checkout(args.a, tmp / "A"), "B": checkout(args.b, tmp / "B")}
        repo = tmp / "repo"
        repo.mkdir()
        make_repo(repo, 2000, 4_580_000)
        with services(tmp, 1, 2 * args.rounds + 2) as svc, proxy(svc[0].url, link) as url:
            for round_no in range(args.rounds):
                order = ["A", "B"] if round_no % 2 == 0 else ["B", "A"]
                kept = {side: tmp / f"kept-{round_no}-{side}" for side in order}
                for scenario in SCENARIOS:
                    if scenario == "20 changed":
                        change_modules(repo / "src", round_no)
                    expected = expected_modules(repo / "src")
                    for side in order:
                        user = 1 + 2 * round_no + (side == "B")
                        if scenario == "first deploy":
                            svc[0].reset(user)
                        fresh = tmp / f"fresh-{round_no}-{side}"
                        state = fresh if scenario == "no-op, fresh ledger" else kept[side]
                        write_manifest(repo, [url], [token_of(user)])
                        env = {**clean_env(), "NO_COLOR": "1", "BENCH_TOKEN_0": token_of(user)}
                        argv = [str(scripts[side]), "apply", "--yes", "--state-dir", str(state)]
                        walls[scenario][side].append(measure(argv, env, repo, f"{side} ({scenario})").wall)
                        if svc[0].held(user) != expected:
                            raise BenchError(f"{side} ({scenario}): the server does not hold the repository's modules")
                subprocess.run(["git", "checkout", "-q", "--", "."], cwd=repo, check=True)
                print(f"round {round_no + 1}/{args.rounds} done", file=sys.stderr)
    print(f"A = {args.a}, B = {args.b}; path: {link.describe()}; {args.rounds} paired rounds (medians)")
    print(f"{'scenario':22s} {'B/A wall':>9s} | {'A s':>6s} {'B s':>6s}")
    for scenario, sides in walls.items():
        ratio = statistics.median(b / a for a, b in zip(sides["A"], sides["B"], strict=True))
        a_wall, b_wall = statistics.median(sides["A"]), statistics.median(sides["B"])
        print(f"{scenario:22s} {ratio:9.2f} | {a_wall:6.3f} {b_wall:6.3f}")


if __name__ == "__main__":
    main()
