"""The plan tells the truth (issue 10), end to end against the stand-in: an edit made outside the tool is seen, a
statement it did not check says so, two runs on one state folder take turns, an upload whose answer was lost is not
trusted, and a budget counted by the tool itself is shown as an estimate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from gitops.standin.testing import ALICE, FULL_TOKEN, RESTRICTED_TOKEN, StandIn
from tests.hostile import answer, hostile_server
from tests.project import Project, one_branch_project, spend

UPLOAD = "POST /api/user/code"
DOWNLOAD = "GET /api/user/code"
LIST = "GET /api/user/branches"


@pytest.fixture
def project(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    return one_branch_project(tmp_path, standin, capsys, monkeypatch)


def restricted_project(
    root: Path,
    standin: StandIn,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    code: str = "// v1\n",
) -> Project:
    """A bot deployed to the existing branch ``default`` with a token restricted to the code endpoints: it cannot
    read the branch list, so within the trust window its own upload record is all it knows."""
    p = Project(root, standin, capsys, monkeypatch, token=RESTRICTED_TOKEN)
    p.write({"src/main.js": code})
    p.manifest([{"branch": "default", "root": "src"}])
    p.commit()
    return p


def edit_on_the_server(standin: StandIn, branch: str, modules: dict[str, str]) -> None:
    """Another tool (the game's editor, a teammate's script) changes the branch with the same account."""
    with httpx.Client(base_url=standin.url, headers={"X-Token": FULL_TOKEN}) as http:
        answer = http.post("/api/user/code", json={"branch": branch, "modules": modules})
    assert answer.status_code == 200, answer.text


# --- verified or labelled; cheap verification -------------------------------------------------------------------


def test_an_edit_outside_the_tool_within_the_trust_window_is_detected(project: Project, standin: StandIn) -> None:
    assert project.apply("--yes").code == 0
    standin.clock.advance(60)  # well within budget.trust_own_upload_seconds (600 s)
    edit_on_the_server(standin, "main", {"main": "// edited in the game\n"})
    downloads = standin.count(DOWNLOAD)

    code, doc = project.plan_json()

    assert code == 2
    [branch] = doc["branches"]
    assert (branch["action"], branch["changed"]) == ("update", ["main"])
    assert (branch["remote"]["verified"], branch["remote"]["basis"]) == (True, "branch-list")
    assert doc["verified"] is True
    assert standin.count(DOWNLOAD) == downloads  # the list's modules were the download
    applied = project.apply("--yes")
    assert applied.code == 0, applied.err
    assert (standin.branch_modules(ALICE, "main") or {})["main"] == "module.exports.loop = () => {};\n"
    again = project.plan()
    assert again.code == 0
    assert "No changes: the servers hold what the repository holds." in again.out


def test_a_no_change_the_tool_did_not_check_says_what_it_rests_on(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = restricted_project(tmp_path / "bot", standin, capsys, monkeypatch)
    assert p.apply("--yes").code == 0
    standin.clock.advance(180)

    result = p.plan()
    assert result.code == 0  # no changes is exit 0, labelled (a pull request's plan must not fail on it)
    assert "server view: from this tool's own upload 3 min ago (not checked on the server)" in result.out
    assert "No changes since this tool's upload 3 min ago (not checked on the server)." in result.out
    assert "the servers hold what the repository holds" not in result.out
    code, doc = p.plan_json()
    assert code == 0
    assert doc["verified"] is False
    remote = doc["branches"][0]["remote"]
    assert (remote["how"], remote["verified"], remote["basis"], remote["checked_at"]) == (
        "own-upload",
        False,
        "own-upload",
        None,
    )
    assert remote["age_seconds"] == 180
    markdown = p.plan("--markdown").out
    assert "No changes since this tool's upload 3 min ago (not checked on the server)." in markdown
    assert "from this tool's own upload 3 min ago (not checked on the server)" in markdown
    applied = p.apply("--yes")
    assert applied.code == 0
    assert "Nothing to apply since this tool's upload 3 min ago (not checked on the server)." in applied.out

    verified = p.plan("--refresh=always")
    assert verified.code == 0
    assert "No changes: the servers hold what the repository holds." in verified.out


# --- lost answers ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["commit-drop", "500"])
def test_an_upload_whose_answer_was_lost_is_not_trusted(
    tmp_path: Path,
    standin: StandIn,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
) -> None:
    p = restricted_project(tmp_path / "bot", standin, capsys, monkeypatch, code="// v1\n")
    assert p.apply("--yes").code == 0
    p.write({"src/main.js": "// v2\n"})
    standin.inject_fault(UPLOAD, fault, count=2)  # the upload and its one retry
    failed = p.apply("--yes")
    assert failed.code == 1
    on_server = (standin.branch_modules(ALICE, "default") or {})["main"]
    assert on_server == ("// v2\n" if fault == "commit-drop" else "// v1\n")

    # Roll back to the code of the upload the tool last knew for sure.
    p.write({"src/main.js": "// v1\n"})
    code, doc = p.plan_json()
    assert doc["branches"][0]["remote"]["basis"] == "download"  # the record of v1 was dropped: downloaded
    if fault == "commit-drop":
        assert (code, doc["branches"][0]["action"]) == (2, "update")
        uploads = standin.count(UPLOAD)
        rolled = p.apply("--yes")
        assert rolled.code == 0, rolled.err
        assert "Nothing to apply" not in rolled.out
        assert standin.count(UPLOAD) == uploads + 1
    else:
        assert code == 0  # the 500 left v1 in place, and the download says so
    assert (standin.branch_modules(ALICE, "default") or {})["main"] == "// v1\n"


# --- two runs on one state folder -------------------------------------------------------------------------------


def _gitops(project: Project, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(project.root.parent),
        "SCREEPS_TOKEN": RESTRICTED_TOKEN,
        "NO_COLOR": "1",
        **(extra_env or {}),
    }
    command = [sys.executable, "-m", "gitops", *args, "-m", str(project.root / "gitops.yaml")]
    command += ["--state-dir", str(project.state_dir)]
    return subprocess.Popen(
        command, cwd=project.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=120)
    return process.returncode, out, err


def test_two_concurrent_applies_on_one_state_folder_then_a_plan_sees_the_truth(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two checkouts of different code deploy the same branch with one state folder (one runner, two jobs). Real
    # processes on the system clock, so that the trust window applies to the plans after them.
    a = restricted_project(tmp_path / "a", standin, capsys, monkeypatch, code="// from a\n")
    b = restricted_project(tmp_path / "b", standin, capsys, monkeypatch, code="// from b\n")
    b.state_dir = a.state_dir
    runs = [_gitops(a, "apply", "--yes"), _gitops(b, "apply", "--yes")]
    results = [_finish(run) for run in runs]
    assert [r[0] for r in results] == [0, 0], results

    held = (standin.branch_modules(ALICE, "default") or {})["main"]
    winner, loser = (a, b) if held == "// from a\n" else (b, a)
    code, out, err = _finish(_gitops(winner, "plan"))
    assert code == 0, err
    assert "No changes since this tool's upload" in out
    code, out, err = _finish(_gitops(loser, "plan", "--json"))
    assert code == 2, err
    assert json.loads(out)["branches"][0]["changed"] == ["main"]
    # No record lost: the ledger counts every upload both runs sent.
    [ledger] = (a.state_dir / "ledger").glob("*/*.json")
    sent = json.loads(ledger.read_text(encoding="utf-8"))["sent"]
    assert len(sent.get(UPLOAD, [])) == standin.count(UPLOAD)


def test_a_run_that_waits_too_long_for_the_ledger_names_the_one_holding_it(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = restricted_project(tmp_path / "bot", standin, capsys, monkeypatch)
    assert p.plan().code == 2  # writes the ledger, so its path is known
    [ledger] = (p.state_dir / "ledger").glob("*/*.json")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from gitops.edges.clock import SystemClock; "
            "from gitops.edges.ledger import Ledger; "
            f"ledger = Ledger.open(Path({str(p.state_dir)!r}), {standin.url!r}, {ledger.stem!r}, "
            "clock=SystemClock(), lock_wait=5); print('locked', flush=True); sys.stdin.read(); ledger.close()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "locked\n"
        monkeypatch.setenv("GITOPS_LOCK_WAIT", "0.3")
        refused = p.plan()
    finally:
        holder.communicate("", timeout=30)
    assert refused.code == 1
    assert refused.err.startswith(f"Error: another gitops run (pid {holder.pid}, '")
    assert f"is using the ledger {ledger}; waited 0.3 s for it" in refused.err
    assert "GITOPS_LOCK_WAIT" in refused.err
    assert p.plan().code == 2  # released: the next run goes ahead


# --- honest budgets -----------------------------------------------------------------------------------------------


def test_a_budget_the_server_did_not_state_is_shown_as_an_estimate(project: Project, standin: StandIn) -> None:
    assert project.apply("--yes").code == 0  # created with its modules: the tool has seen no upload headers
    spend(standin, UPLOAD, 240)  # another tool spent the day's uploads with the same token
    project.write({"src/main.js": "// v2\n"})

    text = project.plan()
    assert text.code == 2
    assert "POST /api/user/code: needs 1 of 240 per day; ~240 left, estimated from this tool's own requests" in text.out
    assert "; 240 left" not in text.out
    markdown = project.plan("--markdown").out
    assert "\\~240 left, estimated from this tool's own requests" in markdown  # Markdown's ~ escaped
    code, doc = project.plan_json()
    assert code == 2
    row = next(r for r in doc["budget"] if r["endpoint"] == UPLOAD)
    assert (row["source"], row["estimate"], row["remaining"]) == ("counted", True, 240)

    before = standin.branch_modules(ALICE, "main")
    refused = project.apply("--yes")
    assert refused.code == 3  # the server's 429 says the day is spent
    assert standin.branch_modules(ALICE, "main") == before
    after = project.plan()  # the 429's headers are the server's word: no estimate any more, a refusal
    assert after.code == 3
    assert "the plan needs 1 x POST /api/user/code but 0 of 240 per day remain" in after.err


def test_two_server_names_for_one_account_share_one_ledger_and_one_lock(project: Project, standin: StandIn) -> None:
    server = {"url": standin.url, "token_env": "SCREEPS_TOKEN"}
    project.manifest(
        [{"branch": "main", "root": "src"}, {"server": "again", "branch": "sim", "root": "src"}],
        servers={"local": server, "again": dict(server)},  # two dicts: YAML aliases are refused
    )
    assert project.apply("--yes").code == 0  # one run, one lock: it does not wait for itself
    result = project.plan()
    assert result.code == 0, result.err
    assert "No changes: the servers hold what the repository holds." in result.out


def test_without_modules_in_the_list_its_timestamp_confirms_or_refutes_the_record(
    project: Project, standin: StandIn
) -> None:
    standin.list_without_modules()  # a list of names, flags and timestamps only
    assert project.apply("--yes").code == 0
    downloads = standin.count(DOWNLOAD)
    standin.clock.advance(60)

    code, doc = project.plan_json()  # the stamp the create answered is the one listed: confirmed, no download
    assert code == 0
    remote = doc["branches"][0]["remote"]
    assert (remote["how"], remote["verified"], remote["basis"]) == ("own-upload", True, "branch-list")
    assert standin.count(DOWNLOAD) == downloads
    assert (
        "this tool's own upload 60 s ago, confirmed unchanged by the server's branch list 0 s ago" in project.plan().out
    )

    edit_on_the_server(standin, "main", {"main": "// edited in the game\n"})
    standin.clock.advance(1)  # a new timestamp (milliseconds) for the edit
    code, doc = project.plan_json()  # within the trust window, yet the list's stamp moved on: downloaded
    assert code == 2
    assert (doc["branches"][0]["action"], doc["branches"][0]["remote"]["basis"]) == ("update", "download")
    assert standin.count(DOWNLOAD) == downloads + 1
    code, doc = project.plan_json()  # the download recorded the listed stamp: confirmed again, no download
    assert code == 2
    assert doc["branches"][0]["remote"]["basis"] == "branch-list"
    assert standin.count(DOWNLOAD) == downloads + 1


def test_modules_in_the_list_that_are_not_modules_are_a_clear_error(project: Project) -> None:
    body = b'{"ok":1,"list":[{"branch":"main","timestamp":1,"modules":{"main":5}}]}'
    with hostile_server(answer(body)) as server:
        path = project.root / "gitops.yaml"
        path.write_text(path.read_text(encoding="utf-8").replace(project.service.url, server.url), encoding="utf-8")
        result = project.plan()
    assert result.code == 1
    assert result.err.startswith(
        "Error: server 'local' answered GET /api/user/branches with JSON the tool cannot read: branch 'main': "
    )
    assert "Traceback" not in result.err
