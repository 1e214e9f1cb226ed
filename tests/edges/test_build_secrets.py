"""A ``build:`` command cannot reach the deploy's credentials (issue 18, item 2), by any of the routes found:

a) the tool's own environment, read by the build at ``/proc/$PPID/environ``;
b) the other servers' token variables, with ``--server a``;
c) the GitHub Action's inputs, under whatever name ``token-env`` gives, and the Action's build step;
d) the ledger this run plans from, rewritten by the build;
e) the build's output and code the build writes a credential into.

Each test uses the suite's canary tokens: the session's canary check also fails if one reached a file or an output.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from gitops.standin.testing import BOB_TOKEN, FULL_TOKEN, RESTRICTED_TOKEN, StandIn
from tests.factories import git
from tests.project import Project

ROOT = Path(__file__).resolve().parents[2]

#: Dumps what a build can see into $LEAK_DIR, then builds dist/main.js.
SNOOP = (
    'env > "$LEAK_DIR/env.txt"; '
    'cat /proc/$PPID/environ > "$LEAK_DIR/parent-environ.txt"; '
    'cat /proc/$PPID/cmdline > "$LEAK_DIR/parent-cmdline.txt"; '
    "mkdir -p dist; printf 'module.exports.loop = () => {};\\n' > dist/main.js; "
    'echo "build says: A=$A_TOKEN B=$B_TOKEN S=$SCREEPS_TOKEN"'
)


def _repo(root: Path, build: str = SNOOP, servers: dict[str, dict[str, str]] | None = None) -> Path:
    root.mkdir(parents=True)
    servers = servers or {
        "a": {"url": "http://127.0.0.1:9", "token_env": "A_TOKEN"},
        "b": {"url": "http://127.0.0.1:9", "token_env": "B_TOKEN"},
    }
    manifest = {
        "version": 1,
        "servers": servers,
        "build": build,
        "branches": [{"server": name, "branch": "main", "root": "dist"} for name in servers],
    }
    (root / "gitops.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    (root / ".gitignore").write_text("dist/\n", encoding="utf-8")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "bot")
    return root


def _environment(leaks: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITOPS_", "SCREEPS_", "INPUT_")) or k == "GITOPS_CACHE_DIR"
    }
    env.update({"LEAK_DIR": str(leaks), "NO_COLOR": "1", **extra})
    return env


def _seen(leaks: Path) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in sorted(leaks.iterdir()))


def test_the_tools_own_environment_shows_the_build_no_credential(tmp_path: Path) -> None:
    # A real process whose environment block holds the tokens from its start, as a shell's export gives them.
    repo = _repo(tmp_path / "bot")
    leaks = tmp_path / "leaks"
    leaks.mkdir()
    env = _environment(leaks, A_TOKEN=FULL_TOKEN, B_TOKEN=BOB_TOKEN, SCREEPS_TOKEN=RESTRICTED_TOKEN)
    done = subprocess.run(
        [sys.executable, "-m", "gitops", "validate"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = _seen(leaks)
    assert "A_TOKEN" in seen  # the build did read its parent's environment and its own
    for token in (FULL_TOKEN, BOB_TOKEN, RESTRICTED_TOKEN):
        assert token not in seen
        assert token not in done.stdout + done.stderr
    assert "build says: A= B= S=" in done.stderr


def test_a_run_for_one_server_hides_every_servers_credentials(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "bot")
    leaks = tmp_path / "leaks"
    leaks.mkdir()
    env = _environment(leaks, A_TOKEN=FULL_TOKEN, B_TOKEN=BOB_TOKEN)
    done = subprocess.run(
        [sys.executable, "-m", "gitops", "build", "--server", "a"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = (leaks / "env.txt").read_text(encoding="utf-8")
    assert "LEAK_DIR=" in seen
    assert "B_TOKEN" not in seen
    assert "A_TOKEN" not in seen
    assert BOB_TOKEN not in _seen(leaks)


def test_the_actions_inputs_never_reach_a_build_whatever_their_names(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "bot")
    leaks = tmp_path / "leaks"
    leaks.mkdir()
    env = _environment(
        leaks,
        INPUT_TOKEN=FULL_TOKEN,
        INPUT_GITHUB_TOKEN=BOB_TOKEN,
        GITOPS_ACTION_TOKEN=FULL_TOKEN,
        GITOPS_ACTION_TOKEN_ENV="MY_OWN_NAME",  # a name the manifest does not use
        MY_OWN_NAME=RESTRICTED_TOKEN,
    )
    done = subprocess.run(
        [sys.executable, "-m", "gitops", "build"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = (leaks / "env.txt").read_text(encoding="utf-8")
    for name in ("INPUT_TOKEN", "INPUT_GITHUB_TOKEN", "GITOPS_ACTION_TOKEN", "MY_OWN_NAME"):
        assert f"{name}=" not in seen
    assert not any(t in _seen(leaks) for t in (FULL_TOKEN, BOB_TOKEN, RESTRICTED_TOKEN))


def test_the_action_builds_in_a_step_without_secrets_then_only_reads() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    steps = {step["id"]: step for step in action["runs"]["steps"]}
    order = [step["id"] for step in action["runs"]["steps"]]
    assert order.index("build") < order.index("run")
    build_env = " ".join(str(v) for v in steps["build"]["env"].values())
    for secret in ("inputs.token", "inputs.password", "inputs.github-token", "inputs.username", "secrets."):
        assert secret not in build_env
    assert steps["run"]["env"]["GITOPS_SKIP_BUILD"] == "1"


def test_the_ledger_is_read_before_the_build_and_a_rewrite_is_noticed(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pull request's plan is made from the ledger alone (--refresh=never). Its build could put there a ledger
    # that records the pull request's own code as deployed, and the plan would say "No changes". Made for real:
    # a second state folder that did deploy v2, then the server is put back to v1 behind the tool's back.
    build = "mkdir -p dist && cp src/main.js dist/main.js"
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": "module.exports.loop = () => 1;\n", ".gitignore": "dist/\n"})
    p.manifest([{"branch": "default", "root": "dist"}], build=build)
    p.commit("v1")
    assert p.apply("--yes").code == 0
    real_state = p.state_dir
    forged_state = tmp_path / "forged-state"
    shutil.copytree(real_state, forged_state)
    p.write({"src/main.js": "module.exports.loop = () => 2;\n"})
    p.commit("v2")
    p.state_dir = forged_state
    assert p.apply("--yes").code == 0  # the forged folder records v2 as deployed
    p.state_dir = real_state
    put_back(standin, {"main": "module.exports.loop = () => 1;\n"})
    [real] = [q for q in real_state.rglob("*.json") if q.parent.name != "ledger"]
    forged = forged_state / real.relative_to(real_state)
    assert forged.read_bytes() != real.read_bytes()
    p.manifest([{"branch": "default", "root": "dist"}], build=f"{build} && cp '{forged}' '{real}'")
    result = p.plan("--refresh=never")
    assert result.code == 2, result.out + result.err  # from the ledger read before the build: v2 is a change
    assert "was changed by another program during this run" in result.out + result.err


def put_back(standin: StandIn, modules: dict[str, str]) -> None:
    with httpx.Client(base_url=standin.url, headers={"X-Token": FULL_TOKEN}) as http:
        assert http.post("/api/user/code", json={"branch": "default", "modules": modules}).json()["ok"] == 1


def test_a_build_that_writes_a_credential_into_the_code_is_refused(tmp_path: Path) -> None:
    build = 'mkdir -p dist; printf \'module.exports.t = "%s";\\n\' "$LEAK" > dist/main.js'
    repo = _repo(
        tmp_path / "bot",
        build=build,
        servers={"a": {"url": "http://127.0.0.1:9", "token_env": "A_TOKEN"}},
    )
    # The build gets the token by another way (a file the user can read): the code still never leaves.
    env = _environment(tmp_path, A_TOKEN=FULL_TOKEN, LEAK=FULL_TOKEN)
    done = subprocess.run(
        [sys.executable, "-m", "gitops", "validate"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 6, done.stderr
    assert "module 'main' holds a credential" in done.stderr
    assert FULL_TOKEN not in done.stdout + done.stderr
    (repo / "dist" / "main.js").unlink()  # the build's output, which the canary check would find


def test_a_builds_output_is_redacted(tmp_path: Path) -> None:
    repo = _repo(
        tmp_path / "bot",
        build="echo \"token is $LEAK\"; mkdir -p dist; echo 'module.exports.loop=()=>{};' > dist/main.js",
        servers={"a": {"url": "http://127.0.0.1:9", "token_env": "A_TOKEN"}},
    )
    env = _environment(tmp_path, A_TOKEN=FULL_TOKEN, LEAK=FULL_TOKEN)
    done = subprocess.run(
        [sys.executable, "-m", "gitops", "validate"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "token is <hidden>" in done.stderr
    assert FULL_TOKEN not in done.stderr
