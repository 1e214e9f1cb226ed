"""action.yml's install step, its script run by bash as the runner runs it. ``uv`` is a stand-in that makes the
virtual environment (``python -m venv``) and records the ``pip install`` it was asked for (the packages come from
this test environment instead of the network; bench/action_install.sh runs the step's commands with the real uv).
What is real: the .pth that puts the action's own folder on the path, and the launcher the later steps run."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

from gitops import __version__
from tests.action.runner import ROOT, load_action, read_outputs, run_bash

UV_STANDIN = """#!/usr/bin/env bash
set -euo pipefail
echo "$*" >> "$UV_LOG"
case "$1" in
  venv) "$UV_TEST_PYTHON" -m venv --without-pip "${@: -1}" ;;
  pip)
    python="" ; prev=""
    for arg in "$@"; do [ "$prev" = "--python" ] && python="$arg"; prev="$arg"; done
    purelib=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    printf '%s\\n' "$UV_TEST_DEPS" | tr ':' '\\n' > "$purelib/test-deps.pth" ;;
esac
"""


def test_the_install_step_runs_the_tool_from_the_action_folder_never_from_the_repository(tmp_path: Path) -> None:
    [step] = [s for s in load_action()["runs"]["steps"] if s["id"] == "install"]
    uv = tmp_path / "uv"
    uv.write_text(UV_STANDIN, encoding="utf-8")
    uv.chmod(0o755)
    script = tmp_path / "install.sh"
    script.write_text(step["run"], encoding="utf-8")
    output = tmp_path / "output"
    output.touch()
    # A repository whose own gitops/ folder must not be what runs (the run step holds the credentials).
    repo = tmp_path / "repo"
    (repo / "gitops").mkdir(parents=True)
    (repo / "gitops" / "__init__.py").write_text("raise SystemExit('the repository shadowed the tool')\n")
    (repo / "gitops" / "__main__.py").write_text("raise SystemExit('the repository shadowed the tool')\n")
    deps = [sysconfig.get_paths()["purelib"], *site.getsitepackages()]
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITOPS_", "GITHUB_", "PYTHON")) or k == "GITOPS_CACHE_DIR"
    }
    env.update(
        {
            "PYTHON": sys.executable,
            "UV": str(uv),
            "ACTION_PATH": str(ROOT),
            "GITHUB_ACTION_PATH": str(ROOT),
            "GITHUB_WORKSPACE": str(repo),
            "VENV_PARENT": str(tmp_path),
            "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
            "GITHUB_OUTPUT": str(output),
            "UV_LOG": str(tmp_path / "uv.log"),
            "UV_TEST_PYTHON": sys.executable,
            "UV_TEST_DEPS": ":".join(dict.fromkeys(deps)),
        }
    )
    done = run_bash(script, cwd=repo, env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout + done.stderr == "", "nothing in the log"
    calls = (tmp_path / "uv.log").read_text(encoding="utf-8").splitlines()
    assert calls[0].startswith(f"venv --quiet --python {sys.executable} ")
    assert calls[1].endswith(f"--require-hashes -r {ROOT}/requirements/action.lock")
    assert len(calls) == 2, "only the lock is installed: the tool itself is the action's folder, nothing to build"
    launcher = read_outputs(output.read_text(encoding="utf-8"))["gitops"]
    # An earlier step of the job could have set PYTHONPATH through GITHUB_ENV (issue 37): it is ignored.
    version = subprocess.run(
        [launcher, "--version"],
        cwd=repo,
        env={**env, "PYTHONPATH": str(repo)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"gitops, version {__version__}"
    where = subprocess.run(
        [launcher.replace("screeps-gitops-action", "python"), "-P", "-c", "import gitops; print(gitops.__file__)"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert Path(where.stdout.strip()) == ROOT / "gitops" / "__init__.py"
