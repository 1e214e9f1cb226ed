"""Issue 45: the ledger is sealed with a key only a run holding the server's credential has (edges/ledger/seal.py).

The Actions cache carries the ledger and the code kept for rollback between jobs, and any job of the default branch
can write it. These tests forge what such a job could write (the ledger's JSON edited, its unkeyed check made again;
kept code swapped; a whole history entry pointing at code of the forger's) and show that the run with the credential
still uploads what changed, and never restores code it did not itself keep. The real CLI against the real stand-in.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from gitops.core.codeset import CodeSet
from gitops.core.endpoints import UPLOAD
from gitops.core.remote import RemoteBranch
from gitops.edges.clock import ManualClock
from gitops.edges.codestore import folder_for, keep, kept
from gitops.edges.ledger import Ledger, SealKey
from gitops.edges.ledger.format import module_entries, signed
from gitops.edges.ledger.seal import SEAL_HEAD
from gitops.standin.testing import ALICE, FULL_TOKEN, StandIn
from tests.project import Project

V1 = "module.exports.loop = () => { console.log('v1'); };\n"
V2 = "module.exports.loop = () => { console.log('v2'); };\n"
EVIL = "module.exports.loop = () => { Game.cpu.halt(); };\n"
URL = "https://screeps.example.test"


@pytest.fixture
def project(tmp_path: Path, standin: StandIn, capsys: Any, monkeypatch: Any) -> Project:
    """v1 deployed with the token: a sealed ledger and the code kept for it."""
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": V1})
    p.manifest([{"branch": "main", "root": "src"}])
    p.commit("v1")
    first = p.apply("--yes")
    assert first.code == 0, first.err
    return p


def _ledger_file(p: Project) -> Path:
    [path] = (p.state_dir / "ledger").glob("*/*.json")
    return path


def forge(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """What a job without the token can write: the JSON edited, the unkeyed check made again, the seal dropped
    (it cannot make one)."""
    data = json.loads(path.read_bytes())
    del data["check"]
    data.pop("seal", None)
    edit(data)
    path.write_bytes(signed(orjson.dumps(data)))


def _forge(p: Project, edit: Callable[[dict[str, Any]], None]) -> None:
    forge(_ledger_file(p), edit)


def claims_uploaded(code: CodeSet, now: float) -> Callable[[dict[str, Any]], None]:
    """An edit: "this tool uploaded ``code`` to main a moment ago" (no stamp to compare). Believed, the upload's own
    record is taken without a download (its trust window), and the plan says "No changes"."""

    def edit(data: dict[str, Any]) -> None:
        facts = RemoteBranch.from_code("main", code, now).modules
        assert facts is not None
        modules = {n: dataclasses.asdict(m) for n, m in module_entries(facts).items()}
        data["branches"]["main"].update(digest=code.digest, how="own-upload", learnt_at=now, stamp=None)
        data["branches"]["main"]["modules"] = modules
        data["applied"]["main"].update(digest=code.digest, modules=modules)

    return edit


def _code(modules: dict[str, str]) -> CodeSet:
    return CodeSet.from_wire(modules)


def test_the_ledger_is_sealed_and_holds_neither_the_token_nor_the_key(project: Project) -> None:
    raw = _ledger_file(project).read_bytes()
    assert SEAL_HEAD in raw
    assert FULL_TOKEN.encode() not in raw
    assert FULL_TOKEN[:8].encode() not in raw
    again = project.plan("--refresh=never")
    assert again.code == 0, again.err  # believed: the run holds the token that sealed it
    assert "not sealed" not in again.err


def test_a_forged_record_of_the_server_never_makes_the_deploy_skip_its_upload(
    project: Project, standin: StandIn
) -> None:
    project.write({"src/main.js": V2})
    project.commit("v2")
    _forge(project, claims_uploaded(_code({"main": V2}), float(standin.clock.now())))
    standin.list_without_modules()  # as the official server's list: names, flags and stamps
    uploads = standin.count(UPLOAD)
    applied = project.apply("--yes")
    assert applied.code == 0, applied.err
    assert standin.branch_modules(ALICE, "main") == {"main": V2}
    assert standin.count(UPLOAD) == uploads + 1, applied.out
    assert "No changes" not in applied.out, applied.out
    assert "is not sealed" in applied.out + applied.err
    assert SEAL_HEAD in _ledger_file(project).read_bytes(), "written sealed again"


def test_a_forged_history_entry_never_restores_the_forgers_code(project: Project, standin: StandIn) -> None:
    project.write({"src/main.js": V2})
    project.commit("v2")
    assert project.apply("--yes").code == 0
    evil = _code({"main": EVIL})
    folder = folder_for(_ledger_file(project))
    # The forger keeps its code under its own digest (consistent, so the kept file itself checks out) and points
    # deploy #1 of the history at it.
    (folder / f"{evil.digest.replace(':', '-')}.modules").write_bytes(
        orjson.dumps({"digest": evil.digest, "modules": {"main": EVIL}})
    )

    def points_at_evil(data: dict[str, Any]) -> None:
        data["history"][0]["digest"] = evil.digest

    _forge(project, points_at_evil)
    _rollback_to_1_is_refused(project, standin, "there is no deploy 1 in the history")


def test_kept_code_swapped_under_its_digest_is_never_restored(project: Project, standin: StandIn) -> None:
    project.write({"src/main.js": V2})
    project.commit("v2")
    assert project.apply("--yes").code == 0
    v1 = _code({"main": V1})
    kept = folder_for(_ledger_file(project)) / f"{v1.digest.replace(':', '-')}.modules"
    assert kept.is_file()
    kept.write_bytes(orjson.dumps({"digest": v1.digest, "modules": {"main": EVIL}}))
    _rollback_to_1_is_refused(project, standin, "its code is not kept")


def _rollback_to_1_is_refused(project: Project, standin: StandIn, why: str) -> None:
    uploads = standin.count(UPLOAD)
    back = project.gitops("rollback", "--to", "1", "--yes")
    assert back.code == 4, back.out + back.err
    assert why in back.err
    assert standin.count(UPLOAD) == uploads
    assert standin.branch_modules(ALICE, "main") == {"main": V2}


# --- the store ---------------------------------------------------------------------------------------------------


def _open(tmp_path: Path, key: SealKey | None, clock: ManualClock) -> Ledger:
    return Ledger.open(tmp_path, URL, "0123456789abcdef", clock=clock, seal=key)


def test_another_credentials_key_or_none_at_all(tmp_path: Path) -> None:
    clock = ManualClock(1_800_000_000.0)
    key = SealKey(["token-one"], URL)
    ledger = _open(tmp_path, key, clock)
    ledger.remember_branch(RemoteBranch.from_code("main", _code({"main": V1}), clock.now(), "own-upload"))
    ledger.save()
    path = ledger.path
    sealed = path.read_bytes()

    believed = _open(tmp_path, SealKey(["token-one"], URL), clock)
    assert believed.remembered_digest("main") == _code({"main": V1}).digest
    assert believed.warnings == []

    # Without credentials (a pull request's plan): read as before, and never written over (it cannot seal).
    reader = _open(tmp_path, None, clock)
    assert reader.remembered_digest("main") == _code({"main": V1}).digest
    reader.remember_branch(RemoteBranch.from_code("main", _code({"main": EVIL}), clock.now(), "own-upload"))
    reader.save()
    assert path.read_bytes() == sealed

    for other in (SealKey(["token-two"], URL), SealKey(["token-one"], URL + "/ptr")):
        stranger = _open(tmp_path, other, clock)
        assert stranger.remembered_digest("main") is None
        [warning] = stranger.warnings
        assert "is not sealed" in warning
        assert "set aside as" in warning
        assert path.with_name(path.name + ".corrupt-20270115T080000Z").read_bytes() == sealed
        path.write_bytes(sealed)


def test_the_key_never_prints_or_pickles() -> None:
    key = SealKey([FULL_TOKEN], URL)
    assert repr(key) == "SealKey(***)"
    assert FULL_TOKEN not in str(key)
    with pytest.raises(TypeError):
        pickle.dumps(key)


def test_kept_code_that_does_not_match_is_written_anew_and_a_fifo_is_never_read(tmp_path: Path) -> None:
    v1 = _code({"main": V1})
    folder = tmp_path / "x.code"
    folder.mkdir()
    planted = folder / f"{v1.digest.replace(':', '-')}.modules"
    planted.write_bytes(orjson.dumps({"digest": v1.digest, "modules": {"main": EVIL}}))
    assert kept(folder, v1.digest) is None
    assert keep(folder, v1.digest, {"main": V1})
    assert kept(folder, v1.digest) == {"main": V1}
    planted.unlink()
    os.mkfifo(planted)  # actions/cache restores a tar: a FIFO can come with it
    assert kept(folder, v1.digest) is None  # at once: never waits for a writer
