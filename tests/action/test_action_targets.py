"""The Action's ``servers``/``branches`` inputs, and a plan that reports the servers that answer (issue 14)."""

from __future__ import annotations

from pathlib import Path

import yaml

from gitops.standin.testing import ALICE, FULL_TOKEN, StandIn
from tests.action.test_action import World, make_world
from tests.app.test_targets import closed_port


def two_server_world(tmp_path: Path, standin: StandIn) -> World:
    world = make_world(tmp_path, standin)
    manifest = {
        "version": 1,
        "servers": {
            "local": {"url": standin.url, "token_env": "SCREEPS_TOKEN"},
            "away": {"url": f"http://127.0.0.1:{closed_port()}", "token_env": "SCREEPS_TOKEN"},
        },
        "branches": [
            {"server": "local", "branch": "main", "root": "src"},
            {"server": "away", "branch": "main", "root": "src"},
        ],
    }
    (world.root / "gitops.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    return world


def test_servers_input_applies_to_that_server_only(tmp_path: Path, standin: StandIn) -> None:
    world = two_server_world(tmp_path, standin)
    run = world.push({"command": "apply", "screeps-token": FULL_TOKEN, "servers": "local"})
    assert run.outcome == "success", run.stderr + run.stdout
    assert run.outputs["exit-code"] == "0"
    assert standin.branch_modules(ALICE, "main") is not None
    assert "away" not in run.summary


def test_unknown_branch_input_is_a_usage_error(tmp_path: Path, standin: StandIn) -> None:
    world = two_server_world(tmp_path, standin)
    run = world.push({"command": "plan", "screeps-token": FULL_TOKEN, "branches": "nope"})
    assert run.outcome == "failure"
    assert run.outputs["exit-code"] == "4"
    assert "local/main" in run.stdout + run.stderr


def test_plan_marks_the_failed_server_and_reports_the_other(tmp_path: Path, standin: StandIn) -> None:
    world = two_server_world(tmp_path, standin)
    run = world.push({"command": "plan", "screeps-token": FULL_TOKEN})
    assert run.outcome == "failure"
    assert run.outputs["exit-code"] == "1"
    assert run.outputs["has-changes"] == "true"
    assert "| `local` | `main` | create |" in run.summary
    assert "**Failed servers** (not planned)" in run.summary
    assert "`away`" in run.summary
