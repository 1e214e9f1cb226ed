"""The code endpoint and the branch endpoints, as the real server has them."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gitops.core.codeset import code_length
from gitops.core.endpoints import MAX_BRANCHES, MAX_CODE_LENGTH
from gitops.standin.testing import ALICE, BOB, DEMO_ACCOUNTS, FULL_TOKEN, StandIn, running_standin
from tests.standin.helpers import JSON_TYPE, client


@pytest.fixture
def http(standin: StandIn) -> Iterator[httpx.Client]:
    standin.grant_unlimited(FULL_TOKEN)  # these tests are about behaviour, not limits
    with client(standin, FULL_TOKEN) as c:
        yield c


def test_a_new_user_has_branch_default_active_for_world_and_sim(standin: StandIn, http: httpx.Client) -> None:
    listing = http.get("/api/user/branches")
    assert listing.headers["content-type"] == JSON_TYPE
    body = listing.json()
    assert body["ok"] == 1
    [default] = body["list"]
    assert default["branch"] == "default"
    assert default["activeWorld"] is True
    assert default["activeSim"] is True
    assert len(default["_id"]) == 24
    assert http.get("/api/user/code").json() == {"ok": 1, "branch": "default", "modules": {"main": ""}}
    assert standin.branches(ALICE) == [{"branch": "default", "activeWorld": True, "activeSim": True}]


def test_post_replaces_every_module_and_get_returns_them(standin: StandIn, http: httpx.Client) -> None:
    first = http.post("/api/user/code", json={"branch": "default", "modules": {"main": "a", "util": "b"}})
    assert first.status_code == 200
    assert first.headers["content-type"] == JSON_TYPE
    # The branch's new modification time: now, or 1 ms after its previous change when the clock stood still.
    assert first.json() == {"ok": 1, "timestamp": standin.listed_branches(ALICE)[0]["timestamp"]}
    assert first.json()["timestamp"] in (int(standin.clock.now() * 1000), int(standin.clock.now() * 1000) + 1)
    second = http.post("/api/user/code", json={"branch": "default", "modules": {"main": "c", "role.miner": "d"}})
    assert second.json()["ok"] == 1
    got = http.get("/api/user/code", params={"branch": "default"})
    assert got.headers["content-type"] == JSON_TYPE
    assert got.json() == {"ok": 1, "branch": "default", "modules": {"main": "c", "role.miner": "d"}}
    assert standin.branch_modules(ALICE, "default") == {"main": "c", "role.miner": "d"}
    assert standin.branch_modules(BOB, "default") == {"main": ""}  # another user's code is untouched


def test_branch_defaults_to_active_world_and_dollar_names_pick_active_branches(http: httpx.Client) -> None:
    assert http.post("/api/user/clone-branch", json={"branch": "", "newName": "sim"}).json()["ok"] == 1
    http.post("/api/user/set-active-branch", json={"branch": "sim", "activeName": "activeSim"})
    assert http.post("/api/user/code", json={"modules": {"main": "world"}}).json()["ok"] == 1
    assert http.post("/api/user/code", json={"branch": "$activeSim", "modules": {"main": "sim"}}).json()["ok"] == 1
    assert http.get("/api/user/code").json()["modules"] == {"main": "world"}
    assert http.get("/api/user/code", params={"branch": "$activeWorld"}).json()["branch"] == "default"
    assert http.get("/api/user/code", params={"branch": "$activeSim"}).json() == {
        "ok": 1,
        "branch": "sim",
        "modules": {"main": "sim"},
    }


def test_unknown_branches(http: httpx.Client) -> None:
    assert http.get("/api/user/code", params={"branch": "nope"}).json() == {"error": "no code"}
    assert http.get("/api/user/code", params={"branch": "$nope"}).json() == {"error": "no code"}
    posted = http.post("/api/user/code", json={"branch": "nope", "modules": {"main": ""}})
    assert posted.status_code == 200
    assert posted.json() == {"error": "branch does not exist"}
    # A POST never creates a branch.
    assert [b["branch"] for b in http.get("/api/user/branches").json()["list"]] == ["default"]


def test_binary_modules_round_trip(standin: StandIn, http: httpx.Client) -> None:
    wasm = base64.b64encode(b"\0asm\1\0\0\0").decode()
    unpadded = base64.b64encode(b"ab").decode().rstrip("=")  # cargo-screeps sends base64 without padding
    modules = {"main": "require('fast')", "fast": {"binary": wasm}, "tiny.wasm": {"binary": unpadded}}
    assert http.post("/api/user/code", json={"branch": "default", "modules": modules}).json()["ok"] == 1
    assert http.get("/api/user/code").json()["modules"] == modules
    assert standin.branch_modules(ALICE, "default") == modules


def test_module_name_rules_of_the_private_server(http: httpx.Client) -> None:
    modules = {
        "lib": "1",
        "role.harvester": "2",
        "role/builder": "3",
        "a\\b": "4",
        "$hidden": "x",
        ".dot": "x",
        "/abs": "x",
        "\\back": "x",
        "": "x",
    }
    assert http.post("/api/user/code", json={"branch": "default", "modules": modules}).json()["ok"] == 1
    # Names starting with $ . / \ are dropped silently (the empty name is kept, as the private server keeps it);
    # main is added when missing.
    assert http.get("/api/user/code").json()["modules"] == {
        "lib": "1",
        "role.harvester": "2",
        "role/builder": "3",
        "a\\b": "4",
        "": "x",
        "main": "",
    }


def test_text_keeps_every_character(http: httpx.Client) -> None:
    text = '// ünïcødé ✓ 🐛 \u2028 "quotes" \\ \n\t\x00 \ud800'
    raw = json.dumps({"branch": "default", "modules": {"main": text}})  # ASCII escapes, lone surrogate included
    sent = http.post("/api/user/code", content=raw, headers={"Content-Type": "application/json; charset=utf-8"})
    assert sent.json()["ok"] == 1
    assert json.loads(http.get("/api/user/code").content)["modules"]["main"] == text


def test_five_megabyte_rule(http: httpx.Client) -> None:
    overhead = code_length({"main": ""})
    exactly = {"main": "x" * (MAX_CODE_LENGTH - overhead)}
    assert code_length(exactly) == MAX_CODE_LENGTH
    assert http.post("/api/user/code", json={"branch": "default", "modules": exactly}).json()["ok"] == 1
    over = {"main": "x" * (MAX_CODE_LENGTH - overhead + 1)}
    answer = http.post("/api/user/code", json={"branch": "default", "modules": over})
    assert answer.status_code == 200
    assert answer.json() == {"error": "code length exceeds 5 MB limit"}
    # Characters outside the BMP count twice, as JavaScript's String.length does: one more character than fits
    # when counted by Python's len(). Sent as UTF-8, so that the body stays under the 8 MiB body limit.
    astral = {"main": "x" * (MAX_CODE_LENGTH - overhead - 1) + "🐛"}
    assert len(astral["main"]) == MAX_CODE_LENGTH - overhead
    body = json.dumps({"branch": "default", "modules": astral}, ensure_ascii=False).encode("utf-8")
    answer = http.post("/api/user/code", content=body, headers={"Content-Type": "application/json; charset=utf-8"})
    assert answer.json() == {"error": "code length exceeds 5 MB limit"}
    assert len(http.get("/api/user/code").json()["modules"]["main"]) == MAX_CODE_LENGTH - overhead


def test_chunked_request_body_is_accepted(http: httpx.Client) -> None:
    body = json.dumps({"branch": "default", "modules": {"main": "chunked" * 1000}}).encode()

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(body), 1000):
            yield body[i : i + 1000]

    request = http.build_request(
        "POST", "/api/user/code", content=chunks(), headers={"Content-Type": "application/json; charset=utf-8"}
    )
    assert request.headers["transfer-encoding"] == "chunked"
    assert http.send(request).json()["ok"] == 1
    assert http.get("/api/user/code").json()["modules"]["main"] == "chunked" * 1000


def test_clone_branch_from_a_branch_from_default_modules_and_from_nothing(http: httpx.Client) -> None:
    http.post("/api/user/code", json={"branch": "default", "modules": {"main": "m", "lib": "l"}})
    answer = http.post("/api/user/clone-branch", json={"branch": "default", "newName": "copy"})
    assert answer.json()["ok"] == 1
    assert "timestamp" in answer.json()
    assert http.get("/api/user/code", params={"branch": "copy"}).json()["modules"] == {"main": "m", "lib": "l"}
    http.post("/api/user/clone-branch", json={"branch": "", "newName": "fresh", "defaultModules": {"x": "1"}})
    assert http.get("/api/user/code", params={"branch": "fresh"}).json()["modules"] == {"x": "1", "main": ""}
    http.post("/api/user/clone-branch", json={"newName": "empty"})
    assert http.get("/api/user/code", params={"branch": "empty"}).json()["modules"] == {"main": ""}
    # Like the real server, an unknown source falls back to the default modules.
    http.post("/api/user/clone-branch", json={"branch": "ghost", "newName": "from-ghost"})
    assert http.get("/api/user/code", params={"branch": "from-ghost"}).json()["modules"] == {"main": ""}
    listing = {b["branch"]: b for b in http.get("/api/user/branches").json()["list"]}
    assert sorted(listing) == ["copy", "default", "empty", "fresh", "from-ghost"]
    assert not listing["copy"]["activeWorld"]
    assert not listing["copy"]["activeSim"]


def test_clone_branch_errors(http: httpx.Client) -> None:
    post = http.post
    assert post("/api/user/clone-branch", json={"branch": "x" * 31, "newName": "a"}).json() == {
        "error": "invalid branch name"
    }
    assert post("/api/user/clone-branch", json={"branch": 5, "newName": "a"}).json() == {"error": "invalid branch name"}
    assert post("/api/user/clone-branch", json={"newName": "y" * 31}).json() == {"error": "invalid branch name"}
    assert post("/api/user/clone-branch", json={"newName": "$activeWorld"}).json() == {"error": "invalid branch name"}
    assert "newName" in post("/api/user/clone-branch", json={"branch": "default"}).json()["error"]
    bad_defaults = post("/api/user/clone-branch", json={"newName": "a", "defaultModules": {"main": 1}}).json()
    assert bad_defaults["error"].startswith("invalid module: module 'main'")


def test_at_most_thirty_branches(http: httpx.Client) -> None:
    for i in range(MAX_BRANCHES - 1):
        assert http.post("/api/user/clone-branch", json={"newName": f"b{i}"}).json()["ok"] == 1
    assert len(http.get("/api/user/branches").json()["list"]) == MAX_BRANCHES
    assert http.post("/api/user/clone-branch", json={"newName": "one-more"}).json() == {"error": "too many branches"}
    # Cloning onto an existing name overwrites it, so it is allowed even at the limit.
    assert http.post("/api/user/clone-branch", json={"branch": "default", "newName": "b0"}).json()["ok"] == 1
    http.post("/api/user/delete-branch", json={"branch": "b1"})
    assert http.post("/api/user/clone-branch", json={"newName": "one-more"}).json()["ok"] == 1


def test_set_active_branch(standin: StandIn, http: httpx.Client) -> None:
    http.post("/api/user/clone-branch", json={"branch": "default", "newName": "next"})
    assert http.post("/api/user/set-active-branch", json={"branch": "next", "activeName": "activeWorld"}).json() == {
        "ok": 1
    }
    assert standin.branches(ALICE) == [
        {"branch": "default", "activeWorld": False, "activeSim": True},
        {"branch": "next", "activeWorld": True, "activeSim": False},
    ]
    bad_name = http.post("/api/user/set-active-branch", json={"branch": "next", "activeName": "world"})
    assert bad_name.json() == {"error": "invalid params"}
    unknown = http.post("/api/user/set-active-branch", json={"branch": "ghost", "activeName": "activeSim"})
    assert unknown.json() == {"error": "no branch"}
    assert standin.branches(ALICE)[0]["activeSim"] is True


def test_delete_branch_refuses_active_branches_as_the_real_server(standin: StandIn, http: httpx.Client) -> None:
    http.post("/api/user/clone-branch", json={"newName": "old"})
    assert http.post("/api/user/delete-branch", json={"branch": "old"}).json()["ok"] == 1
    # An active branch stays; the answer is the same, as the real server gives it.
    assert http.post("/api/user/delete-branch", json={"branch": "default"}).json()["ok"] == 1
    assert http.post("/api/user/delete-branch", json={"branch": "ghost"}).json()["ok"] == 1
    assert [b["branch"] for b in standin.branches(ALICE)] == ["default"]
    assert http.post("/api/user/delete-branch", json={"branch": 7}).json()["error"].startswith("invalid params")


def test_concurrent_uploads_never_leave_a_branch_half_written(standin: StandIn) -> None:
    writers, rounds, width = 4, 15, 100
    seen: list[dict[str, object]] = []
    failures: list[str] = []

    def write(n: int) -> None:
        with client(standin, FULL_TOKEN) as c:
            for r in range(rounds):
                tag = f"w{n}r{r}"
                modules = {f"m{i}": f"{tag}:{i}:" + "x" * 200 for i in range(width)} | {"main": tag}
                answer = c.post("/api/user/code", json={"branch": "default", "modules": modules})
                if answer.json().get("ok") != 1:
                    failures.append(answer.text)

    def read() -> None:
        with client(standin, FULL_TOKEN) as c:
            for _ in range(rounds * 2):
                seen.append(c.get("/api/user/code").json()["modules"])

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    threads += [threading.Thread(target=read) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    seen.append(standin.branch_modules(ALICE, "default") or {})
    for modules in seen:
        tag = str(modules["main"])
        if tag == "":
            continue  # read before the first upload
        assert len(modules) == width + 1
        assert all(str(v).startswith(f"{tag}:") for k, v in modules.items() if k != "main"), tag


def test_acknowledged_changes_survive_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "standin.sqlite3"
    with running_standin(DEMO_ACCOUNTS, data) as standin, client(standin, FULL_TOKEN) as c:
        c.post("/api/user/code", json={"branch": "default", "modules": {"main": "kept", "lib": "too"}})
        c.post("/api/user/clone-branch", json={"branch": "default", "newName": "second"})
        c.post("/api/user/set-active-branch", json={"branch": "second", "activeName": "activeSim"})
        c.post("/api/user/memory", json={"path": "a", "value": {"b": [1, 2]}})
        c.post("/api/user/memory-segment", json={"segment": 7, "data": "seven"})
    with running_standin(DEMO_ACCOUNTS, data) as standin, client(standin, FULL_TOKEN) as c:
        assert standin.branch_modules(ALICE, "default") == {"main": "kept", "lib": "too"}
        assert standin.branches(ALICE) == [
            {"branch": "default", "activeWorld": True, "activeSim": False},
            {"branch": "second", "activeWorld": False, "activeSim": True},
        ]
        assert c.get("/api/user/code", params={"branch": "$activeSim"}).json()["modules"]["main"] == "kept"
        assert c.get("/api/user/memory-segment", params={"segment": "7"}).json() == {"ok": 1, "data": "seven"}
        memory = c.get("/api/user/memory", params={"path": "a.b"}).json()["data"]
        assert memory.startswith("gz:")
