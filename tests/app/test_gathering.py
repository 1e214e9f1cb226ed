"""The gathering (``gitops/app/gathering.py``): what each server holds, learnt with as few downloads as the refresh
policy allows, each server's failure kept to itself when asked, the servers asked at the same time."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from gitops.app.gathering import SERVER_ERRORS, branch_from_list, gather_remote, run_concurrently
from gitops.app.session import open_session
from gitops.core.remote import BranchInfo
from gitops.errors import GitopsError, ServiceError
from gitops.standin.testing import StandIn
from tests.app.planningkit import one_server


def test_a_branch_the_server_lacks_is_learnt_missing_from_the_list_alone(tmp_path: Path, standin: StandIn) -> None:
    with open_session(one_server(tmp_path, standin.url)) as session:
        views = gather_remote(session, "auto")
    main = views["s"].branches["main"]
    assert main is not None
    assert main.exists is False
    assert main.basis == "branch-list"  # verified now by the list: no download was needed
    assert "default" in {b.name for b in views["s"].branch_list or ()}
    assert standin.count("GET /api/user/code") == 0


def test_a_server_that_fails_is_recorded_and_not_raised_when_asked(tmp_path: Path) -> None:
    failed: dict[str, GitopsError] = {}
    with open_session(one_server(tmp_path, "http://127.0.0.1:9")) as session:
        views = gather_remote(session, "auto", failed)
    assert views == {}
    assert isinstance(failed["s"], SERVER_ERRORS)
    assert "127.0.0.1:9" in str(failed["s"])


def test_a_listed_branch_whose_modules_are_not_modules_is_the_servers_error() -> None:
    with pytest.raises(ServiceError, match=r"JSON the tool cannot read: branch 'main': ") as raised:
        branch_from_list("s", BranchInfo("main", modules={"main": 5}), 5.0)  # a module is text or a binary object
    assert "GET /api/user/branches" in str(raised.value)
    good = branch_from_list("s", BranchInfo("main", stamp="7", modules={"main": "x"}), 5.0)
    assert (good.basis, good.checked_at, good.stamp) == ("branch-list", 5.0, "7")


def test_jobs_run_at_once_and_the_first_jobs_error_is_raised_after_all_ended() -> None:
    both_started = threading.Barrier(2, timeout=10)
    ended: list[str] = []

    def fails_first() -> None:
        both_started.wait()  # the other job runs at the same time (else the barrier times out)
        raise ServiceError("first")

    def fails_later() -> None:
        both_started.wait()
        ended.append("later")
        raise ServiceError("later")

    with pytest.raises(ServiceError, match=r"^first"):
        run_concurrently([fails_first, fails_later])
    assert ended == ["later"]
