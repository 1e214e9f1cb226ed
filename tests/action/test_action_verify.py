"""The Action's apply with ``verify:``: outputs ``health`` and ``rolled-back``, the evidence in the summary, and a
step that fails with the documented exit code when the new code fails in the game."""

from __future__ import annotations

from pathlib import Path

import yaml

from gitops.standin.testing import ALICE, StandIn
from tests.action.test_action import DEPLOY, World, assert_no_secret, make_world

ERROR = "ReferenceError: THROWS is not defined"


def _verified(world: World, on_failure: str) -> None:
    manifest = yaml.safe_load((world.root / "gitops.yaml").read_text(encoding="utf-8"))
    manifest["branches"][0]["verify"] = {"ticks": 3, "timeout": 30, "on_failure": on_failure}
    (world.root / "gitops.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")


def test_failing_deploy_is_rolled_back_and_the_step_fails_with_the_evidence(tmp_path: Path, standin: StandIn) -> None:
    world = make_world(tmp_path, standin)
    assert world.push(DEPLOY).outcome == "success"
    before = standin.branch_modules(ALICE, "main")
    standin.set_tick_seconds(0.02)
    standin.console_rule(ALICE, contains="THROWS", error=ERROR)
    _verified(world, "rollback")
    world.write({"src/main.js": "module.exports.loop = () => THROWS;\n"})
    run = world.push(DEPLOY)
    assert run.outcome == "failure"
    assert run.outputs["health"] == "failing"
    assert run.outputs["rolled-back"] == "true"
    assert run.outputs["exit-code"] == "10"
    assert "#### Verify: failing" in run.summary
    assert ERROR in run.summary
    assert "rolled back: the previous code was uploaded again to local/main" in run.summary
    assert standin.branch_modules(ALICE, "main") == before
    assert_no_secret(world, run)


def test_healthy_deploy_says_so(tmp_path: Path, standin: StandIn) -> None:
    world = make_world(tmp_path, standin)
    assert world.push(DEPLOY).outcome == "success"
    standin.set_tick_seconds(0.02)
    _verified(world, "report")
    world.write({"src/main.js": "module.exports.loop = () => {};\n"})
    run = world.push(DEPLOY)
    assert run.outcome == "success", run.stderr
    assert (run.outputs["health"], run.outputs["rolled-back"], run.outputs["exit-code"]) == ("healthy", "false", "0")
    assert "#### Verify: healthy" in run.summary


def test_a_deploy_whose_code_fails_in_the_game_is_recorded_as_a_failed_deployment(
    tmp_path: Path, standin: StandIn
) -> None:
    world = make_world(tmp_path, standin)
    assert world.push(DEPLOY).outcome == "success"
    standin.set_tick_seconds(0.02)
    standin.console_rule(ALICE, contains="THROWS", error=ERROR)
    _verified(world, "report")
    world.write({"src/main.js": "module.exports.loop = () => THROWS;\n"})
    run = world.push(DEPLOY)
    assert (run.outcome, run.outputs["health"], run.outputs["exit-code"]) == ("failure", "failing", "9")
    first, second = world.github.deployments
    assert second.state == "failure", "the upload landed, but the game says the code fails"
    assert first.state == "success"


def test_a_rerun_after_a_failing_deploy_fails_too_and_says_why(tmp_path: Path, standin: StandIn) -> None:
    """Issue 39: the failing code left in place is not forgotten; a re-run with nothing new to deploy does not go
    green (exit 12), and the plan in the summary names the branch and what to do."""
    world = make_world(tmp_path, standin)
    assert world.push(DEPLOY).outcome == "success"
    standin.set_tick_seconds(0.02)
    standin.console_rule(ALICE, contains="THROWS", error=ERROR)
    _verified(world, "report")
    world.write({"src/main.js": "module.exports.loop = () => THROWS;\n"})
    assert world.push(DEPLOY).outputs["exit-code"] == "9"
    rerun = world.push(DEPLOY)
    assert (rerun.outcome, rerun.outputs["exit-code"]) == ("failure", "12"), rerun.stderr
    assert "local/main: deploy" in rerun.summary
    assert "FAILING" in rerun.summary
    assert "gitops rollback" in rerun.summary
    assert_no_secret(world, rerun)
