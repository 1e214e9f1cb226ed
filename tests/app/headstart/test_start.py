"""The head start (``gitops.app.headstart``) is a way to plan sooner, not another plan: ``make_plan`` with it and
without it makes the same plan of the same servers, and without it nothing is sent ahead."""

from __future__ import annotations

import json
from pathlib import Path

from gitops.app.options import Options
from gitops.app.planning import make_plan
from gitops.app.session import open_session
from gitops.core.plan import Plan
from gitops.standin.testing import FULL_TOKEN, StandIn


def _options(tmp_path: Path, url: str, state: str) -> Options:
    manifest = tmp_path / "gitops.yaml"
    servers = {"s": {"url": url, "token_env": "SCREEPS_TOKEN"}}
    manifest.write_text(
        json.dumps({"version": 1, "servers": servers, "branches": [{"server": "s", "branch": "main", "root": "src"}]}),
        encoding="utf-8",
    )
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "main.js").write_text("module.exports.loop = () => {};\n", encoding="utf-8")
    return Options(manifest=manifest, env={"SCREEPS_TOKEN": FULL_TOKEN}, state_dir=tmp_path / state)


def _steps(plan: Plan) -> list[tuple[str, list[str]]]:
    return [(b.label, [step.request for step in b.steps]) for b in plan.branches]


def test_a_plan_without_a_head_start_is_the_plan_with_one(tmp_path: Path, standin: StandIn) -> None:
    with open_session(_options(tmp_path, standin.url, "with")) as session:
        fast = make_plan(session, head_start=True)
    with open_session(_options(tmp_path, standin.url, "without")) as session:
        plain = make_plan(session)
    assert _steps(fast) == _steps(plain)
    assert fast.has_changes == plain.has_changes
    assert [(r.server, r.endpoint, r.needed) for r in fast.budget] == [
        (r.server, r.endpoint, r.needed) for r in plain.budget
    ]


def test_no_front_end_names_the_head_start() -> None:
    """The pipeline owns the head start (issue 47): a front end begins the plan stage's local read and plans through
    ``gitops.app.pipeline``, and never imports ``gitops.app.headstart`` itself."""
    root = Path(__file__).resolve().parents[3] / "gitops"
    fronts = [
        *(root / "cli").glob("*.py"),
        *(root / "github").glob("*.py"),
        *(root / "gitlab").glob("*.py"),
        *(root / "app" / "ci").glob("*.py"),
        root / "app" / "watch.py",
    ]
    assert len(fronts) > 10
    naming = [str(path.relative_to(root)) for path in fronts if "headstart" in path.read_text(encoding="utf-8")]
    assert naming == []
