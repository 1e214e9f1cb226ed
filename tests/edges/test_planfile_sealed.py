"""Saved plans are sealed (issue 10, problem 6): ``gitops apply FILE`` refuses, with exit 8 and nothing written, a
plan file whose payload was edited after it was made, however the edit was made; an untouched plan still applies.
Real git project, real CLI, the real stand-in over loopback.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gitops.core.codeset import CodeSet, code_length
from gitops.standin.testing import ALICE, StandIn
from tests.project import Project

UPLOAD = "POST /api/user/code"
CLONE = "POST /api/user/clone-branch"

BOT = {
    "src/main.js": "const harvester = require('role/harvester');\nmodule.exports.loop = () => harvester.run();\n",
    "src/role/harvester.js": "module.exports.run = () => {\n  // harvest\n};\n",
    "src/util/names.js": "module.exports.name = (n) => 'creep-' + n;\n",
}
V2_MAIN = "module.exports.loop = () => 'v2';\n"
NEW = "module.exports.fresh = true;\n"

Plan = dict[str, Any]


@pytest.fixture
def project(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write(BOT)
    p.manifest([{"branch": "main", "root": "src", "include": ["**/*.js"]}])
    p.commit("first bot")
    return p


@pytest.fixture
def saved(project: Project, tmp_path: Path) -> Path:
    """A plan of one changed, one added, one removed and one unchanged module, saved after a first deploy; made
    from a download, so that it shows the changed module's diff."""
    assert project.apply("--yes").code == 0
    project.write({"src/main.js": V2_MAIN, "src/new.js": NEW})
    project.remove("src/util/names.js")
    plan_file = tmp_path / "v2.plan.json"
    assert project.plan("--out", str(plan_file), "--refresh=always").code == 2
    return plan_file


def payload(plan: Plan) -> dict[str, Any]:
    (only,) = plan["payloads"]
    modules: dict[str, Any] = only["modules"]
    return modules


def redigest(plan: Plan) -> None:
    """Edit the stored digest too, as someone covering their tracks would."""
    plan["branches"][0]["upload_digest"] = CodeSet.from_wire(payload(plan)).digest


def edit_a_changed_module(plan: Plan) -> None:
    payload(plan)["main"] = "require('child_process');\n"


def edit_a_changed_module_and_the_digest(plan: Plan) -> None:
    edit_a_changed_module(plan)
    redigest(plan)


def edit_a_changed_module_and_every_digest(plan: Plan) -> None:
    """Rewrite the module's row too (digest, size, length): only the diff the reviewer read is left as it was."""
    edited = "module.exports.loop = () => 'v3';\n"
    payload(plan)["main"] = edited
    (row,) = [r for r in plan["branches"][0]["modules"] if r["name"] == "main"]
    module = CodeSet.from_wire({"main": edited}).modules["main"]
    row["new_digest"], row["new_size"] = module.digest, module.size
    plan["branches"][0]["upload_length"] = code_length(payload(plan))
    redigest(plan)


def edit_an_unchanged_module(plan: Plan) -> None:
    payload(plan)["role/harvester"] = "module.exports.run = () => { steal(); }\n"


def edit_an_unchanged_module_keeping_length_and_digest(plan: Plan) -> None:
    # Same length, digest recomputed: only the server's copy of the module can tell.
    original = payload(plan)["role/harvester"]
    payload(plan)["role/harvester"] = original.replace("harvest", "exploit")
    assert len(payload(plan)["role/harvester"]) == len(original)
    redigest(plan)


def add_a_module(plan: Plan) -> None:
    payload(plan)["extra"] = "// not reviewed\n"
    redigest(plan)


def drop_a_module(plan: Plan) -> None:
    del payload(plan)["new"]
    redigest(plan)


def keep_a_removed_module(plan: Plan) -> None:
    payload(plan)["util/names"] = BOT["src/util/names.js"]
    redigest(plan)


def move_the_payload_to_another_branch(plan: Plan) -> None:
    plan["payloads"][0]["branch"] = "default"


TAMPERINGS: dict[str, tuple[Callable[[Plan], None], str]] = {
    "changed module": (edit_a_changed_module, "local/main: module 'main' (changed) is not the reviewed content"),
    "changed module and digest": (
        edit_a_changed_module_and_the_digest,
        "local/main: module 'main' (changed) is not the reviewed content",
    ),
    "changed module and every digest": (
        edit_a_changed_module_and_every_digest,
        "local/main: module 'main' is not what the plan's diff shows",
    ),
    "unchanged module": (
        edit_an_unchanged_module,
        "local/main: the modules to upload do not match the plan's upload_digest",
    ),
    "unchanged module, same length and digest": (
        edit_an_unchanged_module_keeping_length_and_digest,
        "local/main: module 'role/harvester' is shown as unchanged, but differs from the server's",
    ),
    "module added": (
        add_a_module,
        "local/main: the upload holds 2 module(s) the plan shows no change for, but the plan has 1 unchanged",
    ),
    "module dropped": (drop_a_module, "local/main: module 'new' (added) is not in the upload"),
    "removed module kept": (
        keep_a_removed_module,
        "local/main: module 'util/names' is to be removed, but the plan uploads it",
    ),
    "payload moved to another branch": (
        move_the_payload_to_another_branch,
        "local/default: the plan holds modules to upload to it, but the reviewed plan has no upload there",
    ),
}


@pytest.mark.parametrize("how", list(TAMPERINGS))
def test_a_tampered_plan_is_refused_and_the_server_is_unchanged(
    project: Project, standin: StandIn, saved: Path, how: str
) -> None:
    tamper, reason = TAMPERINGS[how]
    plan = json.loads(saved.read_text(encoding="utf-8"))
    tamper(plan)
    saved.write_text(json.dumps(plan), encoding="utf-8")
    before = standin.branch_modules(ALICE, "main")
    default = standin.branch_modules(ALICE, "default")
    uploads = standin.count(UPLOAD)

    result = project.apply(str(saved))

    assert result.code == 8, result.err
    assert "was edited after it was made: what it would upload is not what the plan shows, nothing was applied" in (
        result.err
    )
    assert f"  - {reason}\n" in result.err
    assert "Make the plan again with 'gitops plan --out FILE', review it, and apply that file unchanged." in result.err
    assert "Traceback" not in result.err
    assert standin.count(UPLOAD) == uploads
    assert standin.branch_modules(ALICE, "main") == before
    assert standin.branch_modules(ALICE, "default") == default


def test_the_untouched_plan_still_applies(project: Project, standin: StandIn, saved: Path) -> None:
    saved.write_text(json.dumps(json.loads(saved.read_text(encoding="utf-8"))), encoding="utf-8")  # reformatted only
    result = project.apply(str(saved))
    assert result.code == 0, result.err
    assert standin.branch_modules(ALICE, "main") == {
        "main": V2_MAIN,
        "new": NEW,
        "role/harvester": BOT["src/role/harvester.js"],
    }


def test_a_tampered_plan_that_creates_a_branch_creates_nothing(
    project: Project, standin: StandIn, tmp_path: Path
) -> None:
    plan_file = tmp_path / "create.plan.json"
    assert project.plan("--out", str(plan_file)).code == 2
    plan = json.loads(plan_file.read_text(encoding="utf-8"))
    edit_a_changed_module_and_the_digest(plan)  # 'main' is an added module here
    plan_file.write_text(json.dumps(plan), encoding="utf-8")
    result = project.apply(str(plan_file))
    assert result.code == 8
    assert "  - local/main: module 'main' (added) is not the reviewed content\n" in result.err
    assert standin.count(CLONE) == 0
    assert standin.count(UPLOAD) == 0
    assert standin.branch_modules(ALICE, "main") is None


def test_a_kept_module_planned_from_the_ledger_still_applies(
    project: Project, standin: StandIn, tmp_path: Path
) -> None:
    """remote_only: keep, planned without a download: the plan holds no content of the kept module and apply takes
    it from its own download; the seal allows exactly that."""
    project.manifest([{"branch": "main", "root": "src", "include": ["**/*.js"], "remote_only": "keep"}])
    project.commit("keep")
    assert project.apply("--yes").code == 0
    project.remove("src/util/names.js")
    project.write({"src/main.js": V2_MAIN})
    plan_file = tmp_path / "keep.plan.json"
    assert project.plan("--out", str(plan_file), "--refresh=never").code == 2
    plan = json.loads(plan_file.read_text(encoding="utf-8"))
    assert plan["payloads"][0]["missing_kept"] == ["util/names"]
    result = project.apply(str(plan_file))
    assert result.code == 0, result.err
    assert (standin.branch_modules(ALICE, "main") or {})["util/names"] == BOT["src/util/names.js"]
