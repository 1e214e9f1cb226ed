"""Several servers at once (issue 23): planning and applying ask every server at the same time, and the output
keeps the servers' order whatever answers first."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml

from gitops.standin.testing import ALICE, DEMO_ACCOUNTS, StandIn, running_standin
from tests.project import Project

DELAY = 1.0


@pytest.fixture
def three(tmp_path: Path, standin: StandIn) -> Iterator[list[StandIn]]:
    with ExitStack() as stack:
        others = [
            stack.enter_context(running_standin(DEMO_ACCOUNTS, tmp_path / f"s{n}.sqlite3", clock=standin.clock))
            for n in (2, 3)
        ]
        yield [standin, *others]


def _project(
    tmp_path: Path, services: list[StandIn], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    p = Project(tmp_path / "bot", services[0], capsys, monkeypatch)
    p.write({"src/main.js": "module.exports.loop = () => {};\n"})
    data = {
        "version": 1,
        "servers": {f"s{n}": {"url": s.url, "token_env": "SCREEPS_TOKEN"} for n, s in enumerate(services, 1)},
        "branches": [{"server": f"s{n}", "branch": "default", "root": "src"} for n in range(1, len(services) + 1)],
    }
    (p.root / "gitops.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    p.commit()
    return p


def test_three_slow_servers_are_planned_and_applied_in_the_time_of_one(
    tmp_path: Path, three: list[StandIn], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = _project(tmp_path, three, capsys, monkeypatch)
    # Every server answers its branch list and its upload a second late; the third one later still.
    for n, service in enumerate(three):
        service.inject_fault("GET /api/user/branches", "delay", count=2, delay=DELAY + (0.5 if n == 2 else 0))
        service.inject_fault("POST /api/user/code", "delay", count=1, delay=DELAY + (0.5 if n == 2 else 0))
    started = time.monotonic()
    result = p.apply("--yes")
    took = time.monotonic() - started
    assert result.code == 0, result.err
    # One after another: 2 delays per server, 3 servers, over 6 s. At the same time: the slowest server's 3 s.
    assert took < 4 * DELAY + 1.0, took
    lines = [line for line in result.out.splitlines() if line.startswith("done")]
    assert lines == [f"done    s{n}/default: upload (POST /api/user/code)" for n in (1, 2, 3)]
    for service in three:
        assert service.branch_modules(ALICE, "default") == {"main": "module.exports.loop = () => {};\n"}


def test_a_failing_server_does_not_stop_the_others(
    tmp_path: Path, three: list[StandIn], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = _project(tmp_path, three, capsys, monkeypatch)
    three[0].inject_fault("POST /api/user/code", "500", count=2)
    result = p.apply("--yes")
    assert result.code == 1
    assert "apply failed on server 's1'" in result.err
    assert "  FAILED  s1/default: upload (POST /api/user/code)" in result.err
    assert "  done    s2/default: upload (POST /api/user/code)" in result.err
    assert "  done    s3/default: upload (POST /api/user/code)" in result.err
    assert three[0].branch_modules(ALICE, "default") == {"main": ""}
    assert three[2].branch_modules(ALICE, "default") == {"main": "module.exports.loop = () => {};\n"}
    assert p.apply("--yes").code == 0


def test_one_bot_on_three_servers_is_read_once_and_recorded_once(
    tmp_path: Path, three: list[StandIn], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same files for every server: each file is read once, and the record of what was uploaded (the digests of
    every module) is made once and kept in each server's ledger."""
    from gitops.app import applying
    from gitops.core import drift
    from gitops.edges import worktree

    p = _project(tmp_path, three, capsys, monkeypatch)
    reads: list[str] = []
    records: list[str] = []
    real_read, real_record = worktree.read_whole, drift.record_from_wire

    def read(path: str, seen: Callable[[int], None] | None = None) -> bytes:
        reads.append(path)
        return real_read(path, seen)

    def record(branch: str, *args: object, **kwargs: object) -> object:
        records.append(branch)
        return real_record(branch, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(worktree, "read_whole", read)
    monkeypatch.setattr(applying, "record_from_wire", record)
    result = p.apply("--yes")
    assert result.code == 0, result.err
    assert [Path(path).name for path in reads] == ["main.js"]
    assert records == ["default"]
    monkeypatch.setattr(worktree, "read_whole", real_read)
    monkeypatch.setattr(applying, "record_from_wire", real_record)
    # Each server's ledger holds the record: nothing drifted.
    found = p.gitops("drift")
    assert found.code == 0, found.out + found.err
    for n in (1, 2, 3):
        assert f"s{n}/default: no drift: the server holds what this tool applied" in found.out
