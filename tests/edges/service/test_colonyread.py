"""``gitops/edges/service/colonyread.py``: a colony read with read-only requests, from the stand-in on a loopback
port through the session's client; an answer of the wrong shape through a transport that gives one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from gitops.app.options import Options
from gitops.app.session import open_session
from gitops.core.colony import Colony
from gitops.edges.service.colonyread import read_colony
from gitops.errors import ServiceError
from gitops.standin.testing import ALICE, FULL_TOKEN, StandIn

WRITES = ("POST /api/user/code", "POST /api/user/set-active-branch", "POST /api/user/memory")


def _options(tmp_path: Path, url: str, transport: Any = None) -> Options:
    manifest = tmp_path / "gitops.yaml"
    servers = {"local": {"url": url, "token_env": "SCREEPS_TOKEN"}}
    branches = [{"server": "local", "branch": "main", "root": "src"}]
    manifest.write_text(json.dumps({"version": 1, "servers": servers, "branches": branches}), encoding="utf-8")
    return Options(
        manifest=manifest, env={"SCREEPS_TOKEN": FULL_TOKEN}, state_dir=tmp_path / "state", transport=transport
    )


def _read(options: Options) -> Colony:
    with open_session(options) as session:
        return read_colony(session.client("local"))


def test_the_owned_room_its_objects_and_memory_are_read(tmp_path: Path, standin: StandIn) -> None:
    with httpx.Client(base_url=standin.url, headers={"X-Token": FULL_TOKEN}) as http:
        me = http.get("/api/auth/me").json()["_id"]
    controller = {"_id": "c1", "type": "controller", "x": 10, "y": 10, "room": "W1N1", "user": me, "level": 3}
    source = {"_id": "s1", "type": "source", "x": 5, "y": 5, "room": "W1N1", "energy": 3000, "energyCapacity": 3000}
    standin.set_colony({"W1N1": [controller, source], "W5N5": []}, time=4321)
    standin.set_memory(ALICE, {"mark": "grown", "rooms": {"W1N1": {"source": "s1"}}})
    colony = _read(_options(tmp_path, standin.url))
    assert colony.server == "local"
    assert colony.user_id == me
    assert [room.name for room in colony.rooms] == ["W1N1"]
    assert {o["_id"] for o in colony.rooms[0].objects} >= {"c1", "s1"}
    assert json.loads(colony.memory)["mark"] == "grown"
    assert all(standin.count(write, ALICE) == 0 for write in WRITES)  # read-only


def test_an_account_without_an_id_is_refused_as_the_wrong_shape(tmp_path: Path, standin: StandIn) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/auth/me":
            return httpx.Response(200, json={"ok": 1, "username": "alice"})
        return httpx.Response(200, json={"ok": 1})

    with pytest.raises(ServiceError) as refused:
        _read(_options(tmp_path, standin.url, httpx.MockTransport(handler)))
    assert "GET /api/auth/me" in str(refused.value)
    assert "'_id' is missing" in str(refused.value)
