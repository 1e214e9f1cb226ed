"""Issue 45, point 2: the Actions cache is a channel any job of the default branch can write (the build job's code
too, through the runner's cache token); a forged ledger entry there never makes the deploy job skip its upload.

The Action as the runner runs it (tests/action/runner.py, its cache service: the newest entry with the prefix wins),
the deploy job's step in process against the real stand-in."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gitops.core.codeset import CodeSet
from gitops.standin.testing import ALICE, StandIn
from tests.action.runner import ROOT
from tests.action.test_action import DEPLOY, REPO, UPLOAD, World, make_world
from tests.edges.ledger.test_seal import claims_uploaded, forge

V2 = "module.exports.loop = () => 'v2';\n"
PREFIX = "screeps-gitops-ledger-"


@pytest.fixture
def world(tmp_path: Path, standin: StandIn) -> World:
    return make_world(tmp_path, standin)


def _forge_newest_entry(world: World, key: str) -> None:
    """A job without the token saves a new entry: the newest ledger's files, main claimed to hold v2."""
    cache = world.runner.cache
    newest = [k for k in cache.keys if k.startswith(PREFIX)][-1]
    copy = world.scratch / "forged"
    shutil.copytree(cache.root / newest, copy)
    [ledger] = (copy / "ledger").glob("*/*.json")
    forge(ledger, claims_uploaded(CodeSet.from_wire({"main": V2}), world.standin.clock.now()))
    assert cache.save(copy, key)


def test_a_forged_cache_entry_never_makes_the_deploy_job_skip_its_upload(world: World, standin: StandIn) -> None:
    first = world.push(DEPLOY)
    assert first.outcome == "success", first.stderr
    world.write({"src/main.js": V2})
    (world.root / "src" / "role" / "harvester.js").unlink()
    _forge_newest_entry(world, f"{PREFIX}forged-by-the-build-job")
    standin.list_without_modules()  # as the official server's list: names, flags and stamps, no modules
    uploads = standin.count(UPLOAD)

    deployed = world.push(DEPLOY)  # the ledger job (no credential) restores the forged entry and hands it on
    assert deployed.outcome == "success", deployed.stderr
    assert deployed.steps["restore"].outcome == "skipped"
    assert deployed.steps["seed"].outputs["key"] == f"{PREFIX}forged-by-the-build-job"
    assert standin.branch_modules(ALICE, "main") == {"main": V2}
    assert standin.count(UPLOAD) == uploads + 1
    assert deployed.outputs["exit-code"] == "0"
    assert "is not sealed" in deployed.stdout
    # The next deploy's ledger is sealed again, and saved as the newest entry.
    assert deployed.steps["save"].outcome == "success"


def test_the_deploy_job_of_two_restores_no_cache_and_believes_no_forged_ledger_handed_on(
    world: World, standin: StandIn
) -> None:
    """deploy.yml: the build job restores the cache (a forged entry's tar could write anywhere in that job, which holds
    nothing) and hands the ledger on beside the code set; the deploy job extracts no cache entry and believes only a
    sealed ledger."""
    first = world.push(DEPLOY)
    assert first.outcome == "success", first.stderr
    world.write({"src/main.js": V2})
    (world.root / "src" / "role" / "harvester.js").unlink()
    _forge_newest_entry(world, f"{PREFIX}forged-by-the-build-job")
    standin.list_without_modules()
    uploads = standin.count(UPLOAD)
    sha = world.commit("v2")
    env = world.job_env("push", {"ref": "refs/heads/main", "after": sha, "repository": {"full_name": REPO}}, sha)

    built = world.runner.use({"command": "build"}, job_env=env, in_process=world._how())
    assert built.outcome == "success", built.stderr
    assert built.steps["restore"].outputs["cache-matched-key"] == f"{PREFIX}forged-by-the-build-job"
    handed = Path(built.outputs["ledger-dir"])
    assert handed.parent == Path(built.outputs["codeset-file"]).parent
    assert list((handed / "state" / "ledger").glob("*/*.json")), "the restored ledger, beside the code set"

    deployed = world.runner.use(
        {**DEPLOY, "codeset": built.outputs["codeset-file"]}, job_env=env, in_process=world._how()
    )
    assert deployed.outcome == "success", deployed.stderr
    assert deployed.steps["restore"].outcome == "skipped", "no cache entry is extracted in the job with the token"
    assert deployed.steps["seed"].outcome == "success"
    assert deployed.steps["seed"].outputs["key"] == f"{PREFIX}forged-by-the-build-job"
    assert "is not sealed" in deployed.stdout
    assert standin.branch_modules(ALICE, "main") == {"main": V2}
    assert standin.count(UPLOAD) == uploads + 1
    assert deployed.steps["save"].outcome == "success"


def test_the_seed_step_copies_regular_files_only(tmp_path: Path) -> None:
    handoff = tmp_path / "screeps-gitops-ledger"
    (handoff / "state" / "ledger" / "srv").mkdir(parents=True)
    (handoff / "state" / "ledger" / "srv" / "fp.json").write_text("{}", encoding="utf-8")
    (handoff / "state" / "ledger" / "srv" / "link.json").symlink_to("/etc/passwd")
    os.mkfifo(handoff / "state" / "ledger" / "srv" / "fifo.json")
    (handoff / "restored-key").write_text("screeps-gitops-ledger-1-abc\n", encoding="utf-8")
    state = tmp_path / "state"
    assert _seed(handoff, state) == "key=screeps-gitops-ledger-1-abc\n"
    assert sorted(p.relative_to(state).as_posix() for p in state.rglob("*")) == [
        "ledger",
        "ledger/srv",
        "ledger/srv/fp.json",
    ]
    (handoff / "restored-key").write_text("bad key; rm -rf /\n", encoding="utf-8")
    assert _seed(handoff, state) == "key=\n"


def _seed(handoff: Path, state: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-I", str(ROOT / "scripts" / "action" / "seed.py"), str(handoff), str(state)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
