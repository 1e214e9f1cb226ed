"""What apply's syntax check costs a first deploy: two versions of gitops side by side (issue 46, point 3).

``apply`` parses every JavaScript module it is about to upload (added or changed), as ``validate`` does; a deploy
that changes nothing parses nothing, so the cost falls on the first deploy of a large bot. This runs a first deploy
(``apply --yes`` to a fresh account, so every module is uploaded) of the 2,000-module, 4.58 MB bot of
``bench_network.py`` with revision A (before the check, e.g. the commit before it) and revision B (with it), in
alternating order, each against its own account of one official-mode stand-in, over loopback or an emulated path
(``--rtt-ms``); every run is checked on the server afterwards. Reported: the medians over rounds of the per-pair
ratio B/A of wall time and of CPU time, each side's medians, and B - A in seconds. The first round is not counted.

    .venv/bin/python bench/ab_syntax.py --a 40cb9b7 --b HEAD                  # loopback, 5 rounds
    .venv/bin/python bench/ab_syntax.py --a 40cb9b7 --b HEAD --rtt-ms 80      # RTT 80 ms, 20/100 Mbit/s

Needs ``.bench/gitops-venv`` (``bash bench/network.sh`` makes it, or ``python3 -m venv .bench/gitops-venv &&
.bench/gitops-venv/bin/pip install .``).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ab_network import PYTHON, checkout  # noqa: E402
from bench_network import expected_modules, make_repo, services, write_manifest  # noqa: E402
from bench_peer import BenchError, measure  # noqa: E402
from netem import Link, proxy  # noqa: E402
from official_standin import token_of  # noqa: E402
from proc_usage import clean_env  # noqa: E402


@contextlib.contextmanager
def path_to(url: str, rtt_ms: float, up: float, down: float) -> Iterator[str]:
    """``url`` itself over loopback (``rtt_ms`` 0), else through an emulated path."""
    if rtt_ms <= 0:
        yield url
        return
    with proxy(url, Link.of(rtt_ms, up, down)) as through:
        yield through


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for side, what in (("--a", "the revision without the check (the commit before it)"), ("--b", "with it (HEAD)")):
        parser.add_argument(side, required=True, help=what)
    numbers = {"--rounds": (5, "paired rounds counted"), "--rtt-ms": (0, "0: loopback, no emulated path")}
    numbers |= {"--up-mbit": (20, "the path's upload rate"), "--down-mbit": (100, "its download rate")}
    for flag, (default, what) in numbers.items():
        parser.add_argument(flag, type=type(default) if flag == "--rounds" else float, default=default, help=what)
    args = parser.parse_args()
    if not PYTHON.exists():
        raise SystemExit(f"{PYTHON} is missing: python3 -m venv .bench/gitops-venv && {PYTHON.parent}/pip install .")
    figures: dict[str, dict[str, list[float]]] = {"wall": {"A": [], "B": []}, "cpu": {"A": [], "B": []}}
    total = args.rounds + 1
    with tempfile.TemporaryDirectory(prefix="gitops-bench-syntax-") as folder:
        tmp = Path(folder)
        (repo := tmp / "repo").mkdir()
        make_repo(repo, 2000, 4_580_000)  # the bot of bench_network.py, and so of ab_network.py's first deploy
        expected = expected_modules(repo / "src")
        scripts = {side: checkout(revision, tmp / side) for side, revision in (("A", args.a), ("B", args.b))}
        with (
            services(tmp, 1, 2 * total + 2) as svc,
            path_to(svc[0].url, args.rtt_ms, args.up_mbit, args.down_mbit) as url,
        ):
            for round_no in range(total):
                order = ("A", "B") if round_no % 2 else ("B", "A")
                for side in order:
                    user = 1 + 2 * round_no + ("A", "B").index(side)
                    svc[0].reset(user)
                    write_manifest(repo, [url], [token_of(user)])
                    env = {**clean_env(), "NO_COLOR": "1", "BENCH_TOKEN_0": token_of(user)}
                    state = tmp / f"state-{round_no}-{side}"
                    argv = [str(scripts[side]), "apply", "--yes", "--state-dir", str(state)]
                    usage = measure(argv, env, repo, f"{side} (first deploy)")
                    if svc[0].held(user) != expected:
                        raise BenchError(f"{side}: the server does not hold the repository's modules")
                    if round_no:
                        figures["wall"][side].append(usage.wall)
                        figures["cpu"][side].append(usage.cpu)
                print(f"round {round_no + 1}/{total} done{'' if round_no else ' (warm-up)'}", file=sys.stderr)
    where = "loopback" if args.rtt_ms <= 0 else Link.of(args.rtt_ms, args.up_mbit, args.down_mbit).describe()
    print(f"A = {args.a}, B = {args.b}; first deploy, 2,000 modules, 4.58 MB; {where}; {args.rounds} paired rounds")
    print(f"{'figure':6s} {'B/A':>6s} | {'A s':>7s} {'B s':>7s} {'B-A s':>7s}")
    for name, sides in figures.items():
        ratio = statistics.median(b / a for a, b in zip(sides["A"], sides["B"], strict=True))
        extra = statistics.median(b - a for a, b in zip(sides["A"], sides["B"], strict=True))
        a_s, b_s = statistics.median(sides["A"]), statistics.median(sides["B"])
        print(f"{name:6s} {ratio:6.2f} | {a_s:7.3f} {b_s:7.3f} {extra:7.3f}")


if __name__ == "__main__":
    main()
