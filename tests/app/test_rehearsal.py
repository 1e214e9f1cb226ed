"""``gitops/app/rehearsal.py``: the rehearse use case's decisions that come before any world (the refusals of code
that cannot run, each bot's CPU, the world's time budget, one retry of a lost world) and its outcome's exit code.
A rehearsal in a world runs on the real private server in ``tests/private/``."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitops.app.rehearsal import (
    Rehearsal,
    RehearsalRequest,
    cpu_of,
    default_timeout,
    once_more_if_lost,
    rehearse,
    source_maps,
)
from gitops.config.manifest import LoadedManifest, load_manifest
from gitops.core.codeset import CodeSet, Module
from gitops.core.colony import Colony
from gitops.core.health import Thresholds, Tick
from gitops.core.local import LocalBranch
from gitops.core.rehearsal import compare, side
from gitops.edges.privateserver import WorldLost
from gitops.errors import ExitCode, SourceError
from tests.factories import LOCAL_URL, make_repo, write_manifest


def _loaded(tmp_path: Path, files: dict[str, str], **server: object) -> LoadedManifest:
    repo = make_repo(tmp_path / "bot", files)
    servers = {"local": {"url": LOCAL_URL, "token_env": "SCREEPS_TOKEN", **server}}
    write_manifest(repo, servers=servers)
    return load_manifest(repo / "gitops.yaml", {})


def test_code_without_main_is_refused_before_any_world_starts(tmp_path: Path) -> None:
    loaded = _loaded(tmp_path, {"src/helper.js": "module.exports = 1;\n"})
    with pytest.raises(SourceError) as refused:
        rehearse(loaded, RehearsalRequest(ticks=5), {"GITOPS_PRIVATE_SERVER": str(tmp_path / "none")})
    assert refused.value.exit_code == ExitCode.LOCAL_CODE
    assert refused.value.message.startswith("local/main: the code from the working tree")
    assert "has no module 'main'" in refused.value.message


def test_code_that_does_not_parse_is_refused_before_any_world_starts(tmp_path: Path) -> None:
    loaded = _loaded(tmp_path, {"src/main.js": "module.exports.loop = ( => {};\n"})
    with pytest.raises(SourceError, match="does not parse"):
        rehearse(loaded, RehearsalRequest(ticks=5), {})


def _branch(*modules: Module) -> LocalBranch:
    return LocalBranch("local", "main", CodeSet.of(list(modules)), {})


def test_each_bots_cpu_the_command_line_then_the_manifest_then_the_account_then_the_default(tmp_path: Path) -> None:
    plain = _loaded(tmp_path / "a", {"src/main.js": "x"})
    configured = _loaded(tmp_path / "b", {"src/main.js": "x"}, cpu={"limit": 30, "bucket": 500})
    branch = _branch(Module("main", text="x"))
    colony = Colony(server="local", user_id="u", rooms=(), memory="{}", cpu=45)
    assert cpu_of(plain, branch, RehearsalRequest()) == (100, 10000)
    assert cpu_of(plain, branch, RehearsalRequest(colony=colony)) == (45, 10000)
    assert cpu_of(configured, branch, RehearsalRequest(colony=colony)) == (30, 500)
    assert cpu_of(configured, branch, RehearsalRequest(cpu=20, bucket=0)) == (20, 0)


def test_the_worlds_time_grows_with_ticks_and_bots() -> None:
    assert default_timeout(100, 1) == 110.0
    assert default_timeout(100, 0) == 110.0
    assert default_timeout(100, 3) == 210.0


def test_a_lost_world_is_started_once_more_and_a_second_loss_is_raised() -> None:
    said: list[str] = []
    runs: list[int] = []

    def lost_once() -> str:
        runs.append(1)
        if len(runs) == 1:
            raise WorldLost("the world's CLI refused the connection")
        return "ran"

    assert once_more_if_lost(lost_once, said.append) == "ran"
    assert said == ["rehearse: the world's CLI refused the connection; starting fresh throwaway world(s), once"]

    def always_lost() -> str:
        raise WorldLost("gone again")

    with pytest.raises(WorldLost):
        once_more_if_lost(always_lost, said.append)


def test_only_the_readable_source_maps_are_used() -> None:
    branch = _branch(
        Module("main", text="x"),
        Module("main.js.map", text='{"version":3,"sources":["a.ts"],"names":[],"mappings":"AAAA"}'),
        Module("broken.js.map", text="not a map"),
    )
    assert list(source_maps(branch)) == ["main.js.map"]


@pytest.mark.parametrize(
    ("ticks", "code"),
    [
        ([Tick(log=("ok",))] * 4, ExitCode.OK),
        ([Tick(errors=("Error: boom\n    at loop (main:1:1)",))] * 4, ExitCode.UNHEALTHY),
        ([Tick(log=("ok",))], ExitCode.REHEARSAL_UNKNOWN),  # too few ticks to judge
    ],
)
def test_a_rehearsals_exit_code_is_its_verdicts(ticks: list[Tick], code: int) -> None:
    head = side("head", ticks, [1.0] * len(ticks), 10, Thresholds(ticks=4), ["main"])
    rehearsal = Rehearsal(4, "working tree", None, (compare("local/main", head, None),), seconds=1.5)
    assert rehearsal.exit_code == code
    document = rehearsal.document()
    assert document["result"] == rehearsal.result
    assert document["base"] is None
    assert document["head"] == head.to_json()
