"""What one command costs, measured by ``bench/launch.py`` (see there why a launcher): wall, CPU, peak RSS."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

LAUNCHER = Path(__file__).resolve().with_name("launch.py")


@dataclass(frozen=True)
class Usage:
    """Wall seconds from spawn to exit, CPU seconds (user + sys), peak RSS in MB, exit code, and the output."""

    wall: float
    cpu: float
    rss_mb: float
    code: int
    output: str


class Timeout(Exception):
    """The command ran longer than its time limit; it and its children were killed."""


def run_measured(argv: list[str], env: dict[str, str], cwd: Path, timeout: float) -> Usage:
    """Run ``argv`` to its end through the launcher; kill its whole process group after ``timeout`` seconds."""
    with tempfile.TemporaryDirectory(prefix="gitops-bench-usage-") as tmp, tempfile.TemporaryFile() as out:
        figures = Path(tmp) / "usage.json"
        launcher = [sys.executable, "-S", "-E", str(LAUNCHER), str(figures)]
        proc = subprocess.Popen(
            [*launcher, *argv],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # one group: a timeout ends the command and every child it started
        )
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise Timeout(f"{argv[0]} was killed after {timeout:.0f} s") from None
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
        if not figures.exists():
            raise RuntimeError(f"the launcher exited with {proc.returncode} without figures:\n{text[-2000:]}")
        data = json.loads(figures.read_text(encoding="utf-8"))
    return Usage(
        wall=float(data["wall"]),
        cpu=float(data["user"]) + float(data["sys"]),
        rss_mb=float(data["maxrss_kib"]) / 1024,
        code=int(data["code"]),
        output=text,
    )


def clean_env() -> dict[str, str]:
    """The caller's environment without what would steer gitops (GITOPS_*), Python (PYTHON*) or node (NODE_*).

    PYTHONDONTWRITEBYTECODE (set in some sandboxes) matters most: every run would compile the tool's own modules
    from source again (~80 ms), which an installed tool never does.
    """
    drop = ("GITOPS_", "PYTHON", "NODE_", "SCREEPS_")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def compile_gitops() -> None:
    """Byte-compile the tool's own modules, as pip does on install (an editable install compiles on first use)."""
    spec = importlib.util.find_spec("gitops")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"gitops is not installed in {sys.prefix}; run: {sys.executable} -m pip install -e .")
    for folder in spec.submodule_search_locations:
        argv = [sys.executable, "-m", "compileall", "-q", folder]
        subprocess.run(argv, env=clean_env(), check=True, stdout=subprocess.DEVNULL, timeout=120)
