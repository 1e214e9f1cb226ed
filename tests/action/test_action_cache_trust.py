"""Issue 45, point 2: the Actions cache is a channel any job of the default branch can write (the build job's code
too, through the runner's cache token); a forged ledger entry there never makes the deploy job skip its upload.

The Action as the runner runs it (tests/action/runner.py, its cache service: the newest entry with the prefix wins),
the deploy job's step in process against the real stand-in."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gitops.core.codeset import CodeSet
from gitops.standin.testing import ALICE, StandIn
from tests.action.test_action import DEPLOY, UPLOAD, World, make_world
from tests.test_ledger_seal import claims_uploaded, forge

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

    deployed = world.push(DEPLOY)
    assert deployed.outcome == "success", deployed.stderr
    assert deployed.steps["restore"].outputs["cache-matched-key"] == f"{PREFIX}forged-by-the-build-job"
    assert standin.branch_modules(ALICE, "main") == {"main": V2}
    assert standin.count(UPLOAD) == uploads + 1
    assert deployed.outputs["exit-code"] == "0"
    assert "is not sealed" in deployed.stdout
    # The next deploy's ledger is sealed again, and saved as the newest entry.
    assert deployed.steps["save"].outcome == "success"
