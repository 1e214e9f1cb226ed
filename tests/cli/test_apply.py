"""End to end: a real git repository, the real CLI, the real stand-in over loopback (issue 3's "done means")."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gitops.standin.testing import ALICE, DEMO_ACCOUNTS, FULL_TOKEN, RESTRICTED_TOKEN, StandIn, running_standin
from tests.project import Project

UPLOAD = "POST /api/user/code"
DOWNLOAD = "GET /api/user/code"

BOT = {
    "src/main.js": "const harvester = require('role/harvester');\nmodule.exports.loop = () => harvester.run();\n",
    "src/role/harvester.js": "module.exports.run = () => {\n  // harvest\n};\n",
    "src/util/names.js": "module.exports.name = (n) => 'creep-' + n;\n",
}


@pytest.fixture
def project(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write(BOT)
    p.manifest([{"branch": "main", "root": "src", "include": ["**/*.js"], "activate": ["world"]}])
    p.commit("first bot")
    return p


def test_first_deploy_to_a_new_account_creates_with_the_modules_and_activates(
    project: Project, standin: StandIn
) -> None:
    assert [b["branch"] for b in standin.branches(ALICE)] == ["default"]
    code, doc = project.plan_json()
    assert code == 2
    assert doc["has_changes"] is True
    assert doc["uploads_needed"] == 0  # the clone-branch carries the modules (defaultModules)
    [branch] = doc["branches"]
    assert (branch["server"], branch["branch"], branch["action"]) == ("local", "main", "create")
    assert branch["added"] == ["main", "role/harvester", "util/names"]
    assert branch["activate"] == ["world"]
    assert branch["requests"] == ["POST /api/user/clone-branch", "POST /api/user/set-active-branch"]
    budget = {row["endpoint"]: row["needed"] for row in doc["budget"]}
    assert budget == {"POST /api/user/set-active-branch": 1, "global": 2}  # clone-branch: the global limit only
    assert standin.count(UPLOAD) == 0

    result = project.apply("--yes")
    assert result.code == 0, result.err
    assert "Applied:" in result.out
    assert standin.branch_modules(ALICE, "main") == {
        "main": BOT["src/main.js"],
        "role/harvester": BOT["src/role/harvester.js"],
        "util/names": BOT["src/util/names.js"],
    }
    main = next(b for b in standin.branches(ALICE) if b["branch"] == "main")
    assert main["activeWorld"] is True
    assert main["activeSim"] is False
    # Created holding its modules: no code upload was spent, and no empty branch could be left behind.
    assert (standin.count(UPLOAD), standin.count("POST /api/user/clone-branch")) == (0, 1)
    assert project.plan().code == 0


def test_second_plan_without_change_exits_0_and_uploads_nothing(project: Project, standin: StandIn) -> None:
    assert project.apply("--yes").code == 0
    uploads = standin.count(UPLOAD)
    result = project.plan("--refresh=always")
    assert result.code == 0, result.err
    assert "No changes: the servers hold what the repository holds." in result.out
    again = project.apply("--yes")
    assert again.code == 0
    assert "Nothing to apply." in again.out
    assert standin.count(UPLOAD) == uploads


def test_one_changed_file_uploads_only_its_branch_and_shows_only_that_module(
    project: Project, standin: StandIn
) -> None:
    project.write({"sim/main.js": "module.exports.loop = () => {};\n"})
    project.manifest(
        [
            {"branch": "main", "root": "src", "activate": ["world"]},
            {"branch": "simulation", "root": "sim", "activate": ["sim"]},
        ]
    )
    assert project.apply("--yes").code == 0
    before = standin.count(UPLOAD)
    project.write({"src/role/harvester.js": "module.exports.run = () => {\n  // harvest harder\n};\n"})
    code, doc = project.plan_json("--refresh=always")
    assert code == 2
    by_name = {b["branch"]: b for b in doc["branches"]}
    assert by_name["simulation"]["action"] == "none"
    assert (by_name["main"]["action"], by_name["main"]["changed"]) == ("update", ["role/harvester"])
    assert by_name["main"]["added"] == by_name["main"]["removed"] == []
    text = project.plan("--refresh=always").out
    assert "~ role/harvester" in text
    assert "+  // harvest harder" in text
    assert "util/names" not in text
    assert project.apply("--yes").code == 0
    assert standin.count(UPLOAD) == before + 1
    assert standin.branch_modules(ALICE, "main")["role/harvester"] == (  # type: ignore[index]
        "module.exports.run = () => {\n  // harvest harder\n};\n"
    )


def test_removed_file_is_gone_from_the_server(project: Project, standin: StandIn) -> None:
    assert project.apply("--yes").code == 0
    project.remove("src/util/names.js")
    code, doc = project.plan_json("--refresh=always")
    assert code == 2
    assert doc["branches"][0]["removed"] == ["util/names"]
    assert project.apply("--yes").code == 0
    assert sorted(standin.branch_modules(ALICE, "main") or {}) == ["main", "role/harvester"]


def test_binary_module_round_trip(project: Project, standin: StandIn) -> None:
    wasm = b"\x00asm\x01\x00\x00\x00" + bytes(range(256))
    project.write({"src/lib/fast.wasm": wasm})
    project.manifest([{"branch": "main", "root": "src", "include": ["**/*.js", "**/*.wasm"]}])
    assert project.apply("--yes").code == 0
    stored = (standin.branch_modules(ALICE, "main") or {})["lib/fast.wasm"]
    assert stored == {"binary": base64.b64encode(wasm).decode("ascii")}
    # Downloaded again, the binary module compares equal: nothing to do.
    assert project.plan("--refresh=always").code == 0


def test_ref_reads_the_commit_and_ignores_a_dirty_tree(project: Project, standin: StandIn) -> None:
    project.write({"src/main.js": "// uncommitted experiment\n"})
    result = project.apply("--yes", "--ref", "HEAD")
    assert result.code == 0, result.err
    assert "git ref HEAD" in result.out
    assert (standin.branch_modules(ALICE, "main") or {})["main"] == BOT["src/main.js"]
    # The working tree, by contrast, would change main.
    code, doc = project.plan_json("--refresh=always")
    assert (code, doc["branches"][0]["changed"]) == (2, ["main"])


def test_saved_plan_applies_exactly_and_a_stale_one_is_refused(
    project: Project, standin: StandIn, tmp_path: Path
) -> None:
    assert project.apply("--yes").code == 0
    project.write({"src/main.js": "module.exports.loop = () => 'v2';\n"})
    plan_file = tmp_path / "v2.plan.json"
    assert project.plan("--out", str(plan_file), "--refresh=always").code == 2
    # Someone edits the branch in the game's editor after the plan was made.
    edited = {"main": "// edited in the game\n"}
    response = httpx.post(
        standin.url + "/api/user/code", json={"branch": "main", "modules": edited}, headers={"X-Token": FULL_TOKEN}
    )
    assert response.json()["ok"] == 1
    uploads = standin.count(UPLOAD)
    result = project.apply(str(plan_file))
    assert result.code == 8
    assert (
        "Error: plan is stale: the server changed since the plan was made, nothing was applied:\n"
        "  - local/main: the branch's modules changed on the server after the plan was made\n"
        "Make a fresh plan ('gitops plan --out FILE') and review it, or run 'gitops apply' without a file."
    ) in result.err
    assert standin.count(UPLOAD) == uploads
    assert standin.branch_modules(ALICE, "main") == edited


def test_saved_plan_uploads_the_planned_content_not_the_current_tree(
    project: Project, standin: StandIn, tmp_path: Path
) -> None:
    plan_file = tmp_path / "first.plan.json"
    assert project.plan("--out", str(plan_file)).code == 2
    assert FULL_TOKEN not in plan_file.read_text(encoding="utf-8")
    project.write({"src/main.js": "// written after the plan\n"})
    result = project.apply(str(plan_file))
    assert result.code == 0, result.err
    assert (standin.branch_modules(ALICE, "main") or {})["main"] == BOT["src/main.js"]


def test_saved_plan_for_another_manifest_is_refused(project: Project, tmp_path: Path) -> None:
    plan_file = tmp_path / "p.json"
    assert project.plan("--out", str(plan_file)).code == 2
    project.manifest([{"branch": "main", "root": "src", "activate": ["world", "sim"]}])
    result = project.apply(str(plan_file))
    assert result.code == 8
    assert result.err.startswith(
        f"Error: the plan no longer matches the manifest {project.root / 'gitops.yaml'}: "
        "it was made from a different version of it"
    )


def test_apply_without_terminal_needs_yes(project: Project, standin: StandIn) -> None:
    result = project.apply()
    assert result.code == 4
    assert result.err.endswith(
        "Error: apply needs confirmation and there is no terminal to ask at\n"
        "Pass --yes (or set GITOPS_YES=1) to apply without asking, e.g. in CI.\n"
    )
    assert standin.count(UPLOAD) == 0


@pytest.fixture
def second_service(tmp_path: Path, standin: StandIn) -> Iterator[StandIn]:
    with running_standin(DEMO_ACCOUNTS, tmp_path / "second.sqlite3", clock=standin.clock) as other:
        yield other


def test_failure_on_the_second_of_three_branches_is_reported_then_converges(
    project: Project, standin: StandIn, second_service: StandIn
) -> None:
    project.write({"b/main.js": "// b\n", "c/main.js": "// c\n"})
    manifest = project.manifest(
        [
            {"branch": "alpha", "root": "src"},
            {"branch": "beta", "root": "b"},
            {"branch": "gamma", "root": "c"},
        ]
    )
    # beta lives on a second server, so that a fault on its clone-branch hits exactly the second branch.
    text = manifest.read_text(encoding="utf-8").replace(
        "- server: local\n  branch: beta", "- server: other\n  branch: beta"
    )
    text = text.replace(
        "servers:\n", f"servers:\n  other:\n    url: {second_service.url}\n    token_env: SCREEPS_TOKEN\n"
    )
    manifest.write_text(text, encoding="utf-8")
    # A write is retried once after a 500, so two faults make it fail for good.
    second_service.inject_fault("POST /api/user/clone-branch", "500", count=2)
    result = project.apply("--yes")
    assert result.code == 1
    # The servers are written at the same time: the failure stops its own server's steps, the other server's go on
    # (each branch is one whole write), and the report lists every step of the plan in its order.
    assert (
        "Error: apply failed on server 'other': apply stopped at step 1 of 1 (other/beta: clone-branch "
        "(POST /api/user/clone-branch))." in result.err
    )
    assert "What was done and what was not:\n  done    local/alpha: clone-branch (POST /api/user/clone-branch)\n" in (
        result.err
    )
    assert "  FAILED  other/beta: clone-branch (POST /api/user/clone-branch): " in result.err
    assert "  done    local/gamma: clone-branch (POST /api/user/clone-branch)\n" in result.err
    assert second_service.branch_modules(ALICE, "beta") is None
    assert "Run 'gitops apply' again once the cause is fixed: it plans afresh and converges." in result.err
    assert standin.branch_modules(ALICE, "alpha") is not None
    assert standin.branch_modules(ALICE, "gamma") is not None

    again = project.apply("--yes")
    assert again.code == 0, again.err
    assert (second_service.branch_modules(ALICE, "beta") or {}) == {"main": "// b\n"}
    assert (standin.branch_modules(ALICE, "gamma") or {}) == {"main": "// c\n"}
    assert project.plan("--refresh=always").code == 0


def test_plan_json_document_shape(project: Project) -> None:
    code, doc = project.plan_json()
    assert code == 2
    assert set(doc) == {
        "format_version",
        "has_changes",
        "verified",
        "uploads_needed",
        "fits_budget",
        "created_at",
        "manifest",
        "source",
        "refresh",
        "branches",
        "budget",
        "not_rate_limited",
        "warnings",
        "failed",
        "unsettled",
    }
    assert doc["format_version"] == 1
    assert json.dumps(doc).count(FULL_TOKEN) == 0


def test_markdown_plan_has_a_table_then_details(project: Project) -> None:
    assert project.apply("--yes").code == 0
    project.write({"src/main.js": "module.exports.loop = () => 'v3';\n"})
    result = project.plan("--markdown", "--refresh=always")
    assert result.code == 2
    lines = result.out.splitlines()
    assert lines[0] == "### screeps-gitops plan"
    assert "| server | branch | action | added | changed | removed | requests | server view |" in lines
    assert "<details><summary>diff of <code>main</code></summary>" in result.out
    assert result.out.index("| server |") < result.out.index("<details>")


def test_a_token_restricted_to_the_code_endpoints_is_refused_before_anything_is_sent(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The plan knows the token's scope (the token query, free of the code limits): a plan whose apply would stop
    # part-way (the update done, the create refused) is refused up front, naming the step and the endpoint.
    restricted = Project(tmp_path / "bot", standin, capsys, monkeypatch, token=RESTRICTED_TOKEN)
    restricted.write(BOT)
    restricted.manifest([{"branch": "default", "root": "src"}, {"branch": "fresh", "root": "src"}])
    plan = restricted.plan()
    assert plan.code == 7, plan.err
    assert (
        "server 'local': the token may not use POST /api/user/clone-branch, which applying this plan needs "
        "(local/fresh: POST /api/user/clone-branch); nothing was sent"
    ) in plan.err
    result = restricted.apply("--yes")
    assert result.code == 7
    assert standin.count(UPLOAD) == 0
    assert standin.count("POST /api/user/clone-branch") == 0
    assert (standin.branch_modules(ALICE, "default") or {})["main"] == ""
    # Within its scope (the update alone) the same token deploys.
    restricted.manifest([{"branch": "default", "root": "src"}])
    assert restricted.apply("--yes").code == 0
    assert (standin.branch_modules(ALICE, "default") or {})["main"] == BOT["src/main.js"]


def test_without_the_branch_list_activation_is_known_from_the_tools_own_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "canarynolist0123456789abcdef01234"
    accounts = {
        "users": [
            {
                "username": ALICE,
                "tokens": [
                    {
                        "value": token,
                        "endpoints": [
                            "GET /api/user/code",
                            "POST /api/user/code",
                            "POST /api/user/clone-branch",
                            "POST /api/user/set-active-branch",
                        ],
                    }
                ],
            }
        ]
    }
    with running_standin(accounts, tmp_path / "nolist.sqlite3") as service:
        p = Project(tmp_path / "bot", service, capsys, monkeypatch, token=token)
        p.write(BOT)
        p.manifest([{"branch": "main", "root": "src", "activate": ["world"]}])
        assert p.apply("--yes").code == 0
        assert next(b for b in service.branches(ALICE) if b["branch"] == "main")["activeWorld"] is True
        again = p.plan("--refresh=always")
        assert again.code == 0, again.out
        assert service.count("GET /api/user/branches") == 2  # refused (403) once per plan, never trusted


def test_a_branch_without_main_converges(project: Project, standin: StandIn) -> None:
    project.write({"lib/util.js": "module.exports = 1;\n"})
    project.manifest([{"branch": "library", "root": "lib"}])
    result = project.apply("--yes")
    assert result.code == 0, result.err
    assert "library: no module 'main'; the server adds an empty one" in result.out
    assert standin.branch_modules(ALICE, "library") == {"main": "", "util": "module.exports = 1;\n"}
    assert project.plan("--refresh=always").code == 0


def test_keep_never_replaces_the_servers_main_with_an_empty_one(project: Project, standin: StandIn) -> None:
    assert project.apply("--yes").code == 0
    project.remove("src/main.js")
    project.manifest([{"branch": "main", "root": "src", "remote_only": "keep"}])
    code, doc = project.plan_json("--refresh=always")
    assert code == 0, doc
    assert doc["branches"][0]["kept"] == ["main"]
    project.write({"src/util/names.js": "module.exports.name = (n) => 'bot-' + n;\n"})
    assert project.apply("--yes", "--refresh=always").code == 0
    held = standin.branch_modules(ALICE, "main") or {}
    assert held["main"] == BOT["src/main.js"]
    assert held["util/names"] == "module.exports.name = (n) => 'bot-' + n;\n"


def test_apply_never_writes_blind_from_an_empty_ledger(project: Project, standin: StandIn) -> None:
    httpx.post(
        standin.url + "/api/user/clone-branch",
        json={"branch": "", "newName": "main", "defaultModules": {"main": "// live"}},
        headers={"X-Token": FULL_TOKEN},
    ).raise_for_status()
    result = project.apply("--yes", "--refresh=never")
    assert result.code == 4
    assert (
        "Error: local/main cannot be applied: the plan was made without any knowledge of it on the server "
        "(--refresh=never with an empty ledger), so a clone-branch could overwrite a branch that exists\n"
        "Plan with --refresh=auto (the default), which asks the server.\n"
    ) in result.err
    assert standin.branch_modules(ALICE, "main") == {"main": "// live"}
    assert standin.count("POST /api/user/clone-branch") == 1


def test_apply_without_yes_off_a_terminal_spends_nothing(project: Project, standin: StandIn) -> None:
    assert project.apply().code == 4
    assert standin.count("GET /api/user/branches") == standin.count(DOWNLOAD) == 0


def test_never_says_its_view_comes_from_the_ledger(project: Project) -> None:
    assert project.apply("--yes").code == 0
    assert project.plan("--refresh=always").code == 0  # a download: the ledger now holds what it saw
    code, doc = project.plan_json("--refresh=never")
    assert (code, doc["branches"][0]["remote"]["how"]) == (0, "ledger")
    shown = project.plan("--refresh=never").out
    assert "server view: from the ledger, learnt 0 s ago (not checked on the server)" in shown
    assert "No changes since the ledger's record of 0 s ago (not checked on the server)." in shown


def test_kept_modules_count_towards_the_5_mb_limit(project: Project, standin: StandIn) -> None:
    big = "// " + "x" * (4 * 1024 * 1024) + "\n"
    httpx.post(
        standin.url + "/api/user/clone-branch",
        json={"branch": "", "newName": "main", "defaultModules": {"main": "", "huge": big}},
        headers={"X-Token": FULL_TOKEN},
    ).raise_for_status()
    project.write({"src/big.js": "// " + "y" * (1024 * 1024 + 100) + "\n"})
    project.manifest([{"branch": "main", "root": "src", "remote_only": "keep"}])
    result = project.plan("--refresh=always")
    assert result.code == 6
    assert "Error: local/main: the upload would be " in result.err
    assert "over its limit of 5,242,880 (5 MB), with 1 module(s) kept from the server (remote_only: keep)" in result.err


def test_a_typo_in_a_branch_name_is_a_create_with_a_note(project: Project) -> None:
    project.manifest([{"branch": "defualt", "root": "src"}])
    code, doc = project.plan_json()
    assert code == 2
    assert doc["branches"][0]["action"] == "create"
    assert (
        "local/defualt: no branch of that name on the server, so it is created; the server has 'default': if that is "
        "the one meant, fix branch: in the manifest"
    ) in doc["warnings"]
