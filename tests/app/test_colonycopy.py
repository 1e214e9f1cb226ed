"""``gitops rehearse --from-server``'s reads against the stand-in: the colony chosen, every request counted, and a
copy that does not fit the token's budget refused (exit 3) before any request is sent."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest
import yaml

from gitops.app.colonycopy import copy_colony
from gitops.app.options import Options
from gitops.app.rehearsal import RehearsalRequest, cpu_of
from gitops.config.manifest import load_manifest
from gitops.core.codeset import CodeSet
from gitops.core.colony import Colony, account_cpu
from gitops.core.local import LocalBranch
from gitops.edges.privateserver import DEFAULT_BUCKET, DEFAULT_CPU
from gitops.standin.testing import ALICE, FULL_TOKEN, StandIn
from tests.project import Project, one_branch_project

TERRAIN = "GET /api/game/room-terrain"
READS = (TERRAIN, "GET /api/game/room-objects", "GET /api/user/memory", "GET /api/user/overview")


@pytest.fixture
def project(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    p = one_branch_project(tmp_path, standin, capsys, monkeypatch)
    me = httpx.get(standin.url + "/api/auth/me", headers={"X-Token": FULL_TOKEN}).json()["_id"]
    standin.set_colony(
        {
            "W1N1": [
                {"_id": "ctl", "type": "controller", "x": 20, "y": 20, "room": "W1N1", "user": me, "level": 3},
                {"_id": "sp", "type": "spawn", "x": 25, "y": 25, "room": "W1N1", "user": me, "name": "Home"},
                {"_id": "src", "type": "source", "x": 5, "y": 5, "room": "W1N1", "energy": 3000},
                {"_id": "foe", "type": "creep", "x": 9, "y": 9, "room": "W1N1", "user": "someone-else"},
            ]
        },
        time=5000,
    )
    standin.set_memory(ALICE, {"rooms": {"W1N1": {"source": "src"}}})
    return p


def counts(standin: StandIn) -> dict[str, int]:
    return {endpoint: standin.count(endpoint, ALICE) for endpoint in READS}


def test_the_copy_reads_the_colony_with_counted_read_only_requests(project: Project, standin: StandIn) -> None:
    options = Options(
        manifest=project.root / "gitops.yaml", env=dict(os.environ), clock=standin.clock, state_dir=project.state_dir
    )
    colony = copy_colony(options, load_manifest(options.manifest), "local")
    assert [r.name for r in colony.rooms] == ["W1N1"]
    assert [o["_id"] for o in colony.rooms[0].objects] == ["ctl", "sp", "src"]  # not another player's creep
    assert json.loads(colony.memory) == {"rooms": {"W1N1": {"source": "src"}}}
    assert colony.cpu == 100  # the account's limit as the server states it (the stand-in's /api/auth/me)
    assert counts(standin) == dict.fromkeys(READS, 1)
    assert standin.count("POST /api/user/code") == 0
    assert standin.count("POST /api/user/memory") == 0
    ledger = next(project.state_dir.rglob("*.json")).read_text("utf-8")
    assert TERRAIN in ledger  # every request is in the ledger, as a plan's
    assert FULL_TOKEN not in ledger


def test_a_copy_that_does_not_fit_the_budget_is_refused_before_any_request(
    project: Project, standin: StandIn, tmp_path: Path
) -> None:
    with httpx.Client(base_url=standin.url, headers={"X-Token": FULL_TOKEN}) as http:  # another tool's reads
        for n in range(357):
            if n and n % 100 == 0:
                standin.clock.advance(60)
            assert http.get("/api/game/room-terrain", params={"room": "W1N1", "encoded": "1"}).status_code == 200
    standin.clock.advance(60)
    nowhere = str(tmp_path / "no-server")
    first = project.gitops("rehearse", "--from-server", "local", "--server-dir", nowhere)
    assert first.code == 14, first.err  # copied (the headers say 358 of 360 are spent), then no world to run
    before = counts(standin)
    assert before[TERRAIN] == 358

    refused = project.gitops("rehearse", "--from-server", "local", "--server-dir", nowhere)
    assert refused.code == 3, refused.err
    assert "Error: the copy of the colony needs more requests than remain; nothing was sent:" in refused.err
    assert "server 'local': the copy needs 3 x GET /api/game/room-terrain but 2 of 360 per hour remain" in refused.err
    assert "Traceback" not in refused.err
    assert FULL_TOKEN not in refused.err + refused.out
    assert counts(standin) == before


def test_an_unknown_server_is_bad_usage(project: Project) -> None:
    result = project.gitops("rehearse", "--from-server", "nope")
    assert result.code == 4
    assert "Error: --from-server nope: the manifest" in result.err
    assert "(it has: local)" in result.err


def test_a_large_account_stays_bounded(project: Project, standin: StandIn) -> None:
    me = httpx.get(standin.url + "/api/auth/me", headers={"X-Token": FULL_TOKEN}).json()["_id"]
    standin.set_colony(
        {
            f"W{n}N1": [{"_id": f"c{n}", "type": "controller", "x": 9, "y": 9, "user": me, "level": n}]
            for n in range(1, 6)
        }
    )
    standin.set_memory(ALICE, {"log": "x" * (2 * 1024 * 1024)})  # over the game's 2 MiB
    options = Options(
        manifest=project.root / "gitops.yaml", env=dict(os.environ), clock=standin.clock, state_dir=project.state_dir
    )
    colony = copy_colony(options, load_manifest(options.manifest), "local")
    assert [r.name for r in colony.rooms] == ["W5N1", "W4N1", "W3N1"]  # the highest levels first
    assert colony.memory == "{}"
    assert "the account owns 5 rooms; the first 3 are copied (W5N1, W4N1, W3N1)" in colony.notes
    assert any("Memory has" in n and "not copied" in n for n in colony.notes)
    assert standin.count(TERRAIN, ALICE) == 3


def test_creeps_of_memory_outside_the_copied_rooms_are_named(project: Project, standin: StandIn) -> None:
    # The grown colony of bench/colony_trial.py had creeps one room over: the copy carried the others, silently.
    standin.set_memory(ALICE, {"creeps": {"scout7": {"role": "scout"}}, "rooms": {"W1N1": {"source": "src"}}})
    options = Options(
        manifest=project.root / "gitops.yaml", env=dict(os.environ), clock=standin.clock, state_dir=project.state_dir
    )
    colony = copy_colony(options, load_manifest(options.manifest), "local")
    assert [r.name for r in colony.rooms] == ["W1N1"]
    assert any(
        n.startswith("Memory.creeps names 1 creep(s) that are not in the copied rooms (scout7)") for n in colony.notes
    )
    assert json.loads(colony.memory)["creeps"] == {"scout7": {"role": "scout"}}  # the Memory is copied whole


@pytest.mark.parametrize(
    ("flag", "in_manifest", "account", "expected"),
    [
        (None, None, 20, 20),  # the account's own limit, read with --from-server
        (None, None, None, DEFAULT_CPU),  # a server that states none
        (None, 50, 20, 50),  # the manifest's cpu: is the player's word
        (30, 50, 20, 30),  # and --cpu is this run's
    ],
)
def test_the_bots_cpu_limit_is_the_flags_the_manifests_the_accounts_or_the_default(
    project: Project, flag: int | None, in_manifest: int | None, account: int | None, expected: int
) -> None:
    if in_manifest is not None:
        manifest = yaml.safe_load((project.root / "gitops.yaml").read_text("utf-8"))
        manifest["servers"]["local"]["cpu"] = {"limit": in_manifest}
        (project.root / "gitops.yaml").write_text(yaml.safe_dump(manifest), "utf-8")
    loaded = load_manifest(project.root / "gitops.yaml")
    colony = Colony(server="local", user_id="me", rooms=(), memory="{}", cpu=account)
    branch = LocalBranch("local", "main", CodeSet.of(()), {})
    limit, bucket = cpu_of(loaded, branch, RehearsalRequest(cpu=flag, colony=colony))
    assert (limit, bucket) == (expected, DEFAULT_BUCKET)


def test_the_accounts_cpu_is_read_only_when_the_server_states_a_limit_the_game_allows() -> None:
    answers: list[object] = [{"cpu": 20}, {"cpu": 500}, {"cpu": 0}, {"cpu": True}, {"cpu": "20"}, {}, []]
    assert [account_cpu(me) for me in answers] == [20, 500, None, None, None, None, None]
