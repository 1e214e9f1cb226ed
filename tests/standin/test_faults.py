"""Fault injection: the next N requests to an endpoint fail as asked, then the endpoint works again."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from gitops.standin.faults import Faults
from gitops.standin.testing import ALICE, FULL_TOKEN, StandIn
from tests.standin.helpers import client, window

UPLOAD = {"branch": "default", "modules": {"main": "new"}}


def test_500(standin: StandIn) -> None:
    standin.inject_fault("POST /api/user/code", "500", count=2)
    with client(standin, FULL_TOKEN) as http:
        for _ in range(2):
            answer = http.post("/api/user/code", json=UPLOAD)
            assert answer.status_code == 500
            assert answer.text == "Internal Server Error"
        assert standin.branch_modules(ALICE, "default") == {"main": ""}  # a faulted request is not handled
        assert http.post("/api/user/code", json=UPLOAD).json()["ok"] == 1
    assert standin.count("POST /api/user/code", ALICE) == 3


def test_drop_closes_the_connection_without_an_answer(standin: StandIn) -> None:
    standin.inject_fault("GET /api/user/code", "drop")
    with client(standin, FULL_TOKEN) as http:
        with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
            http.get("/api/user/code")
        assert http.get("/api/user/code").json()["ok"] == 1
    assert standin.count("GET /api/user/code") == 2


def test_drop_during_an_upload(standin: StandIn) -> None:
    standin.inject_fault("POST /api/user/code", "drop")
    big = {"branch": "default", "modules": {f"m{i}": "x" * 10_000 for i in range(100)}}
    with client(standin, FULL_TOKEN) as http:
        with pytest.raises(httpx.TransportError):
            http.post("/api/user/code", json=big)
        assert standin.branch_modules(ALICE, "default") == {"main": ""}
        assert http.post("/api/user/code", json=big).json()["ok"] == 1


def test_commit_drop_handles_the_upload_then_loses_its_answer(standin: StandIn) -> None:
    standin.inject_fault("POST /api/user/code", "commit-drop")
    with client(standin, FULL_TOKEN) as http:
        with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
            http.post("/api/user/code", json=UPLOAD)
        assert standin.branch_modules(ALICE, "default") == {"main": "new"}  # committed, unlike 'drop'
        assert http.post("/api/user/code", json=UPLOAD).json()["ok"] == 1
    assert standin.count("POST /api/user/code", ALICE) == 2


def test_delay_answers_late_and_handles_the_request(standin: StandIn) -> None:
    standin.inject_fault("POST /api/user/code", "delay", delay=0.3)
    with client(standin, FULL_TOKEN) as http:
        started = time.monotonic()
        answer = http.post("/api/user/code", json=UPLOAD)
        assert time.monotonic() - started >= 0.3
        assert answer.json()["ok"] == 1
        assert window(answer)[:2] == (240, 239)  # a delayed request counts like any other
        standin.inject_fault("GET /api/user/code", "delay", delay=1.0)
        with pytest.raises(httpx.ReadTimeout):
            http.get("/api/user/code", timeout=0.2)


def test_html_error_page(standin: StandIn) -> None:
    standin.inject_fault("GET /api/user/branches", "html")
    with client(standin, FULL_TOKEN) as http:
        answer = http.get("/api/user/branches")
    assert answer.status_code == 502
    assert answer.headers["content-type"] == "text/html; charset=utf-8"
    assert answer.text.startswith("<!DOCTYPE html>")


def test_invalid_json(standin: StandIn) -> None:
    standin.inject_fault("GET /api/user/code", "badjson")
    with client(standin, FULL_TOKEN) as http:
        answer = http.get("/api/user/code")
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "application/json; charset=utf-8"
        with pytest.raises(json.JSONDecodeError):
            json.loads(answer.text)
        # Not counted against the limits: the next answer still has 59 of 60 left after the first real request.
        assert window(http.get("/api/user/code"))[1] == 59


def test_faults_are_per_endpoint_and_used_in_order(standin: StandIn) -> None:
    standin.inject_fault("GET /api/user/code", "500")
    standin.inject_fault("get /api/user/code/", "html")
    standin.inject_fault("*", "badjson")
    with client(standin, FULL_TOKEN) as http:
        assert http.get("/api/user/branches").text.startswith('{"ok":1,"modules"')  # the "*" fault
        assert http.get("/api/user/code").status_code == 500
        assert http.get("/api/user/code").status_code == 502
        assert http.get("/api/user/code").json()["ok"] == 1
        assert http.get("/api/user/branches").json()["ok"] == 1


@pytest.mark.parametrize(
    ("endpoint", "kind", "count", "message"),
    [
        ("/api/user/code", "500", 1, "expected an endpoint"),
        ("POST /api/user/code", "explode", 1, "unknown fault kind"),
        ("POST /api/user/code", "500", 0, "count must be an integer from 1 to 1000"),
        ("POST /api/user/code", "500", 1001, "count must be an integer from 1 to 1000"),
    ],
)
def test_bad_fault_requests_are_refused(endpoint: str, kind: str, count: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Faults().inject(endpoint, kind, count)


def test_bad_control_requests_get_400(standin: StandIn) -> None:
    with client(standin) as http:
        bodies: list[object] = [{"endpoint": "GET /api/user/code", "kind": "delay", "delay": [1]}, {"kind": "500"}, []]
        for body in bodies:
            answer = http.post("/__standin__/fault", json=body)
            assert answer.status_code == 400, body
            assert "error" in answer.json()
        assert http.post("/__standin__/advance", json={"seconds": "soon"}).status_code == 400
        assert http.get("/__standin__/nope").status_code == 404


def test_helpers_take_usernames_in_any_case(standin: StandIn) -> None:
    assert standin.branches("ALICE") == standin.branches(ALICE)
    assert standin.branch_modules("Alice", "default") == {"main": ""}
    assert standin.branch_modules(ALICE, "nope") is None
