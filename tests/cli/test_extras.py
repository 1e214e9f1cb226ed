"""Without the ``serve`` extra (its modules hidden from imports in a child interpreter), ``gitops serve``,
``demo`` and ``watch`` stop with one message naming what to install and exit code 4; plan still runs."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from gitops.cli.extras import INSTALL_HINT, SERVE_PACKAGES
from gitops.errors import ExitCode

ROOT = Path(__file__).resolve().parents[2]

#: A child interpreter where starlette, uvicorn and watchfiles cannot be imported, as after a plain pip install.
_WITHOUT_EXTRA = """
import sys

class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("starlette", "uvicorn", "watchfiles"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Hide())
from gitops.cli import run
raise SystemExit(run(sys.argv[1:]))
"""


def without_extra(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_EXTRA, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize(
    ("args", "missing"),
    [
        (("serve", "--demo"), "starlette, uvicorn"),
        (("demo",), "starlette, uvicorn"),
        (("watch",), "watchfiles"),
    ],
)
def test_commands_of_the_extra_say_what_to_install(args: tuple[str, ...], missing: str, tmp_path: Path) -> None:
    done = without_extra(*args, cwd=tmp_path)
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert done.stderr.startswith(
        f"Error: gitops {args[0]} needs the optional extra 'serve', which is not installed (missing: {missing})\n"
    )
    # The hint names packages pip finds (the tool itself is not on PyPI: 'screeps-gitops[serve]' would not resolve).
    assert INSTALL_HINT in " ".join(done.stderr.split())
    assert "screeps-gitops[serve]" not in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_other_commands_run_without_the_extra(tmp_path: Path) -> None:
    done = without_extra("schema", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"$schema"' in done.stdout or "properties" in done.stdout


def test_the_hint_names_the_packages_of_the_serve_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert tuple(extras["serve"]) == SERVE_PACKAGES
    for package in SERVE_PACKAGES:
        assert f"'{package}'" in INSTALL_HINT


def test_the_install_docs_say_how_to_install_today_and_name_the_same_packages() -> None:
    page = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    section = page[page.index("## Installing") : page.index("## The commands")]
    assert "**not on PyPI yet**" in section
    # The three ways that work today, and the Action's pin, each with a full commit SHA where a ref is named.
    assert "pipx install '.[serve]'" in section
    assert "pipx install './dist/screeps_gitops-" in section
    assert "pipx install 'screeps-gitops[serve] @ git+https://github.com/OWNER/screeps-gitops@COMMIT_SHA'" in section
    assert "Once a release is published" in section
    # The error's line, as the page gives it.
    assert "pip install " + " ".join(f"'{p}'" for p in SERVE_PACKAGES) in " ".join(section.split())
