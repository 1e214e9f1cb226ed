"""Issue 45: no job that holds a credential unpacks a cache entry. actions/cache/restore extracts with tar -P, so a
crafted entry (any job of the default branch can save one, a build dependency through the runner's cache token too)
writes anywhere in the job that restores it. action.yml decides once (the state step's ``unpack``) and every restore
step obeys; the ledger reaches a job with a credential only as a credential-free job's artifact (the seed step).

The runner emulation's cache (tests/action/runner.py) writes a forged entry's absolute members where they point, as
tar -P does: a marker file outside the restored folder says that an entry reached a job."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from gitops.standin.testing import ALICE, FULL_TOKEN, StandIn
from tests.action.runner import ABSOLUTE, ROOT, ActionRun, run_bash
from tests.action.test_action import DEPLOY, DOWNLOAD, UPLOAD, World, make_world, pull_request_event

RESTORES = ("restore", "uv-restore", "private-server-restore")
V2 = "module.exports.loop = () => 'v2';\n"


@pytest.fixture
def world(tmp_path: Path, standin: StandIn) -> World:
    return make_world(tmp_path, standin)


def _keys_of_credential_free_jobs(world: World) -> list[str]:
    """The keys credential-free jobs restore under: a build job (the ledger, uv) and a rehearse job given no token
    (the private server's install): each asks the cache, which is what the rule allows there."""
    sha = world.commit("keys")
    env = world.job_env("push", {"ref": "refs/heads/main", "after": sha}, sha)
    built = world.runner.use({"command": "build"}, job_env=env, in_process=world._how())
    assert built.steps["restore"].outcome == built.steps["uv-restore"].outcome == "success", built.stderr
    rehearse = world.runner.use(
        {"command": "rehearse", "github-token": ""},
        job_env={**env, "GITOPS_PRIVATE_SERVER": str(world.scratch / "no-server")},
        in_process=world._how(),
    )
    assert rehearse.steps["private-server-restore"].outcome == "success"
    # The ledger's restore asks for a key never saved (the newest with the prefix wins): forged by prefix below.
    return [key for key, _found in world.runner.cache.restores if not key.startswith("screeps-gitops-ledger-")]


def _forge_everywhere(world: World, keys: list[str]) -> Path:
    """A crafted entry under each key (and the newest under the ledger's prefix) whose tar writes a marker outside
    the folder restored; the folder where the markers land."""
    reached = world.scratch / "reached"
    for number, key in enumerate([*keys, "screeps-gitops-ledger-forged"]):
        entry = world.scratch / f"forged-{number}"
        payload = entry / ABSOLUTE / reached.relative_to("/")
        payload.mkdir(parents=True)
        (payload / f"entry-{number}").write_text(key, encoding="utf-8")
        world.runner.cache.put(entry, key)
    return reached


def _job(world: World, kind: str) -> ActionRun:
    sha = world.commit(kind)
    push = world.job_env("push", {"ref": "refs/heads/main", "after": sha}, sha)
    how = world._how()
    if kind == "apply":
        return world.runner.use(DEPLOY, job_env=push, in_process=how)
    if kind == "unlock's apply":
        return world.runner.use({**DEPLOY, "cache": "false"}, job_env=push, in_process=how)
    if kind == "plan with the GitHub token":
        pr = world.job_env("pull_request", pull_request_event(7, sha, base_sha=sha), sha)
        return world.runner.use({"command": "plan"}, job_env=pr, in_process=how)
    if kind == "drift":
        schedule = world.job_env("schedule", {"schedule": "17 */6 * * *"}, sha)
        return world.runner.use(
            {"command": "drift", "screeps-token": FULL_TOKEN, "drift-issue": "true"}, job_env=schedule, in_process=how
        )
    if kind == "a job whose environment holds the token":
        return world.runner.use({"command": "build"}, job_env={**push, "SCREEPS_TOKEN": FULL_TOKEN}, in_process=how)
    assert kind == "rehearse's comment job"
    pr = world.job_env("pull_request", pull_request_event(7, sha, head_repo="bob/bot", base_sha=sha), sha)
    pr["GITOPS_PRIVATE_SERVER"] = str(world.scratch / "no-server")  # the rule is decided before the server runs
    return world.runner.use({"command": "rehearse"}, job_env=pr, in_process=how)


@pytest.mark.parametrize(
    "kind",
    [
        "apply",
        "unlock's apply",
        "plan with the GitHub token",
        "drift",
        "rehearse's comment job",
        "a job whose environment holds the token",
    ],
)
def test_a_job_that_holds_a_credential_unpacks_no_cache_entry(world: World, kind: str) -> None:
    assert world.push(DEPLOY).outcome == "success"
    keys = _keys_of_credential_free_jobs(world)
    reached = _forge_everywhere(world, keys)
    asked = len(world.runner.cache.restores)

    run = _job(world, kind)

    assert run.steps["state"].outputs["unpack"] == "false", run.stderr
    for step in RESTORES:
        assert run.steps[step].outcome == "skipped", step
    assert world.runner.cache.restores[asked:] == [], "the cache was not asked"
    assert not reached.exists(), "no forged entry's member was written in this job"


def test_the_emulated_cache_writes_a_forged_entrys_members_where_they_point(world: World) -> None:
    """The other side of the test above: a credential-free job (the build job) does unpack, and a crafted entry does
    write outside the folder restored; that job holds nothing to take."""
    keys = _keys_of_credential_free_jobs(world)
    reached = _forge_everywhere(world, keys)
    sha = world.commit("build")
    built = world.runner.use({"command": "build"}, job_env=world.job_env("push", {}, sha), in_process=world._how())
    assert built.steps["state"].outputs["unpack"] == "true"
    assert built.steps["restore"].outputs["cache-matched-key"] == "screeps-gitops-ledger-forged"
    assert sorted(p.name for p in reached.iterdir()) == ["entry-0", "entry-2"]  # the uv key's and the ledger's


def test_the_hand_on_job_makes_the_second_deploy_a_no_op_without_downloading(world: World, standin: StandIn) -> None:
    """drift.yml's and unlock.yml's ``ledger`` job (no credential) restores the cache and hands the ledger on; the
    job with the token seeds from it: the second deploy of the same code sends nothing and downloads nothing."""
    assert world.push(DEPLOY).outcome == "success"
    standin.list_without_modules()  # as the official server's list: what the ledger saves is the download
    downloads, uploads = standin.count(DOWNLOAD), standin.count(UPLOAD)

    again = world.push(DEPLOY)  # the ledger job, then the deploy job with its artifact (ledger input)

    assert again.outcome == "success", again.stderr
    assert again.steps["restore"].outcome == "skipped"
    assert again.steps["seed"].outcome == "success"
    assert again.steps["seed"].outputs["key"].startswith("screeps-gitops-ledger-")
    assert again.outputs["exit-code"] == "0"
    assert again.outputs["uploads-needed"] == "0"
    assert (standin.count(DOWNLOAD), standin.count(UPLOAD)) == (downloads, uploads)


def test_a_one_job_deploy_with_the_token_starts_without_the_cache_and_relearns_from_the_server(
    world: World, standin: StandIn
) -> None:
    """No hand-on job: the deploy job restores nothing, so it learns the server's code as a first run does (one
    download per branch, docs/budget-and-ledger.md) and uploads only what differs."""
    assert world.push(DEPLOY).outcome == "success"
    world.write({"src/main.js": V2})
    standin.list_without_modules()  # as the official server's list: names, flags and stamps, no modules
    downloads, uploads = standin.count(DOWNLOAD), standin.count(UPLOAD)

    run = world.push(DEPLOY, hand_on=False)

    assert run.outcome == "success", run.stderr
    assert run.steps["restore"].outcome == "skipped"
    assert run.steps["seed"].outcome == "skipped"
    assert standin.count(DOWNLOAD) == downloads + 1, "the one branch, downloaded once"
    assert standin.count(UPLOAD) == uploads + 1
    after = standin.branch_modules(ALICE, "main")
    assert after is not None
    assert after["main"] == V2
    assert run.steps["save"].outcome == "success", "saving is fine from a job with a credential: it unpacks nothing"


@pytest.mark.parametrize("workflow", ["drift.yml", "unlock.yml"])
def test_drift_and_unlock_restore_the_cache_only_in_a_job_without_a_secret(workflow: str) -> None:
    jobs = yaml.safe_load((ROOT / "examples" / "workflows" / workflow).read_text(encoding="utf-8"))["jobs"]
    for name, job in jobs.items():
        restores = [s for s in job["steps"] if s.get("uses", "").startswith("actions/cache/restore@")]
        holds = "secrets." in json.dumps(job)
        assert bool(restores) is (name == "ledger"), name
        assert holds is (name != "ledger"), name
        if name != "ledger":
            assert job["needs"] == "ledger"
            uses = [s.get("uses", "").split("@")[0] for s in job["steps"] if "uses" in s]
            assert uses.index("actions/download-artifact") < uses.index("OWNER/screeps-gitops")
    assert jobs["ledger"]["permissions"] == {"contents": "read"}
    assert [s.get("uses", "run").split("@")[0] for s in jobs["ledger"]["steps"]] == [
        "actions/cache/restore",
        "run",
        "actions/upload-artifact",
    ], "the job that unpacks runs nothing after its upload"


def test_unlock_takes_the_handed_ledger_regular_files_only(world: World, tmp_path: Path) -> None:
    """unlock.yml: the ledger job's artifact, copied by the unlock job's own step into the action's state folder."""
    assert world.push(DEPLOY).outcome == "success"
    workflow = ROOT / "examples" / "workflows" / "unlock.yml"
    handed = world.runner.workflow_job(workflow, "ledger")["screeps-ledger"]
    (handed / "state" / "link.json").symlink_to("/etc/passwd")
    temp = tmp_path / "unlock-temp"
    (temp / "handed-ledger").mkdir(parents=True)
    os.rename(handed / "state", temp / "handed-ledger" / "state")
    [step] = [
        s
        for s in yaml.safe_load(workflow.read_text())["jobs"]["unlock"]["steps"]
        if s.get("name") == "Take the ledger handed on"
    ]
    script = tmp_path / "take.sh"
    script.write_text(step["run"], encoding="utf-8")
    env = {"PATH": os.environ["PATH"], "HANDED": str(temp / "handed-ledger" / "state"), "STATE": str(temp / "state")}
    done = run_bash(script, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    taken = sorted(p.relative_to(temp / "state").as_posix() for p in (temp / "state").rglob("*.json"))
    assert taken
    assert "link.json" not in taken
    assert all(not p.is_symlink() for p in (temp / "state").rglob("*"))


def test_a_plan_given_no_credential_restores_the_ledger_itself(world: World) -> None:
    """The rule's other side for plan: no Screeps secret and `github-token: ""` (no comment) is a job with nothing to
    take, so it restores the ledger as the build job does, and plans from it."""
    assert world.push(DEPLOY).outcome == "success"
    world.write({"src/role/harvester.js": "module.exports.run = () => 5;\n"})
    run = world.pull_request({"command": "plan", "github-token": "", "comment": "false"}, hand_on=False)
    assert run.outcome == "success", run.stderr
    assert run.steps["state"].outputs["unpack"] == "true"
    assert run.steps["restore"].outputs["cache-matched-key"].startswith("screeps-gitops-ledger-")
    assert run.outputs["uploads-needed"] == "1"
