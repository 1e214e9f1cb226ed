"""A server may hold module names and texts that are not valid Unicode: JSON lets a lone surrogate through
(``"\\udc80"``). plan (text, Markdown, JSON, a saved plan) and apply must show them escaped and repair the branch."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from gitops.standin.testing import ALICE, FULL_TOKEN, StandIn
from tests.project import Project, one_branch_project

MAIN = "module.exports.loop = () => {};\n"


@pytest.fixture
def broken(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    """A deployed project whose branch someone else overwrote with a lone surrogate in a text and in a name."""
    p = one_branch_project(tmp_path, standin, capsys, monkeypatch)
    assert p.apply("--yes").code == 0
    with httpx.Client(base_url=standin.url, headers={"X-Token": FULL_TOKEN}) as http:
        body = b'{"branch":"main","modules":{"main":"x\\udc80y","b\\ud800ad":"z"}}'
        answer = http.post("/api/user/code", content=body, headers={"Content-Type": "application/json"})
        assert answer.status_code == 200, answer.text
    assert standin.branch_modules(ALICE, "main") == {"main": "x\udc80y", "b\ud800ad": "z"}
    return p


def test_plan_text_shows_lone_surrogates_escaped(broken: Project) -> None:
    result = broken.plan("--refresh=always")
    assert result.code == 2, result.err
    assert "- b\\ud800ad  1 B" in result.out
    assert "-x\\udc80y" in result.out


def test_plan_markdown_shows_lone_surrogates_escaped(broken: Project) -> None:
    result = broken.plan("--refresh=always", "--markdown")
    assert result.code == 2, result.err
    assert "b\\ud800ad" in result.out
    assert "-x\\udc80y" in result.out


def test_plan_json_escapes_lone_surrogates(broken: Project) -> None:
    code, doc = broken.plan_json("--refresh=always")
    assert code == 2
    [branch] = doc["branches"]
    assert branch["removed"] == ["b\ud800ad"]  # the JSON escape reads back as the server's name


def test_a_saved_plan_with_lone_surrogates_applies(broken: Project, standin: StandIn, tmp_path: Path) -> None:
    saved = tmp_path / "plan.json"
    result = broken.plan("--refresh=always", "--out", str(saved))
    assert result.code == 2, result.err
    json.loads(saved.read_bytes())
    applied = broken.apply(str(saved), "--yes")
    assert applied.code == 0, applied.err
    assert standin.branch_modules(ALICE, "main") == {"main": MAIN}


def test_apply_repairs_a_branch_with_lone_surrogates(broken: Project, standin: StandIn) -> None:
    result = broken.apply("--yes", "--refresh=always")
    assert result.code == 0, result.err
    assert "- b\\ud800ad  1 B" in result.out
    assert standin.branch_modules(ALICE, "main") == {"main": MAIN}
    assert broken.plan("--refresh=always").code == 0
