"""Issue 45: no file of the checkout runs in the Action's own steps, in any job kind (build; plan and apply with and
without a code set; drift; rehearse; the unlock workflow's apply).

Each job runs action.yml's steps as the runner does (tests/action/runner.py: each step its own bash script, the
working folder the checkout, GITHUB_ENV/GITHUB_PATH/outputs carried between steps), the ``install`` step's own
script included (with test_install_step.py's stand-in for uv: a real ``python -m venv``, this environment's packages
by a ``.pth``), and the tool as the real process its launcher starts, against the stand-in on loopback. The checkout
holds files that shadow what those steps load: standard-library and dependency modules, the tool's own package,
``sitecustomize``/``usercustomize``, a ``.pth``, uv/pip/Python configuration, ``node_modules/.bin`` commands and an
``.npmrc``, shell start-up files; the job's environment points at them as a workflow might (``PATH`` with the
workspace's ``node_modules/.bin``, relative entries too, ``BASH_ENV``, ``ENV``, ``NODE_OPTIONS``, ``PYTHONPATH``,
``PYTHONUSERBASE``). Each planted file that runs writes a marker with the environment it saw; none may exist."""

from __future__ import annotations

import hashlib
import json
import os
import re
import site
import sys
import sysconfig
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops.edges.clock import ManualClock
from gitops.standin.testing import ALICE, DEMO_ACCOUNTS, FULL_TOKEN, StandIn, running_standin
from tests.action.fake_github import serve_on_loopback
from tests.action.runner import ActionRun
from tests.action.test_action import REPO, World, make_world, pull_request_event
from tests.private.harness import ROOT, install_problem

PRIVATE_SERVER = Path(os.environ.get("PRIVATE_SERVER_DIR", ROOT / ".private-server"))

#: Modules a step's Python could import from its working folder or PYTHONPATH: the standard library's (those the
#: steps and the tool import first), the tool's dependencies, the tool itself, and Python's start-up hooks.
MODULES = (
    "hashlib",
    "sysconfig",
    "os",
    "site",
    "pathlib",
    "json",
    "subprocess",
    "re",
    "typing",
    "enum",
    "tempfile",
    "shutil",
    "hmac",
    "secrets",
    "base64",
    "sitecustomize",
    "usercustomize",
    "yaml",
    "httpx",
    "orjson",
    "click",
    "pydantic",
)
#: Commands a step could look up on a PATH that holds the workspace's node_modules/.bin (bash itself excepted: the
#: runner finds the step's shell on the job's PATH before any step of the action runs; docs/github-action.md).
COMMANDS = (
    "node",
    "npm",
    "npx",
    "git",
    "uv",
    "python",
    "python3",
    "pip",
    "mktemp",
    "mkdir",
    "cksum",
    "cut",
    "sha256sum",
    "cat",
    "env",
    "sed",
    "tr",
)

UV_STANDIN = """#!/usr/bin/env bash
set -euo pipefail
printf '%s\\t%s\\t%s\\n' "$PWD" "${UV_NO_CONFIG:-}" "$*" >> "$UV_LOG"
mkdir -p "$UV_CACHE_DIR"  # what uv leaves there, for the cache steps around the install
case "$1" in
  venv) "$UV_TEST_PYTHON" -I -m venv --without-pip "${@: -1}" ;;
  pip)
    python="" ; prev=""
    for arg in "$@"; do [ "$prev" = "--python" ] && python="$arg"; prev="$arg"; done
    purelib=$("$python" -I -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    printf '%s\\n' "$UV_TEST_DEPS" | tr ':' '\\n' > "$purelib/test-deps.pth" ;;
esac
"""


def _python_marker(markers: Path, name: str) -> str:
    name = name.replace("/", "__")
    return (
        "import os as _os\n"
        f"with open({str(markers / name)!r}, 'a') as _f:\n"
        "    _f.write(repr(dict(_os.environ)) + '\\n')\n"
    )


def _shell_marker(markers: Path, name: str) -> str:
    # Builtins only: the planted commands shadow env, cat and the rest.
    name = name.replace("/", "__")
    return f'#!/bin/sh\nexport -p > "{markers / name}"\n'


def plant(root: Path, markers: Path) -> dict[str, str]:
    """Write the shadowing files into the checkout ``root``; the job variables a workflow could point at them."""
    files: dict[str, str] = {}
    for module in MODULES:
        files[f"{module}.py"] = _python_marker(markers, f"{module}.py")
        files[f"pythonpath/{module}.py"] = _python_marker(markers, f"pythonpath/{module}.py")
    for name in ("__init__.py", "__main__.py", "cli.py"):
        files[f"gitops/{name}"] = _python_marker(markers, f"gitops/{name}")
    user_site = "userbase/lib/python{}.{}/site-packages".format(*sys.version_info[:2])
    files[f"{user_site}/usercustomize.py"] = _python_marker(markers, "userbase usercustomize.py")
    files[f"{user_site}/evil.pth"] = "import os; " + _python_marker(markers, "userbase evil.pth").replace("\n", "; ")
    files["zz-evil.pth"] = "import os; open(" + repr(str(markers / "zz-evil.pth")) + ", 'a').write('ran')\n"
    files["startup.py"] = _python_marker(markers, "startup.py")
    files["uv.toml"] = '[pip]\nindex-url = "http://127.0.0.1:9/uv.toml"\n'
    files["pyproject.toml"] = (
        '[project]\nname = "bot"\nversion = "0"\nrequires-python = ">=3.99"\n'
        '[tool.uv]\nindex-url = "http://127.0.0.1:9/pyproject"\n'
    )
    files["pip.conf"] = "[global]\nindex-url = http://127.0.0.1:9/pip.conf\n"
    files[".python-version"] = "3.7\n"
    files[".npmrc"] = "node-options=--require ./hook.js\nscript-shell=./node_modules/.bin/npm\n"
    files["hook.js"] = (
        f"require('fs').appendFileSync({json.dumps(str(markers / 'hook.js'))}, JSON.stringify(process.env) + '\\n');\n"
    )
    for command in COMMANDS:
        files[f"node_modules/.bin/{command}"] = _shell_marker(markers, f"node_modules/.bin/{command}")
        files[f"bin/{command}"] = _shell_marker(markers, f"bin/{command}")
    for name in (".bash_env", ".env.sh", ".bashrc", ".profile", ".bash_profile"):
        files[name] = _shell_marker(markers, name)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if "/.bin/" in name or name.startswith("bin/") or name.startswith("."):
            path.chmod(0o755)
    return {
        "PATH": os.pathsep.join(
            [str(root / "node_modules/.bin"), "node_modules/.bin", "bin", ".", f"{root}/bin/", os.environ["PATH"]]
        ),
        "BASH_ENV": str(root / ".bash_env"),
        "ENV": str(root / ".env.sh"),
        "NODE_OPTIONS": f"--require {root / 'hook.js'}",
        "PYTHONPATH": str(root / "pythonpath"),
        "PYTHONUSERBASE": str(root / "userbase"),
        "PYTHONSTARTUP": str(root / "startup.py"),
    }


@dataclass
class Job:
    world: World
    markers: Path
    uv_log: Path
    planted_env: dict[str, str]

    def env(self, event_name: str, event: dict[str, Any], sha: str) -> dict[str, str]:
        return {**self.world.job_env(event_name, event, sha), **self.planted_env}

    def push_env(self) -> dict[str, str]:
        sha = self.world.commit("deploy")
        return self.env("push", {"ref": "refs/heads/main", "after": sha, "repository": {"full_name": REPO}}, sha)

    def run(self, with_: dict[str, str], env: dict[str, str]) -> ActionRun:
        return self.world.runner.use(with_, job_env=env)


@pytest.fixture
def job(tmp_path: Path) -> Iterator[Job]:
    data = tmp_path / "live"
    data.mkdir()
    # On the wall clock: the tool runs in a subprocess and reads the system clock.
    with running_standin(DEMO_ACCOUNTS, data / "standin.sqlite3", clock=ManualClock(time.time())) as standin:
        yield from _job(tmp_path, standin)


def _job(tmp_path: Path, standin: StandIn) -> Iterator[Job]:
    world = make_world(tmp_path, standin)
    markers = tmp_path / "markers"
    markers.mkdir()
    uv = tmp_path / "uv"
    uv.write_text(UV_STANDIN, encoding="utf-8")
    uv.chmod(0o755)
    world.runner.uv = uv
    uv_log = tmp_path / "uv.log"
    deps = [sysconfig.get_paths()["purelib"], *site.getsitepackages()]
    world.runner.job_env.update(
        {"UV_LOG": str(uv_log), "UV_TEST_PYTHON": sys.executable, "UV_TEST_DEPS": ":".join(dict.fromkeys(deps))}
    )
    planted = plant(world.root, markers)
    world.commit("a checkout that shadows what the action's steps load")
    with serve_on_loopback(world.github):
        yield Job(world, markers, uv_log, planted)


def assert_nothing_of_the_checkout_ran(job: Job, run: ActionRun, *steps: str) -> None:
    for step in steps:
        assert run.steps[step].outcome == "success", (step, run.steps[step].stderr, run.steps[step].stdout)
    ran = sorted(p.name for p in job.markers.iterdir())
    took = [name for name in ran if FULL_TOKEN in (job.markers / name).read_text(encoding="utf-8")]
    assert ran == [], f"files of the checkout ran: {ran}; of them, these read the canary token: {took}"
    for line in job.uv_log.read_text(encoding="utf-8").splitlines():
        cwd, no_config, _ = line.split("\t", 2)
        assert no_config == "1", line
        assert not Path(cwd).is_relative_to(job.world.root), f"uv ran in the checkout: {line}"
    assert "screeps-gitops-action" in run.steps["install"].outputs["gitops"]


INSTALLED = ("state", "install", "ledger")


def test_build_job(job: Job) -> None:
    run = job.run({"command": "build"}, job.push_env())
    assert_nothing_of_the_checkout_ran(job, run, "state", "install", "build", "restore", "handoff")
    assert run.outputs["exit-code"] == "0"
    # uv's packages are cached by the build job only (it holds nothing), under the lock's digest and the Python.
    [uv_key] = [k for k in job.world.runner.cache.keys if k.startswith("screeps-gitops-uv-")]
    lock = hashlib.sha256((ROOT / "requirements" / "action.lock").read_bytes()).hexdigest()
    assert uv_key.endswith("-py{}.{}.{}-{}".format(*sys.version_info[:3], lock[:16]))


@pytest.mark.parametrize("codeset", [False, True], ids=["working-tree", "codeset"])
def test_apply_job(job: Job, codeset: bool) -> None:
    env = job.push_env()
    with_ = {"command": "apply", "screeps-token": FULL_TOKEN}
    if codeset:
        built = job.run({"command": "build"}, env)
        assert built.outcome == "success", built.stderr
        with_["codeset"] = built.outputs["codeset-file"]
    run = job.run(with_, env)
    # Without a code set the job holds the token and restores no cache: it starts without the ledger.
    assert_nothing_of_the_checkout_ran(job, run, *INSTALLED, *(["seed"] if codeset else []), "run")
    assert run.steps["restore"].outcome == "skipped"
    assert run.outputs["exit-code"] == "0", run.stdout + run.stderr
    held = job.world.standin.branch_modules(ALICE, "main")
    assert held is not None, run.stdout
    assert set(held) == {"main", "role/harvester"}


@pytest.mark.parametrize("codeset", [False, True], ids=["pull_request_target-with-token", "codeset-no-token"])
def test_plan_job(job: Job, codeset: bool) -> None:
    world = job.world
    base = world.commit("base")
    world.write({"src/role/harvester.js": "module.exports.run = () => 2;\n"})
    head = world.commit("the pull request")
    event = pull_request_event(7, head, base_sha=base)
    if codeset:  # plan.yml as shipped: the code set from the build job, no Screeps token
        env = job.env("pull_request", event, head)
        built = job.run({"command": "build"}, env)
        assert built.outcome == "success", built.stderr
        run = job.run({"command": "plan", "codeset": built.outputs["codeset-file"]}, env)
    else:  # a plan given the Screeps token under pull_request_target, the manifest unchanged (no exit 13)
        run = job.run({"command": "plan", "screeps-token": FULL_TOKEN}, job.env("pull_request_target", event, head))
    # Without a code set the job holds the token and restores no cache: it starts without the ledger.
    assert_nothing_of_the_checkout_ran(job, run, *INSTALLED, *(["seed"] if codeset else []), "run")
    assert run.steps["restore"].outcome == "skipped"
    assert run.outputs["exit-code"] == "2", run.stdout + run.stderr


def test_drift_job(job: Job) -> None:
    env = job.push_env()
    deployed = job.run({"command": "apply", "screeps-token": FULL_TOKEN}, env)
    assert deployed.outcome == "success", deployed.stderr
    schedule = {**job.env("schedule", {"schedule": "17 */6 * * *"}, env["GITHUB_SHA"])}
    run = job.run({"command": "drift", "screeps-token": FULL_TOKEN, "drift-issue": "true"}, schedule)
    assert_nothing_of_the_checkout_ran(job, run, *INSTALLED, "run")
    assert run.outputs["drifted"] == "false", run.stdout + run.stderr


def test_unlock_jobs_apply(job: Job) -> None:
    """unlock.yml's last step: the action's apply on the ledger already in place (``cache: false``)."""
    run = job.run({"command": "apply", "screeps-token": FULL_TOKEN, "cache": "false"}, job.push_env())
    assert_nothing_of_the_checkout_ran(job, run, "state", "install", "run")
    assert run.steps["ledger"].outcome == "skipped"
    assert run.outputs["exit-code"] == "0", run.stdout + run.stderr


@pytest.mark.private_server
def test_rehearse_job(job: Job) -> None:
    problem = install_problem()
    if problem:
        pytest.fail(problem, pytrace=False)
    world = job.world
    base = world.commit("base")
    world.write({"src/role/harvester.js": "module.exports.run = () => 3;\n"})
    head = world.commit("the pull request")
    env = job.env("pull_request", pull_request_event(7, head, head_repo="bob/bot", base_sha=base), head)
    env["GITOPS_PRIVATE_SERVER"] = str(PRIVATE_SERVER)
    run = job.run({"command": "rehearse", "rehearse-ticks": "5"}, env)
    assert_nothing_of_the_checkout_ran(job, run, *INSTALLED, "private-server", "run")
    assert run.outputs["rehearsal"] == "healthy", run.stdout + run.stderr


def test_the_unlock_workflows_own_steps_start_python_isolated_and_outside_the_checkout() -> None:
    """unlock.yml installs and runs the CLI itself (its job holds the token): Python with -I, pip with --isolated
    from RUNNER_TEMP, never the console script (found on PATH, run without -I)."""
    workflow = yaml.safe_load((ROOT / "examples" / "workflows" / "unlock.yml").read_text(encoding="utf-8"))
    runs = [s for s in workflow["jobs"]["unlock"]["steps"] if "run" in s]
    pythons = 0
    for step in runs:
        for line in step["run"].splitlines():
            if line.lstrip().startswith("#"):
                continue
            assert not re.match(r"\s*gitops\s", line), line
            if re.search(r"\bpython3?\b", line):
                pythons += 1
                assert re.search(r"\bpython -I -m (pip|gitops)\b", line), line
            if "pip install" in line:
                assert "--isolated" in line, line
    assert pythons == 4
    [install] = [s for s in runs if "pip install" in s["run"]]
    assert install["working-directory"] == "${{ runner.temp }}"
