"""Side by side on the real private server: ``gitops apply --yes`` against node-screeps-api's blind ``code.set``.

Both sides deploy the same 2,000 modules (about 4.5 MB, written by ``bench_deploy.make_repo``) to the ``default``
branch of a fresh account on the real npm private server (screeps 4.3.0 + screepsmod-auth, started for this run
on free loopback ports by ``tests/private/harness.py``, simulation paused), signing in with user name and password.
Each measured command is a whole process, timed from spawn to exit; CPU (user + sys) and peak resident memory come
from the kernel (``wait4``), which on Linux also counts the children the process waited for (gitops' git
processes). A small launcher (``launch.py``) spawns each command, so that this process's own size does not leak
into the command's peak memory figure. Scenarios, each run as an A/B pair whose order alternates from round to round:

- ``first deploy``: the account holds only ``main: ""``; gitops plans and uploads, the peer uploads.
- ``no-op, ledger kept``: a second ``gitops apply`` with the same state dir; the peer uploads the same code again.
- ``no-op, fresh ledger``: ``gitops apply`` with a new, empty state dir (it downloads and diffs); the peer uploads.
- ``20 changed``: 20 of the 2,000 modules change; ``gitops apply`` (ledger kept) against the peer's upload of all.

Two more sides run beside them unless ``--no-floor`` is given: ``floor.py`` does only the requests and the work a
deploy with gitops' guarantees must do (read the files, sign in, the branch list as the check, an upload only when
the branch differs), once with the standard library alone and once after importing the libraries every gitops run
loads before its first request (click, PyYAML, httpx, orjson). They say how close to the peer gitops could get at
all. Each side has its own fresh account; the order of the sides rotates from round to round.

After each run the branch is read back from the server: it must hold exactly the repository's modules, an upload
must have moved the branch's ``timestamp``, and a no-op (gitops, a floor) must have left it untouched (nothing
uploaded). Reported per scenario: the median over rounds of each side's ratio to the peer of the same round (wall
time, CPU, peak memory) and the median absolute figures of gitops and the peer.

Usage: .venv/bin/python bench/bench_peer.py [--rounds 6] [--warmup 1] [--modules 2000] [--total-mb 4.5] [--json]
[--no-floor]
(``bash bench/peer.sh`` installs the peer first; ``PRIVATE_SERVER_DIR`` says where the server is installed.)
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # for tests.private.harness when run as a script

from bench_deploy import make_repo  # noqa: E402  (bench/ is on sys.path: the script's own folder)
from proc_usage import Timeout, Usage, clean_env, compile_gitops, run_measured  # noqa: E402

from tests.private.harness import PrivateServer, PrivateServerError, ServerUser  # noqa: E402

GITOPS = str(Path(sys.executable).with_name("gitops"))
PEER_SOURCE = ROOT / "bench" / "peer"
PEER_PREFIX = ROOT / ".bench" / "peer"
PEER_SCRIPT = PEER_SOURCE / "deploy.js"
BRANCH = "default"
#: Longest a single measured process may run before it is killed and the benchmark stops.
PROCESS_TIMEOUT = 60.0
#: Longest the peer's ``npm ci`` may take.
INSTALL_TIMEOUT = 300.0
SCENARIOS = ("first deploy", "no-op, ledger kept", "no-op, fresh ledger", "20 changed")
CHANGED = 20


class BenchError(Exception):
    """The benchmark could not run or a side did not do its work; the message says which and why."""


# --- the peer's install ---


def peer_stamp() -> str:
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((PEER_SOURCE / name).read_bytes())
    return digest.hexdigest()


def install_peer() -> None:
    """Install the pinned node-screeps-api into ``.bench/peer`` (``npm ci``), unless that install is current."""
    marker = PEER_PREFIX / ".install-complete"
    stamp = peer_stamp()
    if marker.exists() and marker.read_text(encoding="utf-8") == stamp:
        return
    if shutil.which("npm") is None or shutil.which("node") is None:
        raise BenchError("node and npm must be on PATH for the peer (node-screeps-api); install Node.js 20 or newer")
    shutil.rmtree(PEER_PREFIX, ignore_errors=True)
    PEER_PREFIX.mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(PEER_SOURCE / name, PEER_PREFIX / name)
    print(f"installing the peer (screeps-api, pinned in {PEER_SOURCE.relative_to(ROOT)}) into .bench/peer ...")
    # --ignore-scripts: the optional native helpers of `ws` are not built; the peer never opens a socket anyway.
    try:
        done = subprocess.run(
            ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
            cwd=PEER_PREFIX,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"npm ci in {PEER_PREFIX} took more than {INSTALL_TIMEOUT:.0f} s") from exc
    if done.returncode != 0:
        raise BenchError(f"npm ci in {PEER_PREFIX} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    marker.write_text(stamp, encoding="utf-8")


# --- measuring one process ---


def measure(argv: list[str], env: dict[str, str], cwd: Path, what: str) -> Usage:
    """Run one command to its end (killed after ``PROCESS_TIMEOUT``); what it cost. A failure stops the benchmark."""
    try:
        usage = run_measured(argv, env, cwd, PROCESS_TIMEOUT)
    except Timeout as exc:
        raise BenchError(f"{what}: {exc}") from None
    if usage.code != 0:
        raise BenchError(f"{what} exited with {usage.code}:\n{usage.output[-3000:]}")
    return usage


# --- what the server must hold ---


def expected_modules(src: Path) -> dict[str, str]:
    """The module map both sides upload: ``group00/module0000.js`` is ``group00/module0000``."""
    return {
        path.relative_to(src).as_posix().removesuffix(".js"): path.read_text(encoding="utf-8")
        for path in sorted(src.rglob("*.js"))
    }


def held_branch(user: ServerUser) -> tuple[dict[str, Any], Any]:
    """The branch's modules and ``timestamp`` (which moves with every ``POST /api/user/code``; absent before the
    first), from one ``GET /api/user/branches`` (on the private server it carries every branch's modules)."""
    for entry in user.branches():
        if entry.get("branch") == BRANCH:
            return dict(entry.get("modules") or {}), entry.get("timestamp")
    raise BenchError(f"{user.username} has no branch {BRANCH!r}")


def check_server(user: ServerUser, expected: dict[str, str], before: Any, *, uploaded: bool, what: str) -> Any:
    """Insist that the server holds ``expected`` and that an upload happened (or not); the branch's timestamp."""
    held, after = held_branch(user)
    if held != expected:
        missing = sorted(set(expected) - set(held))[:3]
        wrong = sorted(k for k in expected.keys() & held.keys() if expected[k] != held[k])[:3]
        raise BenchError(
            f"after {what}, {user.username}/{BRANCH} holds {len(held)} modules, not the repository's "
            f"{len(expected)} (missing e.g. {missing}, different e.g. {wrong})"
        )
    if uploaded and after == before:
        raise BenchError(f"after {what}, the branch's timestamp did not move: nothing was uploaded")
    if not uploaded and after != before:
        raise BenchError(f"{what} uploaded code (the branch's timestamp moved) although nothing had changed")
    return after


# --- the sides ---

#: The floor sides (``floor.py``): only the work a deploy with gitops' guarantees must do, with the standard library
#: alone, or after importing the libraries every gitops run loads before its first request (click, PyYAML, httpx).
FLOORS = ("floor-stdlib", "floor-card")
FLOOR_SCRIPT = Path(__file__).resolve().with_name("floor.py")


@dataclass
class Sides:
    """One round's accounts, state dirs and environments for every side."""

    repo: Path
    users: dict[str, ServerUser]
    state: Path
    fresh_states: Iterator[Path]
    base_env: dict[str, str]
    #: The ``gitops`` script measured (``--gitops``).
    gitops_script: str = GITOPS
    #: Each account's branch timestamp as last checked (one read of the account per run, not two).
    timestamps: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for user in self.users.values():
            self.timestamps[user.username] = held_branch(user)[1]

    def names(self) -> list[str]:
        return list(self.users)

    def run(self, side: str, state: Path, what: str) -> Usage:
        user = self.users[side]
        if side == "peer":
            env = {
                **self.base_env,
                "NODE_PATH": str(PEER_PREFIX / "node_modules"),
                "SCREEPS_URL": user.url,
                "SCREEPS_USER": user.username,
                "SCREEPS_PASSWORD": user.password,
            }
            argv = ["node", str(PEER_SCRIPT), str(self.repo / "src"), BRANCH]
            return measure(argv, env, self.repo, f"the peer ({what})")
        env = {**self.base_env, "BENCH_USER": user.username, "BENCH_PASSWORD": user.password, "NO_COLOR": "1"}
        if side == "gitops":
            argv = [self.gitops_script, "apply", "--yes", "--state-dir", str(state)]
        else:
            # The interpreter of the measured gitops install: the same Python, the same libraries.
            python = str(Path(self.gitops_script).with_name("python"))
            libs = side.removeprefix("floor-")
            argv = [python, str(FLOOR_SCRIPT), "--libs", libs, "gitops.yaml", "src", BRANCH]
        return measure(argv, env, self.repo, f"{side} ({what})")


def run_scenario(sides: Sides, scenario: str, order: list[str]) -> dict[str, Usage]:
    """One run of each side for a scenario, in ``order``, each checked against the server; usage by side."""
    expected = expected_modules(sides.repo / "src")
    state = next(sides.fresh_states) if scenario == "no-op, fresh ledger" else sides.state
    results: dict[str, Usage] = {}
    for side in order:
        user = sides.users[side]
        # The peer always uploads (blindly); gitops and the floors only when something changed.
        uploaded = side == "peer" or scenario in ("first deploy", "20 changed")
        results[side] = sides.run(side, state, scenario)
        sides.timestamps[user.username] = check_server(
            user, expected, sides.timestamps[user.username], uploaded=uploaded, what=f"{side} ({scenario})"
        )
    return results


def change_modules(src: Path, round_no: int) -> None:
    for i in range(CHANGED):
        path = src / f"group{i % 40:02d}" / f"module{i:04d}.js"
        path.write_text(path.read_text("utf-8") + f"// change {round_no}\n", "utf-8")


def write_manifest(repo: Path, url: str) -> None:
    (repo / "gitops.yaml").write_text(
        "version: 1\nservers:\n  home:\n"
        f"    url: {url}\n    username_env: BENCH_USER\n    password_env: BENCH_PASSWORD\n"
        f"branches:\n  - server: home\n    branch: {BRANCH}\n    root: src\n",
        encoding="utf-8",
    )


Round = dict[str, dict[str, Usage]]


def run_round(server: PrivateServer, repo: Path, tmp: Path, round_no: int, gitops: str, floors: bool) -> Round:
    names = ["gitops", "peer", *(FLOORS if floors else ())]
    sides = Sides(
        repo=repo,
        users={name: server.register() for name in names},
        state=tmp / f"state-{round_no}",
        fresh_states=(tmp / f"state-{round_no}-fresh-{n}" for n in itertools.count()),
        base_env=clean_env(),
        gitops_script=gitops,
    )
    # The order rotates from round to round, so that no side always goes first (A/B, B/A, ...).
    shift = round_no % len(names)
    order = names[shift:] + names[:shift]
    runs: Round = {}
    for scenario in SCENARIOS:
        if scenario == "20 changed":
            change_modules(repo / "src", round_no)
        runs[scenario] = run_scenario(sides, scenario, order)
    # Empty every account again: the server's storage saves its whole database every 10 s when it changed, so the
    # code of earlier rounds would make every later save (which competes with the measured processes) slower.
    for user in sides.users.values():
        user.upload(BRANCH, {"main": ""})
    return runs


# --- the report ---


def summarise(rounds: list[Round]) -> dict[str, dict[str, float]]:
    """Per scenario: for each side but the peer, the median over rounds of its ratio to the peer of the same round
    (``ratio_*`` for gitops, ``<side>_ratio_*`` for the others), and each side's median figures."""
    rows: dict[str, dict[str, float]] = {}
    for scenario in SCENARIOS:
        runs = [r[scenario] for r in rounds]
        row: dict[str, float] = {}
        for side in runs[0]:
            for figure in ("wall", "cpu", "rss_mb"):
                mine = [getattr(run[side], figure) for run in runs]
                row[f"{side}_{figure}"] = round(statistics.median(mine), 3)
                if side == "peer":
                    continue
                theirs = [getattr(run["peer"], figure) for run in runs]
                ratio = round(statistics.median(m / t for m, t in zip(mine, theirs, strict=True)), 3)
                row[f"ratio_{figure}" if side == "gitops" else f"{side}_ratio_{figure}"] = ratio
        rows[scenario] = row
    return rows


def print_table(rows: dict[str, dict[str, float]], args: argparse.Namespace, load: float) -> None:
    print(
        f"gitops apply --yes vs node-screeps-api code.set, {args.modules} modules / {args.total_mb} MB, "
        f"real private server, {args.rounds} paired rounds (medians; load average {load:.1f} before the run)"
    )
    head = f"{'scenario':22} {'wall x':>7} {'CPU x':>6} {'mem x':>6} | {'gitops s':>8} {'peer s':>7}"
    print(head + f" {'gitops cpu':>10} {'peer cpu':>8} {'gitops MB':>9} {'peer MB':>7}")
    for name, r in rows.items():
        ratios = f"{r['ratio_wall']:7.2f} {r['ratio_cpu']:6.2f} {r['ratio_rss_mb']:6.2f}"
        walls = f"{r['gitops_wall']:8.3f} {r['peer_wall']:7.3f}"
        cpus = f"{r['gitops_cpu']:10.3f} {r['peer_cpu']:8.3f}"
        mems = f"{r['gitops_rss_mb']:9.1f} {r['peer_rss_mb']:7.1f}"
        print(f"{name:22} {ratios} | {walls} {cpus} {mems}")
    if any("floor-card_ratio_wall" in r for r in rows.values()):
        print()
        print("the floors (bench/floor.py: only the requests and work gitops must do), wall and CPU against the peer")
        print(f"{'scenario':22} {'stdlib wall x':>13} {'CPU x':>6} | {'click+yaml+httpx wall x':>23} {'CPU x':>6}")
        for name, r in rows.items():
            stdlib = f"{r['floor-stdlib_ratio_wall']:13.2f} {r['floor-stdlib_ratio_cpu']:6.2f}"
            libs = f"{r['floor-card_ratio_wall']:23.2f} {r['floor-card_ratio_cpu']:6.2f}"
            print(f"{name:22} {stdlib} | {libs}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="measured A/B rounds (default 6)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first (default 1)")
    parser.add_argument("--modules", type=int, default=2000)
    parser.add_argument("--total-mb", type=float, default=4.5)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--gitops",
        default=GITOPS,
        help="the gitops script to measure (default: .venv's; peer.sh passes a regular, non-editable install)",
    )
    parser.add_argument(
        "--no-floor", action="store_true", help="leave out the two floor sides (bench/floor.py), about a third faster"
    )
    args = parser.parse_args()
    if args.rounds < 1 or args.warmup < 0 or args.modules < CHANGED + 1:
        parser.error(f"--rounds must be at least 1, --warmup at least 0, --modules more than {CHANGED}")
    load = os.getloadavg()[0]  # the machine may be shared: other work skews wall times, less so the ratios
    try:
        install_peer()
        compile_gitops()
        rows = run(args)
    except (BenchError, PrivateServerError, RuntimeError, subprocess.SubprocessError) as exc:
        print(f"bench_peer: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    if args.json:
        figures = {"modules": args.modules, "total_mb": args.total_mb, "rounds": args.rounds, "load_average": load}
        print(json.dumps({**figures, "results": rows}))
    else:
        print_table(rows, args, load)


def run(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    tmp = Path(tempfile.mkdtemp(prefix="gitops-bench-peer-"))
    try:
        repo = tmp / "repo"
        repo.mkdir()
        make_repo(repo, args.modules, int(args.total_mb * 1_000_000))
        server = PrivateServer.start()
        try:
            # Ticks would compete with both sides for the two cores; the code endpoints work without them.
            server.cli("system.pauseSimulation()")
            write_manifest(repo, server.url)
            rounds = []
            for n in range(args.warmup + args.rounds):
                runs = run_round(server, repo, tmp, n, os.path.abspath(args.gitops), not args.no_floor)
                if n >= args.warmup:
                    rounds.append(runs)
                if not args.json:
                    print(f"round {n + 1}/{args.warmup + args.rounds}{' (warm-up)' if n < args.warmup else ''} done")
        finally:
            server.stop()
        return summarise(rounds)
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
