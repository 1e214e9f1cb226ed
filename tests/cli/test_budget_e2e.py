"""The budget end to end (issue 4): the stand-in enforces the limits, its clock is moved, the CLI must plan around
them and refuse before spending a request it cannot afford."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from gitops.standin.testing import ALICE, FULL_TOKEN, StandIn
from tests.project import Project, add_server_only_binary, one_branch_project, spend

UPLOAD = "POST /api/user/code"
DOWNLOAD = "GET /api/user/code"
DAY = 86400


@pytest.fixture
def project(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    return one_branch_project(tmp_path, standin, capsys, monkeypatch)


def utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def test_the_240th_upload_of_a_day_refuses_the_next_plan_until_the_day_is_over(
    project: Project, standin: StandIn
) -> None:
    assert project.apply("--yes").code == 0  # creates the branch holding its modules: no upload
    day_starts = standin.clock.now()
    spend(standin, UPLOAD, 239)
    standin.clock.advance(60)
    project.write({"src/main.js": "module.exports.loop = () => 'v1';\n"})
    result = project.apply("--yes")  # the 240th upload of the day
    assert result.code == 0, result.err
    assert standin.count(UPLOAD) == 240

    project.write({"src/main.js": "module.exports.loop = () => 'next';\n"})
    refused = project.plan()
    assert refused.code == 3
    assert (
        "Error: the plan does not fit the token's rate limits; nothing was sent:\n"
        "  - server 'local': the plan needs 1 x POST /api/user/code but 0 of 240 per day remain; "
        f"it resets at {utc(day_starts + DAY)}\n"
    ) in refused.err
    assert "no-rate-limit page" in refused.err
    assert "noratelimit?token=<hidden>" in refused.err
    assert project.apply("--yes").code == 3
    assert standin.count(UPLOAD) == 240  # refused before any upload: no 429 was even provoked

    standin.clock.advance(DAY)
    assert project.plan().code == 2
    assert project.apply("--yes").code == 0
    assert (standin.branch_modules(ALICE, "main") or {})["main"] == "module.exports.loop = () => 'next';\n"


def test_an_unlimited_period_is_honoured_and_ends(project: Project, standin: StandIn) -> None:
    assert project.apply("--yes").code == 0
    spend(standin, UPLOAD, 239)
    standin.clock.advance(60)
    project.write({"src/main.js": "// v1\n"})
    assert project.apply("--yes").code == 0
    project.write({"src/main.js": "// v2\n"})
    assert project.plan().code == 3

    until = standin.grant_unlimited(FULL_TOKEN)  # the person pressed Proceed on the no-rate-limit page
    result = project.plan()
    assert result.code == 2, result.err
    assert f"unlimited until {utc(until)}" in result.out
    assert project.apply("--yes").code == 0
    assert standin.count(UPLOAD) == 241

    standin.clock.advance(2 * 3600 + 1)
    project.write({"src/main.js": "// v3\n"})
    after = project.plan()
    assert after.code == 3
    assert "0 of 240 per day remain" in after.err


def test_reserve_keeps_requests_back_for_the_person(project: Project, standin: StandIn) -> None:
    project.manifest([{"branch": "main", "root": "src"}], budget={"reserve": {UPLOAD: 20}})
    assert project.apply("--yes").code == 0
    spend(standin, UPLOAD, 218)
    standin.clock.advance(60)
    project.write({"src/main.js": "// v1\n"})
    assert project.apply("--yes").code == 0  # the 219th: 21 left, one more than the reserve
    project.write({"src/main.js": "// v2\n"})
    assert project.apply("--yes").code == 0  # the 220th: 20 left, all reserved
    project.write({"src/main.js": "// v3\n"})
    refused = project.plan()
    assert refused.code == 3
    assert (
        "  - server 'local': the plan needs 1 x POST /api/user/code but 20 of 240 per day remain (20 reserved for you);"
    ) in refused.err


def test_a_429_under_max_wait_is_waited_and_retried(project: Project, standin: StandIn) -> None:
    assert project.apply("--yes").code == 0  # the branch exists: planning must download it
    spend(standin, DOWNLOAD, 60)  # the hour's downloads, spent behind the tool's back
    standin.clock.advance(3600 - 30)  # the window resets in 30 s
    started = standin.clock.now()
    result = project.plan("--refresh=always", "--max-wait", "60")
    assert "rate limited on GET /api/user/code (429): waiting 30 s before retrying" in result.err
    assert standin.clock.now() - started >= 30  # the client slept on the shared clock, then retried
    assert result.code == 0, result.err
    assert standin.count(DOWNLOAD) == 62  # 60 spent, one refused with 429, one retried


def test_a_429_over_max_wait_is_refused_with_the_time_to_try_again(project: Project, standin: StandIn) -> None:
    assert project.apply("--yes").code == 0
    opened = standin.clock.now()
    spend(standin, DOWNLOAD, 60)
    result = project.plan("--refresh=always", "--max-wait", "60")
    assert result.code == 3
    assert "GET /api/user/code" in result.err
    assert "60 per hour" in result.err
    reset = datetime.fromtimestamp(opened + 3600, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert f"it resets at {reset} (a wait of 60 min is longer than --max-wait (60 s))" in result.err
    assert FULL_TOKEN not in result.err
    assert FULL_TOKEN[:8] not in result.err
    assert standin.count(DOWNLOAD) == 61


def test_refresh_never_spends_no_request(project: Project, standin: StandIn) -> None:
    assert project.apply("--yes").code == 0
    project.write({"src/main.js": "// changed\n"})
    downloads, listings = standin.count(DOWNLOAD), standin.count("GET /api/user/branches")
    code, doc = project.plan_json("--refresh=never")
    assert code == 2
    assert doc["branches"][0]["changed"] == ["main"]
    assert doc["branches"][0]["remote"]["how"] == "own-upload"
    assert (standin.count(DOWNLOAD), standin.count("GET /api/user/branches")) == (downloads, listings)


def test_refresh_auto_verifies_with_the_branch_list_and_never_downloads_a_branch(
    project: Project, standin: StandIn
) -> None:
    assert project.apply("--yes").code == 0
    downloads, listings = standin.count(DOWNLOAD), standin.count("GET /api/user/branches")
    standin.clock.advance(120)
    fresh = project.plan()
    assert fresh.code == 0
    assert "server view: read from the server's branch list 0 s ago" in fresh.out
    assert "No changes: the servers hold what the repository holds." in fresh.out
    standin.clock.advance(3600)
    assert project.plan().code == 0
    assert standin.count(DOWNLOAD) == downloads  # the list's modules are the download
    assert standin.count("GET /api/user/branches") == listings + 2


def test_plan_refuses_downloads_it_cannot_afford_before_sending_any(project: Project, standin: StandIn) -> None:
    assert project.apply("--yes").code == 0
    standin.clock.advance(3600)
    assert project.plan("--refresh=always").code == 0  # headers now say how many downloads remain
    spend(standin, DOWNLOAD, 59)
    assert project.plan("--refresh=always").code == 3  # the 60th is spent behind our back: the 429 says so
    downloads = standin.count(DOWNLOAD)
    refused = project.plan("--refresh=always")
    assert refused.code == 3
    assert refused.err.startswith(
        "Error: planning needs more downloads than remain; no download was sent:\n"
        "  - server 'local': the plan needs 1 x GET /api/user/code but 0 of 60 per hour remain; it resets at "
    )
    assert "--refresh=never" in refused.err
    assert standin.count(DOWNLOAD) == downloads  # refused from the ledger, nothing sent


def test_the_plan_lists_each_endpoint_it_needs_with_what_remains(project: Project, standin: StandIn) -> None:
    assert project.apply("--yes").code == 0
    project.write({"src/main.js": "// v1\n"})
    assert project.apply("--yes").code == 0  # an upload: its answer's headers say what remains
    project.write({"src/main.js": "// v2\n"})
    code, doc = project.plan_json()
    assert code == 2
    rows = {row["endpoint"]: row for row in doc["budget"]}
    assert rows[UPLOAD]["needed"] == 1
    assert rows[UPLOAD]["remaining"] == 239
    assert rows[UPLOAD]["limit"] == 240
    assert rows[UPLOAD]["source"] == "headers"
    assert rows[UPLOAD]["estimate"] is False
    assert rows[UPLOAD]["reset"] is not None
    assert rows["global"]["needed"] == 1


def test_apply_budgets_the_download_that_kept_modules_need(project: Project, standin: StandIn) -> None:
    """``remote_only: keep`` with a server-only module the plan does not hold: apply downloads the branch again to
    re-send it, and that download is budgeted before anything is written (the Action does the same: see
    tests/action/test_action.py)."""
    assert project.apply("--yes").code == 0
    add_server_only_binary(standin, "main")
    project.manifest([{"branch": "main", "root": "src", "remote_only": "keep"}])
    project.write({"src/main.js": "// v2\n"})
    spend(standin, DOWNLOAD, 60 - standin.count(DOWNLOAD) - 1)
    assert project.plan("--refresh=always").code == 2  # the hour's last download: its headers say 0 remain
    uploads, before = standin.count(UPLOAD), standin.branch_modules(ALICE, "main")

    refused = project.apply("--yes")

    assert refused.code == 3, refused.err
    assert (
        "Error: the plan does not fit the token's rate limits; nothing was sent:\n"
        "  - server 'local': the plan needs 1 x GET /api/user/code but 0 of 60 per hour remain;"
    ) in refused.err
    assert standin.count(DOWNLOAD) == 60  # not one more (apply's fresh plan reads the branch list)
    assert (standin.count(UPLOAD), standin.branch_modules(ALICE, "main")) == (uploads, before)
