"""What ships, installed as a user installs it: the sdist and the wheel built from it (``python -m build``, the
wheel made from the unpacked sdist, so a file the sdist lacks is missing from the wheel too), the wheel installed
with its ``serve`` extra into a fresh virtual environment (not editable; its dependencies resolved by pip from the
index, as ``pip install``/``pipx install`` do; ``--no-compile``: Python writes the bytecode of what the commands
import when they first run, which takes less time than compiling every dependency ahead), and every command run from
a folder outside this checkout.

``scripts/test.sh`` runs this folder as a step of its own (``pytest tests/installed``) and leaves it out of the main
run; run alone, it builds and installs in a temporary folder the same way (about 45 s on 2 cores).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Installed:
    """The built distributions and the virtual environment the wheel is installed in."""

    wheel: Path
    sdist: Path
    venv: Path
    #: An empty folder outside the checkout: the working folder of every command run here.
    home: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def gitops(self) -> Path:
        return self.venv / "bin" / "gitops"

    def env(self, **extra: str) -> dict[str, str]:
        """A user's environment: no variable of this test run that would point Python or the tool elsewhere."""
        keep = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("GITOPS_", "SCREEPS_", "PYTHON", "VIRTUAL_ENV", "PRIVATE_SERVER"))
        }
        keep |= {"HOME": str(self.home), "NO_COLOR": "1", "GITOPS_CACHE_DIR": str(self.home / "cache")}
        return keep | extra


def _run(args: list[str], *, cwd: Path, timeout: float) -> None:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{' '.join(args)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.fixture(scope="session")
def installed() -> Iterator[Installed]:
    # Its own folder, removed at the end: the installed copy holds the stand-in's demo tokens (source code), which
    # the suite's canary check would otherwise find among the files left behind.
    scratch = Path(tempfile.mkdtemp(prefix="gitops-installed-"))
    try:
        dist, home = scratch / "dist", scratch / "home"
        home.mkdir()
        # The default of python -m build: the sdist first, then the wheel from the unpacked sdist.
        _run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], cwd=scratch, timeout=600)
        (wheel,) = dist.glob("screeps_gitops-*.whl")
        (sdist,) = dist.glob("screeps_gitops-*.tar.gz")
        venv = scratch / "venv"
        _run([sys.executable, "-m", "venv", str(venv)], cwd=scratch, timeout=120)
        _run(
            [
                str(venv / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                f"{wheel}[serve]",
            ],
            cwd=home,
            timeout=600,
        )
        yield Installed(wheel=wheel, sdist=sdist, venv=venv, home=home)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
