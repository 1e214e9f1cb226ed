"""What reading the local code in a child process costs and buys (issue 23): the same install of gitops, paired,
with the read forked (as on Linux) and in a thread (``gitops.edges.forked.can_fork`` made to say no, as on other
systems), each a whole ``apply --yes`` process, against an official-mode stand-in on loopback (no emulated path:
the wait for the server is short, so the child's extra CPU shows).

Scenarios: a first deploy (the account's ``default`` reset before each run) and a no-op with the ledger kept, on the
2,000-module, 4.58 MB repository of ``bench_network.py``. Printed per scenario: the medians of wall time and CPU
(user + system, children included: the child and ``git``) of each side, and the median of the per-pair ratios
fork/thread.

    .venv/bin/python bench/bench_fork.py --gitops .bench/gitops-venv/bin/gitops [--rounds 12]

(``bash bench/network.sh`` installs ``.bench/gitops-venv``; any other install of gitops works too.)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench_network import make_repo, services, write_manifest  # noqa: E402
from bench_peer import measure  # noqa: E402
from official_standin import token_of  # noqa: E402
from proc_usage import Usage, clean_env  # noqa: E402

#: Runs gitops with the read in a thread: what a system without the fork does.
_THREAD = (
    "import sys\nimport gitops.edges.forked as forked\nforked.can_fork = lambda: False\n"
    "sys.argv = ['gitops', *sys.argv[1:]]\nfrom gitops.cli import main\nmain()\n"
)
SIDES = ("fork", "thread")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gitops", required=True, help="the gitops script of the install to measure")
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    script = Path(args.gitops).resolve()
    python = str(script.with_name("python"))  # an install made by pip, which byte-compiled it
    with tempfile.TemporaryDirectory(prefix="gitops-bench-fork-") as tmp_name:
        tmp = Path(tmp_name)
        repo = tmp / "repo"
        repo.mkdir()
        make_repo(repo, 2000, 4_580_000)
        with services(tmp, 1, 4) as svc:
            service = svc[0]
            write_manifest(repo, [service.url], [token_of(1)])
            env = {**clean_env(), "NO_COLOR": "1", "BENCH_TOKEN_0": token_of(1)}
            argv = {"fork": [str(script)], "thread": [python, "-c", _THREAD]}
            kept = {side: tmp / f"kept-{side}" for side in SIDES}
            for side in SIDES:  # the kept ledgers learn the server (and warm the manifest cache)
                measure([*argv[side], "apply", "--yes", "--state-dir", str(kept[side])], env, repo, side)
            results: dict[str, dict[str, list[Usage]]] = {"first deploy": {}, "no-op, ledger kept": {}}
            for n in range(args.rounds):
                order = SIDES if n % 2 == 0 else SIDES[::-1]
                for side in order:
                    service.reset(1)
                    state = tmp / f"first-{side}-{n}"
                    usage = measure([*argv[side], "apply", "--yes", "--state-dir", str(state)], env, repo, side)
                    results["first deploy"].setdefault(side, []).append(usage)
                for side in order:
                    measure([*argv[side], "apply", "--yes", "--state-dir", str(kept[side])], env, repo, side)
                for side in order:
                    usage = measure([*argv[side], "apply", "--yes", "--state-dir", str(kept[side])], env, repo, side)
                    results["no-op, ledger kept"].setdefault(side, []).append(usage)
    print(f"local read forked vs in a thread, apply --yes, stand-in on loopback, {args.rounds} paired rounds (medians)")
    print(f"{'scenario':22} {'fork wall':>9} {'thread':>7} {'ratio':>6} | {'fork CPU':>8} {'thread':>7} {'ratio':>6}")
    for scenario, sides in results.items():
        fork, thread = sides["fork"], sides["thread"]
        wall = statistics.median(f.wall / t.wall for f, t in zip(fork, thread, strict=True))
        cpu = statistics.median(f.cpu / t.cpu for f, t in zip(fork, thread, strict=True))
        walls = [statistics.median(u.wall for u in side) for side in (fork, thread)]
        cpus = [statistics.median(u.cpu for u in side) for side in (fork, thread)]
        print(f"{scenario:22} {walls[0]:9.3f} {walls[1]:7.3f} {wall:6.2f} | {cpus[0]:8.3f} {cpus[1]:7.3f} {cpu:6.2f}")


if __name__ == "__main__":
    main()
