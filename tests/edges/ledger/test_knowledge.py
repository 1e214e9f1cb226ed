"""``gitops/edges/ledger/knowledge.py``: what the ledger knows of a server account, kept between runs in a real file
and read back (``ManualClock``: the ledger's own times)."""

from __future__ import annotations

from pathlib import Path

from gitops.core.codeset import CodeSet, Module
from gitops.core.endpoints import GLOBAL_KEY
from gitops.core.remote import BranchInfo, RemoteBranch
from gitops.edges.clock import ManualClock
from gitops.edges.ledger.knowledge import Ledger

URL = "http://127.0.0.1:21025"
START = 1_800_000_000.0


def _open(folder: Path, clock: ManualClock) -> Ledger:
    return Ledger.open(folder, URL, "0123456789abcdef", clock=clock)


def _reopened(ledger: Ledger, folder: Path, clock: ManualClock) -> Ledger:
    ledger.save()
    ledger.close()
    return _open(folder, clock)


def test_a_branch_is_remembered_as_digests_without_text(tmp_path: Path) -> None:
    clock = ManualClock(START)
    ledger = _open(tmp_path, clock)
    code = CodeSet.of([Module("main", text="module.exports.loop = () => {};")])
    ledger.remember_branch(RemoteBranch.from_code("main", code, learnt_at=START, how="download"))
    ledger = _reopened(ledger, tmp_path, clock)
    branch = ledger.remembered_branch("main")
    assert branch is not None
    assert branch.digest == code.digest == ledger.remembered_digest("main")
    assert branch.modules is not None
    assert branch.modules["main"].text is None
    assert "module.exports" not in next(tmp_path.rglob("*.json")).read_text(encoding="utf-8")
    ledger.forget_branch("main")
    assert not ledger.knows_branch("main")
    ledger.close()


def test_headers_of_an_answer_become_the_windows_state(tmp_path: Path) -> None:
    clock = ManualClock(START)
    ledger = _open(tmp_path, clock)
    ledger.record_sent("POST /api/user/code")
    headers = {"X-RateLimit-Limit": "240", "X-RateLimit-Remaining": "17", "X-RateLimit-Reset": str(int(START) + 600)}
    ledger.record_response("POST /api/user/code", 200, headers)
    windows = ledger.windows()
    assert windows["POST /api/user/code"].remaining == 17
    assert windows[GLOBAL_KEY].remaining == 119  # the global window counted the send
    ledger.close()


def test_the_scope_and_a_compression_refusal_are_believed_for_a_while(tmp_path: Path) -> None:
    clock = ManualClock(START)
    ledger = _open(tmp_path, clock)
    assert (ledger.scope(), ledger.compression()) == (None, None)
    ledger.remember_scope(False, ("GET /api/user/code",))
    ledger.record_compression(False)
    ledger = _reopened(ledger, tmp_path, clock)
    assert ledger.scope() == (False, frozenset({"GET /api/user/code"}))
    assert ledger.compression() is False
    clock.advance(Ledger.SCOPE_SECONDS + 1)
    assert ledger.scope() is None
    clock.advance(Ledger.COMPRESSION_REFUSAL_DAYS * 86400)
    assert ledger.compression() is None  # asked again: the server may have been upgraded
    ledger.record_compression(True)
    assert ledger.compression() is True
    ledger.close()


def test_a_clone_and_an_activation_join_the_known_branch_list(tmp_path: Path) -> None:
    clock = ManualClock(START)
    ledger = _open(tmp_path, clock)
    ledger.remember_branch_list([BranchInfo("default", active_world=True)])
    ledger.remember_clone("next")
    ledger.remember_activation("next", "world")
    known = ledger.remembered_branch_list()
    assert known is not None
    branches, learnt = known
    assert learnt == START
    assert [(b.name, b.active_world) for b in branches] == [("default", False), ("next", True)]
    ledger.close()
