"""Drift end to end: apply, change the branch behind the tool's back, then ``plan`` marks it and ``gitops drift``
names the modules (exit 2); after applying again, no drift (exit 0). The real CLI, a real git repository, the real
stand-in over loopback; a lost upload answer is produced at the httpx transport seam."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from gitops.cli import run
from gitops.standin.testing import ALICE, FULL_TOKEN, StandIn
from tests.project import Project, edit_on_server, spend

DOWNLOAD = "GET /api/user/code"
UPLOAD = "POST /api/user/code"
BOT = {
    "src/main.js": "const harvester = require('role/harvester');\nmodule.exports.loop = () => harvester.run();\n",
    "src/role/harvester.js": "module.exports.run = () => {\n  // harvest\n};\n",
    "src/util.js": "module.exports.x = 1;\n",
}


@pytest.fixture
def project(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write(BOT)
    p.manifest([{"branch": "main", "root": "src"}, {"branch": "sim", "root": "src"}])
    p.commit("first bot")
    return p


def drift_json(project: Project) -> tuple[int, dict[str, Any]]:
    result = project.gitops("drift", "--json")
    assert result.code in (0, 2), result.err
    return result.code, json.loads(result.out)


def test_a_change_behind_the_tools_back_is_drift_until_applied_again(project: Project, standin: StandIn) -> None:
    assert project.apply("--yes").code == 0
    result = project.gitops("drift")
    assert result.code == 0, result.err
    assert "local/main: no drift: the server holds what this tool applied" in result.out
    assert "No drift: every branch this tool applied holds what it applied." in result.out

    edit_on_server(standin, "main", {"main": "module.exports.loop = () => {}; // edited in game\n", "hack": "1;\n"})
    edit_on_server(standin, "main", {"util": None})

    code, plan = project.plan_json("--refresh=always")
    assert code == 2
    main, sim = plan["branches"]
    assert main["drift"] is True
    assert main["changed_outside_git"] == {
        "added": ["hack"],
        "changed": ["main"],
        "removed": ["util"],
        "branch_deleted": False,
    }
    assert main["last_applied"]["how"] == "upload"
    assert sim["drift"] is False
    text = project.plan("--refresh=always")
    assert "  drift: changed outside Git since this tool applied it" in text.out
    assert ": ~ main, + hack, - util\n" in text.out
    standin.clock.advance(3600)  # past the trust window: refresh=auto (the default) learns the branch on the server
    code, plan = project.plan_json()
    assert (code, plan["branches"][0]["drift"]) == (2, True)
    markdown = project.plan("--refresh=always", "--markdown")
    assert "**Drift** (applying overwrites these changes made outside Git)" in markdown.out

    downloads = standin.count(DOWNLOAD)
    result = project.gitops("drift")
    assert result.code == 2, result.err
    assert "local/main: DRIFTED: changed outside Git since this tool applied it" in result.out
    assert "~ main, + hack, - util" in result.out
    assert "local/sim: no drift" in result.out
    assert "Drift: 1 of 2 branch(es) changed outside Git." in result.out
    assert standin.count(DOWNLOAD) == downloads, "the branch list's modules stand for the downloads"
    standin.list_without_modules()  # a server whose list carries no modules (the official server's shape)
    again = project.gitops("drift")
    assert again.code == 2, again.err
    assert "~ main, + hack, - util" in again.out
    assert standin.count(DOWNLOAD) == downloads + 2, "then one download per branch with a record"
    code, document = drift_json(project)
    assert code == 2
    assert document["format_version"] == 1
    assert document["drifted"] is True
    [main_d, sim_d] = document["branches"]
    assert (main_d["branch"], main_d["drift"], main_d["drift_status"]) == ("main", True, "drifted")
    assert main_d["changed_outside_git"]["changed"] == ["main"]
    assert (sim_d["drift"], sim_d["drift_status"]) == (False, "none")

    assert project.apply("--yes").code == 0
    assert project.gitops("drift").code == 0
    code, document = drift_json(project)
    assert (code, document["drifted"]) == (0, False)


def test_a_deleted_branch_is_drift(project: Project, standin: StandIn) -> None:
    assert project.apply("--yes").code == 0
    with httpx.Client(base_url=standin.url, headers={"X-Token": FULL_TOKEN}) as http:
        answer = http.post("/api/user/delete-branch", json={"branch": "sim"})
    assert answer.status_code == 200, answer.text
    result = project.gitops("drift")
    assert result.code == 2, result.err
    assert "local/sim: DRIFTED: changed outside Git since this tool applied it" in result.out
    assert "the branch was deleted" in result.out
    code, document = drift_json(project)
    assert code == 2
    sim = document["branches"][1]
    assert sim["changed_outside_git"]["branch_deleted"] is True


def test_a_branch_never_applied_is_no_record_and_costs_no_request(project: Project, standin: StandIn) -> None:
    before = standin.count(DOWNLOAD), standin.count("GET /api/user/branches")
    result = project.gitops("drift")
    assert result.code == 0, result.err
    assert "local/main: no record: this tool never applied this branch here" in result.out
    assert (standin.count(DOWNLOAD), standin.count("GET /api/user/branches")) == before
    code, document = drift_json(project)
    assert code == 0
    assert [b["drift_status"] for b in document["branches"]] == ["no-record", "no-record"]
    assert [b["drift"] for b in document["branches"]] == [None, None]


def test_a_plan_that_finds_the_server_equal_to_the_repository_records_it(project: Project, standin: StandIn) -> None:
    """The in-game edit is committed to Git: the server now holds what the repository holds; nothing would be lost,
    so it is no drift, and the plan that verified it records it as applied."""
    assert project.apply("--yes").code == 0
    edited = "module.exports.x = 2; // tuned in game\n"
    edit_on_server(standin, "main", {"util": edited})
    assert project.gitops("drift").code == 2
    project.write({"src/util.js": edited})
    project.commit("take the in-game tuning")
    # sim still holds the old util: the plan updates it; main is equal to the repository now.
    code, plan = project.plan_json("--refresh=always")
    assert code == 2
    main, sim = plan["branches"]
    assert (main["action"], main["drift"]) == ("none", False)
    assert main["last_applied"]["how"] == "verified"
    assert sim["action"] == "update"
    assert project.gitops("drift").code == 0


def test_an_upload_whose_answer_was_lost_is_no_drift_when_it_landed(
    project: Project, standin: StandIn, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server committed the upload and the connection dropped before its answer: the pending record says the
    tool sent that set, so finding it on the server is no drift."""
    project.manifest([{"branch": "main", "root": "src"}])
    project.commit("one branch")
    assert project.apply("--yes").code == 0
    project.write({"src/util.js": "module.exports.x = 3;\n"})
    project.commit("x = 3")

    real = httpx.HTTPTransport()

    class LoseUploadAnswers(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            response = real.handle_request(request)
            if request.method == "POST" and request.url.path == "/api/user/code":
                response.read()
                response.close()
                raise httpx.ReadError("connection reset by peer", request=request)
            return response

        def close(self) -> None:
            real.close()

    capsys.readouterr()
    args = ["apply", "--yes", "-m", str(project.root / "gitops.yaml"), "--state-dir", str(project.state_dir)]
    with LoseUploadAnswers() as transport:
        code = run(args, clock=standin.clock, transport=transport)
    assert code == 1, capsys.readouterr().err
    held = standin.branch_modules(ALICE, "main")
    assert held is not None
    assert held["util"] == "module.exports.x = 3;\n", "the upload landed; only its answer was lost"
    result = project.gitops("drift")
    assert result.code == 0, result.out + result.err
    assert "an upload whose answer was lost had landed" in result.out


def test_downloads_that_do_not_fit_are_refused_before_any_download(project: Project, standin: StandIn) -> None:
    project.manifest([{"branch": "main", "root": "src"}])
    project.commit("one branch")
    assert project.apply("--yes").code == 0
    standin.list_without_modules()  # the list cannot stand for the download
    spend(standin, DOWNLOAD, 59)  # another tool with the same token: one download left of 60 per hour
    assert project.gitops("drift").code == 0  # it fits; the headers it brings back say that none remains
    downloads = standin.count(DOWNLOAD)
    result = project.gitops("drift")
    assert result.code == 3, result.out + result.err
    assert "the drift check needs more downloads than remain; no download was sent" in result.err
    assert "--refresh" not in result.err
    assert standin.count(DOWNLOAD) == downloads


def test_server_and_branch_select_what_is_checked(project: Project, standin: StandIn) -> None:
    assert project.apply("--yes").code == 0
    edit_on_server(standin, "main", {"main": "1;\n"})
    standin.list_without_modules()
    downloads = standin.count(DOWNLOAD)
    only_sim = project.gitops("drift", "--branch", "sim")
    assert only_sim.code == 0, only_sim.err
    assert "local/main" not in only_sim.out
    assert standin.count(DOWNLOAD) == downloads + 1, "only the targeted branch is downloaded"
    both = project.gitops("drift", "--server", "local", "--branch", "sim,local/main")
    assert both.code == 2
    wrong = project.gitops("drift", "--branch", "nope")
    assert wrong.code == 4
    assert "--branch nope: the manifest" in wrong.err


def test_another_machines_deploy_of_the_same_commit_is_not_drift(project: Project, standin: StandIn) -> None:
    # Machine B (this state folder) deployed v1; machine A (CI, another state folder) deployed v2 = HEAD since.
    # B's ledger still records v1, but the server holds what the repository holds: no drift, whichever order the
    # commands run in (issue 20, item 2).
    assert project.apply("--yes").code == 0  # B deploys v1
    project.write({"src/util.js": "module.exports.x = 2;\n"})
    project.commit("v2")
    machine_b = project.state_dir
    project.state_dir = machine_b.parent / "machine-a-state"
    assert project.apply("--yes").code == 0  # A deploys v2
    project.state_dir = machine_b
    result = project.gitops("drift")
    assert result.code == 0, result.out + result.err
    assert "local/main: no drift: the server holds the repository's code (working tree (commit " in result.out
    # An in-game edit is drift on both machines, and the report says what it was compared with.
    edit_on_server(standin, "main", {"hack": "1;\n"})
    for state in (machine_b, machine_b.parent / "machine-a-state"):
        project.state_dir = state
        again = project.gitops("drift")
        assert again.code == 2, again.out
        assert "and not the repository's code either (working tree (commit" in again.out
        assert "+ hack" in again.out
    project.state_dir = machine_b
