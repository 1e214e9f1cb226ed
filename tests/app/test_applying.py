"""An upload whose answer was lost is not sent again when the plan reserved an upload for a rollback on that server
(issue 37): the server counts every upload it receives, so the resend would spend the rollback's upload."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gitops.standin.testing import ALICE, StandIn
from tests.project import Project

UPLOAD = "POST /api/user/code"
V1 = "module.exports.loop = () => { console.log('v1 runs'); };\n"
V2 = "module.exports.loop = () => { console.log('v2 runs'); };\n"


def _project(tmp_path: Path, standin: StandIn, capsys: Any, monkeypatch: Any) -> Project:
    standin.set_tick_seconds(0.02)
    standin.console_rule(ALICE, log=["tick"])
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": V1})
    p.manifest([{"branch": "main", "root": "src", "activate": ["world"]}])
    p.commit("v1")
    assert p.apply("--yes").code == 0
    return p


@pytest.mark.parametrize("fault", ["commit-drop", "drop", "500"])
def test_a_lost_upload_is_not_resent_when_a_rollback_upload_is_reserved(
    fault: str, tmp_path: Path, standin: StandIn, capsys: Any, monkeypatch: Any
) -> None:
    p = _project(tmp_path, standin, capsys, monkeypatch)
    p.write({"src/main.js": V2})
    verify = {"ticks": 3, "timeout": 30, "on_failure": "rollback"}
    p.manifest([{"branch": "main", "root": "src", "activate": ["world"], "verify": verify}])
    p.commit("v2")
    assert "1 upload reserved" in p.plan().out
    before = standin.count(UPLOAD)
    standin.inject_fault(UPLOAD, fault)
    result = p.apply("--yes")
    assert result.code == 1, result.err
    assert standin.count(UPLOAD) == before + 1  # one upload spent, the rollback's left
    assert "it was not sent again, so that the upload reserved for a rollback stays unspent" in result.err
    # The next plan learns from the server whether the upload is still needed.
    _, doc = p.plan_json()
    assert doc["branches"][0]["action"] == ("none" if fault == "commit-drop" else "update")


def test_without_a_reserved_rollback_a_lost_upload_is_resent_once(
    tmp_path: Path, standin: StandIn, capsys: Any, monkeypatch: Any
) -> None:
    p = _project(tmp_path, standin, capsys, monkeypatch)
    p.write({"src/main.js": V2})
    p.commit("v2")
    before = standin.count(UPLOAD)
    standin.inject_fault(UPLOAD, "drop")
    result = p.apply("--yes")
    assert result.code == 0, result.err
    assert standin.count(UPLOAD) == before + 2
    assert standin.branch_modules(ALICE, "main") == {"main": V2}
