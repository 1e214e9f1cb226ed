"""Two versions of gitops side by side over the emulated internet path: a before/after pair of commits (issue 23).

``bench_network.py`` pairs gitops with node-screeps-api; on a shared machine its absolute times move by a factor
of two, and comparing two runs of it compares two machine loads. This pairs two versions of gitops instead, in the
same run: each revision's ``gitops`` package is taken from Git (``git archive``) into a temporary folder and run
with the measured install's interpreter (``.bench/gitops-venv``: the same dependencies for both), its source
byte-compiled first. Per round and scenario both versions run once, in rotating order, each against its own
account of one official-mode stand-in behind one ``netem`` path; every run is checked on the server afterwards
(the branch holds exactly the repository's modules). Reported: the median over rounds of the per-pair ratio B/A of
wall time, and each side's median. The first round (``--warmup``) runs but is not counted: the first runs of a
fresh checkout are cold (its files, the proxy), and gave B/A 0.73 for a revision against itself.

With ``--peer``, node-screeps-api's ``code.set`` (``bench_network.py``'s peer) runs in the same rounds too, in the
rotation, on an account of its own: the table adds A/peer and B/peer, so that both versions are set against the
goals' yardstick under the same load (two runs of ``bench_network.py`` an hour apart do not tell a few per cent).

    .venv/bin/python bench/ab_network.py --a main --b HEAD                   # RTT 80 ms, 20/100 Mbit/s, 5 rounds
    .venv/bin/python bench/ab_network.py --a main --b HEAD --rtt-ms 20 --up-mbit 100
    .venv/bin/python bench/ab_network.py --a main --b HEAD --peer --rounds 11 --rtt-ms 20 --up-mbit 100
    .venv/bin/python bench/ab_network.py --a main --b HEAD --peer --tls    # over https, as bench_network.py --tls
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

from bench_network import (  # noqa: E402
    Authority,
    change_modules,
    expected_modules,
    make_repo,
    peer_command,
    services,
    write_manifest,
)
from bench_peer import BenchError, install_peer, measure  # noqa: E402
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
    parser.add_argument(
        "--warmup", type=int, default=1, help="rounds run first and not counted (a harness's first runs are cold)"
    )
    parser.add_argument("--rtt-ms", type=float, default=80)
    parser.add_argument("--up-mbit", type=float, default=20)
    parser.add_argument("--down-mbit", type=float, default=100)
    parser.add_argument("--peer", action="store_true", help="run node-screeps-api's code.set in the same rounds")
    parser.add_argument("--tls", action="store_true", help="the stand-in behind TLS (https://), as bench_network.py")
    args = parser.parse_args()
    if not PYTHON.exists():
        raise SystemExit("run bash bench/network.sh once first: it makes .bench/gitops-venv")
    if args.peer:
        install_peer()
    link = Link.of(args.rtt_ms, args.up_mbit, args.down_mbit)
    sides = ["A", "B", "peer"] if args.peer else ["A", "B"]
    walls: dict[str, dict[str, list[float]]] = {s: {side: [] for side in sides} for s in SCENARIOS}
    with tempfile.TemporaryDirectory(prefix="gitops-bench-ab-") as folder:
        tmp = Path(folder)
        scripts = {"A": checkout(args.a, tmp / "A"), "B": checkout(args.b, tmp / "B")}
        repo = tmp / "repo"
        repo.mkdir()
        make_repo(repo, 2000, 4_580_000)
        total = args.warmup + args.rounds
        authority = Authority.make(tmp) if args.tls else None
        trust = authority.env() if authority is not None else {}
        with services(tmp, 1, len(sides) * total + 2, authority) as svc, proxy(svc[0].url, link) as url:
            for round_no in range(total):
                counted = round_no >= args.warmup
                turn = round_no % len(sides)
                order = sides[turn:] + sides[:turn]  # each side first, second (and third) in turn
                kept = {side: tmp / f"kept-{round_no}-{side}" for side in order}
                for scenario in SCENARIOS:
                    if scenario == "20 changed":
                        change_modules(repo / "src", round_no)
                    expected = expected_modules(repo / "src")
                    for side in order:
                        user = 1 + len(sides) * round_no + sides.index(side)
                        if scenario == "first deploy":
                            svc[0].reset(user)
                        if side == "peer":  # code.set of the whole repository, whatever the scenario
                            argv, env = peer_command({**clean_env(), **trust}, url, user, repo)
                        else:
                            fresh = tmp / f"fresh-{round_no}-{side}"
                            state = fresh if scenario == "no-op, fresh ledger" else kept[side]
                            write_manifest(repo, [url], [token_of(user)])
                            env = {**clean_env(), **trust, "NO_COLOR": "1", "BENCH_TOKEN_0": token_of(user)}
                            argv = [str(scripts[side]), "apply", "--yes", "--state-dir", str(state)]
                        wall = measure(argv, env, repo, f"{side} ({scenario})").wall
                        if counted:
                            walls[scenario][side].append(wall)
                        if svc[0].held(user) != expected:
                            raise BenchError(f"{side} ({scenario}): the server does not hold the repository's modules")
                subprocess.run(["git", "checkout", "-q", "--", "."], cwd=repo, check=True)
                print(f"round {round_no + 1}/{total} done{'' if counted else ' (warm-up)'}", file=sys.stderr)
    print(
        f"A = {args.a}, B = {args.b}{' over https (TLS)' if args.tls else ''}; path: {link.describe()}; "
        f"{args.rounds} paired rounds (medians), "
        f"after {args.warmup} warm-up round{'s' if args.warmup != 1 else ''}"
    )
    peer_head = f" {'A/peer':>7s} {'B/peer':>7s}" if args.peer else ""
    peer_s = f" {'peer s':>6s}" if args.peer else ""
    print(f"{'scenario':22s} {'B/A wall':>9s}{peer_head} | {'A s':>6s} {'B s':>6s}{peer_s}")
    for scenario, times in walls.items():
        ratio = statistics.median(b / a for a, b in zip(times["A"], times["B"], strict=True))
        a_wall, b_wall = statistics.median(times["A"]), statistics.median(times["B"])
        against = ""
        absolute = ""
        if args.peer:
            a_peer = statistics.median(a / p for a, p in zip(times["A"], times["peer"], strict=True))
            b_peer = statistics.median(b / p for b, p in zip(times["B"], times["peer"], strict=True))
            against = f" {a_peer:7.2f} {b_peer:7.2f}"
            absolute = f" {statistics.median(times['peer']):6.3f}"
        print(f"{scenario:22s} {ratio:9.2f}{against} | {a_wall:6.3f} {b_wall:6.3f}{absolute}")


if __name__ == "__main__":
    main()
