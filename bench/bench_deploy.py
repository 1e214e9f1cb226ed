"""Wall time and peak memory of ``gitops plan`` and ``gitops apply`` on a 2,000-module, ~4.5 MB branch, and the time
of ``gitops --help``.

A real git repository is generated in a temporary folder; ``gitops serve --testing`` runs as its own process on a
free loopback port; each measured command is a separate ``gitops`` process, timed from spawn to exit, its peak
resident memory read from the kernel (``wait4``'s ``ru_maxrss``, through the small launcher ``launch.py``), with the
package byte-compiled first and no PYTHON*/GITOPS_* variables of the caller. Targets (issue 3): plan < 1.5 s,
apply < 2 s, peak memory < 150 MB, ``gitops --help`` < 0.15 s.

Usage: .venv/bin/python bench/bench_deploy.py [--modules 2000] [--total-mb 4.5] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from proc_usage import Timeout, clean_env, compile_gitops, run_measured

TOKEN = "bench0123456789abcdef0123456789ab"
ACCOUNTS = f"users:\n  - username: bench\n    tokens:\n      - value: {TOKEN}\n        full: true\n"
GITOPS = str(Path(sys.executable).with_name("gitops"))
#: Longest one measured command may run before it is killed and the benchmark stops.
COMMAND_TIMEOUT = 120.0
TARGETS = {"plan": 1.5, "apply": 2.0, "help": 0.15, "memory_mb": 150.0}


def make_repo(root: Path, modules: int, total_bytes: int) -> None:
    size = total_bytes // modules
    line = "module.exports.run = function (creep) { if (creep.store.getFreeCapacity() > 0) creep.say('work'); };\n"
    # Whole lines, then a comment to the size: every module parses (plan and apply check the modules they upload).
    body = line * (size // len(line) - 1)
    body += "//" + "." * (size - len(body) - 3) + "\n"
    for i in range(modules - 1):
        path = root / "src" / f"group{i % 40:02d}" / f"module{i:04d}.js"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"// module {i}\n{body}", encoding="utf-8")
    (root / "src" / "main.js").write_text("module.exports.loop = function () {};\n", encoding="utf-8")
    (root / "gitops.yaml").write_text(
        "version: 1\nservers:\n  bench:\n    url: URL\n    token_env: BENCH_TOKEN\n"
        "branches:\n  - server: bench\n    branch: main\n    root: src\n    activate: [world]\n",
        encoding="utf-8",
    )
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "bench"], cwd=root, check=True)


def measure(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MB, exit code) of one command, spawned by the small launcher (``launch.py``)."""
    try:
        usage = run_measured(argv, env, cwd, COMMAND_TIMEOUT)
    except Timeout as exc:
        raise SystemExit(f"{' '.join(argv[1:])}: {exc}") from None
    if usage.code not in (0, 2):
        raise SystemExit(f"{' '.join(argv[1:])} failed with exit {usage.code}:\n{usage.output}")
    return usage.wall, usage.rss_mb, usage.code


def start_service(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    accounts = tmp / "accounts.yaml"
    accounts.write_text(ACCOUNTS, encoding="utf-8")
    proc = subprocess.Popen(
        [GITOPS, "serve", "--port", "0", "--accounts", str(accounts), "--data", str(tmp / "s.sqlite3"), "--testing"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode("utf-8", "replace")
        found = re.search(r"http://127\.0\.0\.1:\d+", line)
        if found:
            return proc, found.group(0)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise SystemExit("the stand-in did not start within 30 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=int, default=2000)
    parser.add_argument("--total-mb", type=float, default=4.5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gitops-bench-"))
    service = None
    try:
        repo = tmp / "repo"
        repo.mkdir()
        make_repo(repo, args.modules, int(args.total_mb * 1_000_000))
        service, url = start_service(tmp)
        manifest = repo / "gitops.yaml"
        manifest.write_text(manifest.read_text(encoding="utf-8").replace("URL", url), encoding="utf-8")
        compile_gitops()
        env = {**clean_env(), "BENCH_TOKEN": TOKEN, "NO_COLOR": "1"}
        results: dict[str, list[tuple[float, float]]] = {}

        def record(name: str, argv: list[str]) -> None:
            wall, rss, _ = measure([GITOPS, *argv], env, repo)
            results.setdefault(name, []).append((wall, rss))

        for _ in range(args.repeat):
            record("help", ["--help"])
        for n in range(args.repeat):
            state = ["--state-dir", str(tmp / f"state{n}")]
            # A fresh account each round: plan and apply a first deploy of the whole branch.
            branch = f"main{n}"
            manifest.write_text(re.sub(r"branch: \w+", f"branch: {branch}", manifest.read_text("utf-8")), "utf-8")
            record("plan (first deploy)", ["plan", *state])
            record("apply (first deploy)", ["apply", "--yes", *state])
            # Change 20 modules: plan downloads the 4.5 MB branch and diffs it; apply uploads it again.
            for i in range(20):
                path = repo / "src" / f"group{i % 40:02d}" / f"module{i:04d}.js"
                path.write_text(path.read_text("utf-8") + f"// change {n}\n", "utf-8")
            record("plan (20 changed, download)", ["plan", "--refresh=always", *state])
            record("apply (20 changed)", ["apply", "--yes", "--refresh=always", *state])
        rows = {
            name: {
                "wall_s_median": round(statistics.median(w for w, _ in runs), 3),
                "wall_s_max": round(max(w for w, _ in runs), 3),
                "peak_rss_mb_max": round(max(r for _, r in runs), 1),
                "runs": len(runs),
            }
            for name, runs in results.items()
        }
        if args.json:
            print(json.dumps({"modules": args.modules, "total_mb": args.total_mb, "results": rows}, indent=2))
            return
        print(f"gitops plan/apply with {args.modules} modules, {args.total_mb} MB, {args.repeat} runs each")
        print(f"{'command':32} {'median s':>9} {'max s':>7} {'peak MB':>8}  target")
        for name, row in rows.items():
            key = "help" if name == "help" else name.split()[0]
            target = f"< {TARGETS[key]} s, < {TARGETS['memory_mb']:.0f} MB"
            figures = f"{row['wall_s_median']:9.3f} {row['wall_s_max']:7.3f} {row['peak_rss_mb_max']:8.1f}"
            print(f"{name:32} {figures}  {target}")
    finally:
        if service is not None:
            service.terminate()
            service.wait(timeout=10)
            if service.stdout is not None:
                service.stdout.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
