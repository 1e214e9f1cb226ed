"""The local ledger: window arithmetic, branches without text, corrupt files set aside, atomic writes under kill -9."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from gitops.core.codeset import CodeSet, Module
from gitops.core.deploys import Deploy, VerifyRecord
from gitops.core.endpoints import GLOBAL_KEY, window_key
from gitops.core.remote import BranchInfo, RemoteBranch
from gitops.edges.clock import ManualClock
from gitops.edges.ledger import Ledger, default_state_dir, lock_wait

URL = "https://screeps.com/ptr"
FP = "0123456789abcdef"
START = 1_800_000_000.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


def open_ledger(tmp_path: Path, clock: ManualClock, fingerprint: str | None = FP) -> Ledger:
    return Ledger.open(tmp_path, URL, fingerprint, clock=clock)


def headers(limit: int, remaining: int, reset: float) -> dict[str, str]:
    return {"X-RateLimit-Limit": str(limit), "X-RateLimit-Remaining": str(remaining), "X-RateLimit-Reset": str(reset)}


# --- windows -----------------------------------------------------------------------------------------------


def test_empty_ledger_has_every_window_full(tmp_path: Path, clock: ManualClock) -> None:
    windows = open_ledger(tmp_path, clock).windows()
    assert windows[GLOBAL_KEY].remaining == 120
    assert windows["GET /api/user/code"].remaining == 60
    assert windows["POST /api/user/code"].remaining == 240
    assert all(w.source == "counted" and w.reset > START for w in windows.values())


def test_counted_windows(tmp_path: Path, clock: ManualClock) -> None:
    ledger = open_ledger(tmp_path, clock)
    for _ in range(3):
        ledger.record_sent("GET /api/user/code")
        clock.advance(10)
    ledger.record_sent("GET /api/user/branches")
    windows = ledger.windows()
    code = windows["GET /api/user/code"]
    assert (code.limit, code.remaining, code.reset, code.source) == (60, 57, START + 3600, "counted")
    assert windows[GLOBAL_KEY].remaining == 116
    clock.advance(41)  # two requests are now over a minute old: out of the global window, inside the hour
    windows = ledger.windows()
    assert windows[GLOBAL_KEY].remaining == 120 - 2
    assert windows["GET /api/user/code"].remaining == 57
    assert len(ledger.sent_times("GET /api/user/code", 60)) == 1
    assert len(ledger.sent_times(GLOBAL_KEY, 60)) == 2


def test_header_window_less_the_requests_sent_since(tmp_path: Path, clock: ManualClock) -> None:
    ledger = open_ledger(tmp_path, clock)
    ledger.record_sent("GET /api/user/code")
    ledger.record_response("GET /api/user/code", 200, headers(60, 40, START + 900))
    ledger.record_sent("GET /api/user/code")
    ledger.record_sent("GET /api/user/code")
    window = ledger.windows()["GET /api/user/code"]
    assert (window.remaining, window.reset, window.learnt_at, window.source) == (38, START + 900, START, "headers")
    # The endpoint's headers say nothing of the global window, which is counted.
    assert ledger.windows()[GLOBAL_KEY].source == "counted"


def test_headers_of_the_global_window(tmp_path: Path, clock: ManualClock) -> None:
    ledger = open_ledger(tmp_path, clock)
    ledger.record_sent("GET /api/user/branches")
    ledger.record_response(
        "GET /api/user/branches", 200, {k.lower(): v for k, v in headers(120, 7, START + 30).items()}
    )
    ledger.record_sent("GET /api/user/code")
    assert ledger.windows()[GLOBAL_KEY].remaining == 6
    assert window_key("GET /api/user/code", 120) == GLOBAL_KEY
    assert window_key("GET /api/user/code", 60) == "GET /api/user/code"
    assert window_key("GET /api/user/code", 75) == "GET /api/user/code"
    assert window_key("GET /api/user/branches", 75) == GLOBAL_KEY


def test_window_past_its_reset_is_full_again(tmp_path: Path, clock: ManualClock) -> None:
    ledger = open_ledger(tmp_path, clock)
    for _ in range(5):
        ledger.record_sent("POST /api/user/code")
    ledger.record_response("POST /api/user/code", 200, headers(240, 0, START + 100))
    clock.advance(101)
    ledger.record_sent("POST /api/user/code")
    window = ledger.windows()["POST /api/user/code"]
    # The five requests belong to the window that reset; only the one after counts.
    assert (window.remaining, window.source) == (239, "counted")


def test_reset_in_milliseconds_or_relative(tmp_path: Path, clock: ManualClock) -> None:
    ledger = open_ledger(tmp_path, clock)
    ledger.record_response("GET /api/user/code", 200, headers(60, 5, (START + 60) * 1000))
    assert ledger.windows()["GET /api/user/code"].reset == START + 60
    ledger.record_response("GET /api/user/code", 200, headers(60, 5, 30))
    assert ledger.windows()["GET /api/user/code"].reset == START + 30


@pytest.mark.parametrize(
    "partial",
    [
        {},
        {"X-RateLimit-Limit": "60"},
        {"X-RateLimit-Limit": "x", "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "9"},
    ],
)
def test_missing_or_bad_headers_are_ignored(tmp_path: Path, clock: ManualClock, partial: dict[str, str]) -> None:
    ledger = open_ledger(tmp_path, clock)
    ledger.record_response("GET /api/user/code", 200, partial)
    assert ledger.windows()["GET /api/user/code"].source == "counted"


@pytest.mark.parametrize(
    "odd",
    [
        {"X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "1e400", "X-RateLimit-Reset": "30"},
        {"X-RateLimit-Limit": "inf", "X-RateLimit-Remaining": "5", "X-RateLimit-Reset": "30"},
        {"X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "nan", "X-RateLimit-Reset": "30"},
        {"X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "5", "X-RateLimit-Reset": "-inf"},
        {"X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "9" * 5000, "X-RateLimit-Reset": "30"},
        {"X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "5", "X-RateLimit-Reset": "1e300"},
    ],
)
def test_numbers_that_are_not_finite_or_absurd_are_ignored(
    tmp_path: Path, clock: ManualClock, odd: dict[str, str]
) -> None:
    ledger = open_ledger(tmp_path, clock)
    ledger.record_response("GET /api/user/code", 200, odd)
    window = ledger.windows()["GET /api/user/code"]
    assert (window.source, window.remaining) == ("counted", 60)
    ledger.save()


def test_a_reset_beyond_a_day_is_capped_at_a_day(tmp_path: Path, clock: ManualClock) -> None:
    ledger = open_ledger(tmp_path, clock)
    ledger.record_response("GET /api/user/code", 200, headers(60, 5, START + 10 * 365 * 86400))
    window = ledger.windows()["GET /api/user/code"]
    assert (window.source, window.remaining, window.reset) == ("headers", 5, START + 86400)


def test_requests_are_pruned_when_no_window_needs_them(tmp_path: Path, clock: ManualClock) -> None:
    ledger = open_ledger(tmp_path, clock)
    ledger.record_sent("GET /api/user/branches")
    ledger.record_sent("GET /api/user/code")
    ledger.record_sent("POST /api/user/code")
    clock.advance(61)
    ledger.save()
    sent = json.loads(ledger.path.read_text())["sent"]
    assert sorted(sent) == ["GET /api/user/code", "POST /api/user/code"]
    clock.advance(3600)
    ledger.save()
    assert sorted(json.loads(ledger.path.read_text())["sent"]) == ["POST /api/user/code"]
    clock.advance(86400)
    ledger.save()
    assert json.loads(ledger.path.read_text())["sent"] == {}


# --- branches ----------------------------------------------------------------------------------------------


def test_a_step_save_is_atomic_and_the_last_is_made_durable(tmp_path: Path, clock: ManualClock) -> None:
    ledger = open_ledger(tmp_path, clock)
    assert not ledger.changed
    ledger.record_sent("GET /api/user/code")
    assert ledger.changed
    ledger.save(durable=False)  # a step of a run: readers see the whole new file at once
    assert not ledger.changed
    assert open_ledger(tmp_path, clock).sent_times("GET /api/user/code", 60) == [START]
    ledger.sync()  # the end of the run
    ledger.sync()  # nothing left to do
    ledger.record_sent("GET /api/user/code")
    ledger.save()
    assert open_ledger(tmp_path, clock).sent_times("GET /api/user/code", 60) == [START, START]
    assert sorted(p.name for p in ledger.path.parent.iterdir()) == sorted(["last-fingerprint", ledger.path.name])


def test_branches_are_remembered_without_text(tmp_path: Path, clock: ManualClock) -> None:
    ledger = open_ledger(tmp_path, clock)
    code = CodeSet.of([Module("main", text="module.exports.loop = () => 'TEXT-MARKER'"), Module("w", binary=b"\0asm")])
    ledger.remember_branch(RemoteBranch.from_code("default", code, START - 5, "own-upload"))
    ledger.remember_branch(RemoteBranch.missing("gone", START))
    ledger.remember_branch_list([BranchInfo("default", True, False), BranchInfo("sim", False, True)])
    ledger.set_unlimited_until(START + 7200)
    ledger.save()
    assert "TEXT-MARKER" not in ledger.path.read_text()

    again = open_ledger(tmp_path, clock)
    assert again.warnings == []
    branch = again.remembered_branch("default")
    assert branch is not None
    assert (branch.how, branch.learnt_at, branch.digest) == ("own-upload", START - 5, code.digest)
    assert branch.modules is not None
    assert {n: (m.digest, m.size, m.is_binary, m.text) for n, m in branch.modules.items()} == {
        m.name: (m.digest, m.size, m.is_binary, None) for m in code
    }
    gone = again.remembered_branch("gone")
    assert gone is not None
    assert not gone.exists
    assert again.remembered_branch("never") is None
    assert again.remembered_branch_list() == (
        [BranchInfo("default", True, False), BranchInfo("sim", False, True)],
        START,
    )
    assert again.unlimited_until == START + 7200


def test_a_remembered_branch_follows_its_record(tmp_path: Path, clock: ManualClock) -> None:
    """remembered_branch builds a record's module facts once (a plan asks for a branch several times), and never
    answers with the facts of a record it replaced: a new state, a missing branch, a stamp, a forgotten branch."""
    ledger = open_ledger(tmp_path, clock)
    assert not ledger.knows_branch("default")
    first = CodeSet.of([Module("main", text="one")])
    ledger.remember_branch(RemoteBranch.from_code("default", first, START, "download"))
    asked = ledger.remembered_branch("default")
    again = ledger.remembered_branch("default")
    assert asked is not None
    assert again is not None
    assert ledger.knows_branch("default")
    assert again.modules is asked.modules  # built once
    second = CodeSet.of([Module("main", text="two"), Module("util", text="three")])
    ledger.remember_branch(RemoteBranch.from_code("default", second, START + 1, "own-upload"))
    now = ledger.remembered_branch("default")
    assert now is not None
    assert now.modules is not None
    assert {n: m.digest for n, m in now.modules.items()} == {m.name: m.digest for m in second}
    assert (now.digest, now.how) == (second.digest, "own-upload")
    ledger.stamp_branch("default", "1700000000000")
    stamped = ledger.remembered_branch("default")
    assert stamped is not None
    assert stamped.stamp == "1700000000000"
    assert stamped.modules == now.modules
    ledger.remember_branch(RemoteBranch.missing("default", START + 2))
    missing = ledger.remembered_branch("default")
    assert missing is not None
    assert not missing.exists
    assert ledger.knows_branch("default")
    ledger.forget_branch("default")
    assert ledger.remembered_branch("default") is None
    assert not ledger.knows_branch("default")


def test_no_fingerprint_opens_the_last_one_used(tmp_path: Path, clock: ManualClock) -> None:
    assert open_ledger(tmp_path, clock, None).remembered_branch_list() is None
    first = open_ledger(tmp_path, clock, "aaaaaaaaaaaaaaaa")
    first.remember_branch_list([BranchInfo("a")])
    first.save()
    second = open_ledger(tmp_path, clock, "bbbbbbbbbbbbbbbb")
    second.remember_branch_list([BranchInfo("b")])
    second.save()
    anonymous = open_ledger(tmp_path, clock, None)
    assert anonymous.path == second.path
    listing = anonymous.remembered_branch_list()
    assert listing is not None
    assert listing[0] == [BranchInfo("b")]
    # Another server's ledger is separate.
    assert Ledger.open(tmp_path, "https://screeps.com", None, clock=clock).remembered_branch_list() is None


def test_layout_keys_server_and_fingerprint(tmp_path: Path, clock: ManualClock) -> None:
    ledger = open_ledger(tmp_path, clock)
    ledger.save()
    relative = ledger.path.relative_to(tmp_path)
    assert relative.parts[0] == "ledger"
    assert relative.parts[1].startswith("screeps.com_ptr-")
    assert relative.parts[2] == f"{FP}.json"
    assert Ledger.open(tmp_path, "HTTPS://Screeps.com/ptr/", FP, clock=clock).path == ledger.path


# --- corrupt files -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b'{"format_version": 1, "server_url": ', "not valid JSON"),
        (b"\xff\xfe\x00", "not valid JSON"),
        (b"[1, 2, 3]", "not shaped as a ledger"),
        (b'{"format_version": 1, "server_url": "https://screeps.com/ptr", "sent": 5}', "not shaped as a ledger"),
        (b'{"format_version": 99}', "format_version 99, expected 1"),
        (
            b'{"format_version": 1, "server_url": "https://other.example", "fingerprint": "0123456789abcdef",'
            b' "saved_at": 1}',
            "it belongs to another server or credentials",
        ),
    ],
)
def test_corrupt_ledger_is_set_aside(tmp_path: Path, clock: ManualClock, content: bytes, reason: str) -> None:
    path = open_ledger(tmp_path, clock).path
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    ledger = open_ledger(tmp_path, clock)
    aside = path.with_name(f"{path.name}.corrupt-20270115T080000Z")
    assert ledger.warnings == [
        f"the ledger at {path} was corrupt ({reason}); set aside as {aside}; starting afresh, so rate-limit "
        "figures are counted from zero and branches are downloaded."
    ]
    assert aside.read_bytes() == content
    assert not path.exists()
    assert ledger.windows()["GET /api/user/code"].remaining == 60
    # Setting it aside is this run's own doing, never "changed by another program during this run" (issue 41).
    ledger.notice_rewrite()
    assert len(ledger.warnings) == 1
    ledger.save()
    assert open_ledger(tmp_path, clock).warnings == []


def test_default_state_dir() -> None:
    assert default_state_dir({"GITOPS_STATE_DIR": "/s", "XDG_STATE_HOME": "/x"}) == Path("/s")
    assert default_state_dir({"XDG_STATE_HOME": "/x", "HOME": "/h"}) == Path("/x/screeps-gitops")
    assert default_state_dir({"HOME": "/h"}) == Path("/h/.local/state/screeps-gitops")


# --- atomic writes -----------------------------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from gitops.edges.clock import ManualClock
    from gitops.edges.ledger import Ledger
    from gitops.core.remote import BranchInfo

    clock = ManualClock(1_800_000_000.0)
    ledger = Ledger.open(Path(sys.argv[1]), sys.argv[2], sys.argv[3], clock=clock)
    i = 0
    while True:
        i += 1
        for _ in range(20):
            ledger.record_sent("GET /api/user/code")
        ledger.set_unlimited_until(float(i))
        ledger.remember_branch_list([BranchInfo(f"b{j}") for j in range(i % 30)])
        ledger.save()
        print(i, flush=True)
    """
)


def test_kill_9_mid_write_leaves_old_or_new_state(tmp_path: Path, clock: ManualClock) -> None:
    rng = random.Random(4)
    sent_before = 0
    for _round in range(8):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), URL, FP],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.strip().isdigit(), "the writer did not start"
        # Kill at a random moment while it keeps rewriting the file.
        time.sleep(rng.uniform(0.02, 0.25))
        os.kill(proc.pid, signal.SIGKILL)
        rest = proc.stdout.read()
        proc.stdout.close()
        proc.wait()
        last = int((first + rest).split()[-1])

        ledger = open_ledger(tmp_path, clock)
        assert ledger.warnings == []
        assert ledger.unlimited_until is not None
        n = int(ledger.unlimited_until)
        # Either the last save it reported or the one it finished without reporting, and all of that save.
        assert n in (last, last + 1)
        assert len(ledger.sent_times("GET /api/user/code", 3600)) == sent_before + 20 * n
        listing = ledger.remembered_branch_list()
        assert listing is not None
        assert len(listing[0]) == n % 30
        sent_before += 20 * n
    clock.advance(7200)  # temporary files that a killed writer left are removed once stale
    folder = open_ledger(tmp_path, clock).path.parent
    assert list(folder.glob(".*.tmp")) == []


def test_a_branch_keeps_the_servers_stamp_it_was_learnt_at(tmp_path: Path, clock: ManualClock) -> None:
    ledger = open_ledger(tmp_path, clock)
    code = CodeSet.of([Module("main", text="x")])
    ledger.remember_branch(RemoteBranch.from_code("main", code, START, "own-upload", "1790000000123"))
    ledger.remember_branch(RemoteBranch.from_code("sim", code, START, "download"))
    ledger.stamp_branch("sim", "1790000000456")
    ledger.stamp_branch("never", "1")  # no record: nothing to stamp
    ledger.save()
    again = open_ledger(tmp_path, clock)
    assert [(b.name, b.stamp) for b in map(again.remembered_branch, ["main", "sim"]) if b is not None] == [
        ("main", "1790000000123"),
        ("sim", "1790000000456"),
    ]
    assert again.remembered_branch("never") is None


def test_a_ledger_file_of_before_stamps_still_reads(tmp_path: Path, clock: ManualClock) -> None:
    ledger = open_ledger(tmp_path, clock)
    ledger.remember_branch(RemoteBranch.from_code("main", CodeSet.of([Module("main", text="x")]), START))
    ledger.save()
    data = json.loads(ledger.path.read_text())
    del data["branches"]["main"]["stamp"]
    ledger.path.write_text(json.dumps(data))
    again = open_ledger(tmp_path, clock)
    assert again.warnings == []
    branch = again.remembered_branch("main")
    assert branch is not None
    assert branch.stamp is None


@pytest.mark.parametrize(("raw", "wait"), [("", 120.0), ("2.5", 2.5), ("0", 0.0), ("-1", 120.0), ("soon", 120.0)])
def test_lock_wait_from_the_environment(raw: str, wait: float) -> None:
    assert lock_wait({"GITOPS_LOCK_WAIT": raw}) == wait
    assert lock_wait({}) == 120.0


def test_the_lock_is_taken_and_released(tmp_path: Path, clock: ManualClock) -> None:
    first = Ledger.open(tmp_path, URL, FP, clock=clock, lock_wait=1)
    try:
        owner = json.loads(first.path.with_name(first.path.name + ".owner").read_text())
        assert owner["pid"] == os.getpid()
    finally:
        first.close()
        first.close()  # twice is harmless
    second = Ledger.open(tmp_path, URL, FP, clock=clock, lock_wait=1)  # released: no wait
    second.close()


def test_the_owner_file_and_the_lock_are_never_written_through_a_link(tmp_path: Path, clock: ManualClock) -> None:
    from gitops.errors import LedgerBusyError

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n", encoding="utf-8")
    path, _ = Ledger.path_for(tmp_path / "state", "https://screeps.com", FP)
    path.parent.mkdir(parents=True)
    for suffix in (".owner", ".lock"):
        link = path.with_name(path.name + suffix)
        link.symlink_to(victim)
        with pytest.raises(LedgerBusyError) as caught:
            Ledger.open(tmp_path / "state", "https://screeps.com", FP, clock=clock, lock_wait=1)
        assert "is a symbolic link" in str(caught.value)
        assert victim.read_text(encoding="utf-8") == "keep me\n"
        link.unlink()


def test_two_manifests_with_the_servers_in_opposite_order_take_the_locks_in_one_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Manifest A names U1 'alpha' and U2 'beta'; manifest B the other way round. Each run locks its servers' ledgers;
    # taken in the order of the names, A would hold U1 and wait for U2 while B holds U2 and waits for U1.
    import threading

    from gitops.app.options import Options
    from gitops.app.session import Session
    from gitops.config.manifest import load_manifest
    from tests.factories import write_manifest

    monkeypatch.setenv("SCREEPS_TOKEN", "0123456789abcdef0123456789abcdef")
    urls = ("http://127.0.0.1:1", "http://127.0.0.1:2")
    sessions = []
    for name, (first, second) in (("a", urls), ("b", urls[::-1])):
        servers = {
            "alpha": {"url": first, "token_env": "SCREEPS_TOKEN"},
            "beta": {"url": second, "token_env": "SCREEPS_TOKEN"},
        }
        branches = [{"server": "alpha", "branch": "main"}, {"server": "beta", "branch": "main"}]
        path = write_manifest(tmp_path / name, servers=servers, branches=branches)
        options = Options(manifest=path, env={**os.environ, "GITOPS_LOCK_WAIT": "20"}, state_dir=tmp_path / "state")
        sessions.append(Session(load_manifest(path), options))
    a, b = sessions
    a.ledger("alpha")  # A's first ledger (and, in the one order, its other one too)
    got: list[str] = []
    failed: list[BaseException] = []

    def second_run() -> None:
        try:
            b.ledger("alpha")
            b.ledger("beta")
            got.append("b")
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=second_run)
    thread.start()
    time.sleep(0.3)
    started = time.monotonic()
    a.ledger("beta")  # never waits for B: A already holds both, in the order B also takes them
    assert time.monotonic() - started < 1.0
    a.close()
    thread.join(30)
    b.close()
    assert not failed
    assert got == ["b"]


# --- the check: a ledger gitops wrote is trusted, any other is validated (issue 23) -----------------------------

CHECK_HEAD = b',"check":"sha256:'


def _body(raw: bytes) -> bytes:
    """The file without its ``check`` member (and newline): the compact JSON the digest is taken of."""
    assert raw.endswith(b'"}\n')
    head = len(raw) - len(CHECK_HEAD) - 64 - 3
    assert raw[head : head + len(CHECK_HEAD)] == CHECK_HEAD
    return raw[:head] + b"}"


def _filled(tmp_path: Path, clock: ManualClock) -> Ledger:
    ledger = open_ledger(tmp_path, clock)
    code = CodeSet.of([Module("main", text="x"), Module("lib/ü", text="y"), Module("w", binary=b"\0asm")])
    ledger.remember_branch(RemoteBranch.from_code("default", code, START - 5, "own-upload", "1799999999000"))
    ledger.remember_branch_list([BranchInfo("default", True, False)])
    ledger.record_sent("GET /api/user/code")
    ledger.record_response("GET /api/user/code", 200, headers(60, 40, START + 900))
    ledger.save()
    return ledger


def test_a_saved_ledger_ends_with_the_sha256_of_the_rest(tmp_path: Path, clock: ManualClock) -> None:
    import hashlib

    raw = _filled(tmp_path, clock).path.read_bytes()
    body = _body(raw)
    digest = hashlib.sha256(body).hexdigest()
    assert raw == body[:-1] + CHECK_HEAD + digest.encode() + b'"}\n'
    data = json.loads(raw)
    assert data["check"] == f"sha256:{digest}"
    # Otherwise the format of before: compact UTF-8 JSON, keys in the order of format version 1.
    assert list(data)[:5] == ["format_version", "server_url", "fingerprint", "saved_at", "seq"]
    assert list(data)[-4:] == ["scope_at", "verifications", "history", "check"]
    assert "lib/ü".encode() in body
    assert (
        body
        == json.dumps(
            {k: v for k, v in data.items() if k != "check"}, separators=(",", ":"), ensure_ascii=False
        ).encode()
    )


def test_an_older_ledger_without_check_is_validated_loads_and_gains_the_check_on_save(
    tmp_path: Path, clock: ManualClock
) -> None:
    path = _filled(tmp_path, clock).path
    old = _body(path.read_bytes()) + b"\n"  # exactly what gitops wrote before the check
    path.write_bytes(old)
    ledger = open_ledger(tmp_path, clock)
    assert ledger.warnings == []
    branch = ledger.remembered_branch("default")
    assert branch is not None
    assert (branch.how, branch.stamp, len(branch.modules or {})) == ("own-upload", "1799999999000", 3)
    assert ledger.windows()["GET /api/user/code"].remaining == 40
    assert ledger.changed  # nothing learnt, but the file lacks its check: the next save writes it
    ledger.save()
    assert not ledger.changed
    raw = path.read_bytes()
    assert raw.endswith(b'"}\n')
    assert _body(raw) + b"\n" == old  # the same data (and the same clock: the same saved_at), now with its check
    assert not open_ledger(tmp_path, clock).changed  # verified: nothing to write


def test_a_wrong_check_on_valid_content_is_validated_and_loads(tmp_path: Path, clock: ManualClock) -> None:
    path = _filled(tmp_path, clock).path
    data = json.loads(path.read_bytes())
    data["branch_list"]["branches"][0]["active_sim"] = True  # edited by hand: the check no longer matches
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    ledger = open_ledger(tmp_path, clock)
    assert ledger.warnings == []
    assert ledger.remembered_branch_list() == ([BranchInfo("default", True, True)], START)
    assert ledger.changed
    data["check"] = "sha256:" + "0" * 64
    path.write_bytes(json.dumps(data, separators=(",", ":")).encode() + b"\n")  # gitops' layout, a wrong digest
    assert open_ledger(tmp_path, clock).remembered_branch_list() == ([BranchInfo("default", True, True)], START)


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["branches"]["default"]["modules"]["main"].update(size=-1),  # the digest would be unchanged
        lambda d: d.update(unknown_key=1),
        lambda d: d["headers"]["GET /api/user/code"].pop("seq"),
    ],
)
def test_a_wrong_check_on_invalid_content_is_set_aside(tmp_path: Path, clock: ManualClock, edit: Any) -> None:
    path = _filled(tmp_path, clock).path
    raw = path.read_bytes()
    data = json.loads(raw)
    edit(data)
    data["check"] = data.pop("check")  # still last
    content = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"  # keeps the old check
    assert content.endswith(raw[-len(CHECK_HEAD) - 64 - 3 :])
    path.write_bytes(content)
    ledger = open_ledger(tmp_path, clock)
    aside = path.with_name(f"{path.name}.corrupt-20270115T080000Z")
    assert ledger.warnings == [
        f"the ledger at {path} was corrupt (not shaped as a ledger); set aside as {aside}; starting afresh, so "
        "rate-limit figures are counted from zero and branches are downloaded."
    ]
    assert aside.read_bytes() == content
    assert ledger.remembered_branch("default") is None


def test_json_nested_too_deeply_is_not_valid_json(tmp_path: Path, clock: ManualClock) -> None:
    path = open_ledger(tmp_path, clock).path
    path.parent.mkdir(parents=True)
    path.write_bytes(b"[" * 100_000)
    assert "was corrupt (not valid JSON); set aside" in open_ledger(tmp_path, clock).warnings[0]


def test_a_branch_name_with_a_lone_surrogate_reads_back_unchanged(tmp_path: Path, clock: ManualClock) -> None:
    # The server can send one (an unpaired \udXXX escape); UTF-8 cannot carry it, so it is written as its escape.
    ledger = open_ledger(tmp_path, clock)
    ledger.remember_branch_list([BranchInfo("odd\ud800name"), BranchInfo("plain")])
    ledger.save()
    assert b"odd\\ud800name" in ledger.path.read_bytes()
    again = open_ledger(tmp_path, clock)
    assert again.warnings == []
    assert again.remembered_branch_list() == ([BranchInfo("odd\ud800name"), BranchInfo("plain")], START)
    assert not again.changed


def test_the_ledgers_active_names_are_the_manifests() -> None:
    from typing import get_args

    from gitops.config.manifest import ActiveName
    from gitops.edges import ledger

    assert get_args(ledger.ActiveName) == get_args(ActiveName)


LOADER = textwrap.dedent(
    """
    import json
    import sys
    from pathlib import Path

    from gitops.edges.clock import ManualClock
    from gitops.edges.ledger import Ledger

    imported = "pydantic" in sys.modules
    sys.modules["pydantic"] = None  # from here on, any import of pydantic fails
    clock = ManualClock(1_800_000_000.0)
    ledger = Ledger.open(Path(sys.argv[1]), sys.argv[2], sys.argv[3], clock=clock, lock_wait=10)
    branch = ledger.remembered_branch("default")
    ledger.record_sent("GET /api/user/code")
    changed = ledger.changed
    ledger.save()
    ledger.close()
    again = Ledger.open(Path(sys.argv[1]), sys.argv[2], sys.argv[3], clock=clock)
    print(json.dumps({
        "imported": imported,
        "warnings": ledger.warnings + again.warnings,
        "modules": sorted(branch.modules or {}) if branch else None,
        "changed": changed,
        "sent": again.sent_times("GET /api/user/code", 60),
    }))
    """
)


def _fresh(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60, check=False)


def test_a_ledger_gitops_wrote_loads_and_saves_without_pydantic(tmp_path: Path, clock: ManualClock) -> None:
    import ast

    _filled(tmp_path, clock)
    done = _fresh(LOADER, str(tmp_path), URL, FP)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["warnings"] == []
    assert result["modules"] == ["lib/ü", "main", "w"]
    assert result["changed"] is True
    assert result["sent"] == [START, START]

    # The ledger imports no pydantic of its own (only the branch of _load that validates a file that does not
    # verify does); whatever its imports still bring in is theirs, and once they bring none, neither does it.
    import gitops.edges.ledger as module

    trees = [ast.parse(path.read_text(encoding="utf-8")) for path in Path(module.__file__ or "").parent.glob("*.py")]
    imports = [node for tree in trees for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    assert not any("pydantic" in ast.unparse(node) for node in imports)
    others = "\n".join(ast.unparse(node) for node in imports if "__future__" not in ast.unparse(node))
    dependencies = _fresh(f"import sys\n{others}\nprint('pydantic' in sys.modules)")
    assert dependencies.returncode == 0, dependencies.stderr
    assert not result["imported"] or dependencies.stdout.strip() == "True"


def test_a_file_that_does_not_verify_needs_pydantic(tmp_path: Path, clock: ManualClock) -> None:
    # The counterpart of the test above: the same run, on a file edited by hand, reaches for the validator (so the
    # blocked import is what that test would see if a verified file were validated again).
    path = _filled(tmp_path, clock).path
    path.write_bytes(_body(path.read_bytes()) + b"\n")
    done = _fresh(LOADER, str(tmp_path), URL, FP)
    assert done.returncode != 0
    assert "import of pydantic halted" in done.stderr


def _signed(data: dict[str, Any]) -> bytes:
    """``data`` written as gitops writes it, with a matching check (as any writer of the state folder could)."""
    import hashlib

    body = json.dumps({k: v for k, v in data.items() if k != "check"}, separators=(",", ":")).encode()
    return body[:-1] + CHECK_HEAD + hashlib.sha256(body).hexdigest().encode() + b'"}\n'


def test_a_matching_check_is_trusted_and_what_cannot_be_built_is_validated(tmp_path: Path, clock: ManualClock) -> None:
    path = _filled(tmp_path, clock).path
    data = json.loads(path.read_bytes())
    # Trusted: a value pydantic would refuse (a negative size) is taken as written, since the check says gitops
    # wrote it (the check is an integrity check, not a signature; docs/budget-and-ledger.md).
    data["branches"]["default"]["modules"]["main"]["size"] = -1
    path.write_bytes(_signed(data))
    ledger = open_ledger(tmp_path, clock)
    assert ledger.warnings == []
    branch = ledger.remembered_branch("default")
    assert branch is not None
    assert branch.modules is not None
    assert branch.modules["main"].size == -1
    assert not ledger.changed
    # A shape the build trips over (a missing key) is validated instead, and set aside as any invalid file.
    del data["headers"]["GET /api/user/code"]["seq"]
    path.write_bytes(_signed(data))
    assert "was corrupt (not shaped as a ledger); set aside" in open_ledger(tmp_path, clock).warnings[0]


def test_a_set_aside_file_leaves_nothing_to_save(tmp_path: Path, clock: ManualClock) -> None:
    path = open_ledger(tmp_path, clock).path
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"format_version": 1, "sent": 5}')
    ledger = open_ledger(tmp_path, clock)
    assert len(ledger.warnings) == 1
    assert not ledger.changed  # as before the check: a fresh ledger, nothing learnt yet


# --- deployment state (issue 39): verification records and the history ------------------------------------------


def test_a_ledger_written_before_the_deployment_state_reads_with_none_recorded(
    tmp_path: Path, clock: ManualClock
) -> None:
    ledger = _filled(tmp_path, clock)
    data = json.loads(ledger.path.read_bytes())
    del data["check"], data["verifications"], data["history"]
    old = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
    for raw in (old + b"\n", old[:-1] + b',"check":"sha256:' + hashlib.sha256(old).hexdigest().encode() + b'"}\n'):
        ledger.path.write_bytes(raw)  # as an older gitops wrote it: unchecked, and checked
        again = open_ledger(tmp_path, clock)
        assert again.warnings == []
        assert again.verifications() == []
        assert again.history() == []
        assert again.remembered_digest("default") is not None  # the rest read as before

    again.record_deploy(Deploy(0, "default", "sha256:aa", "c0ffee", START))
    record = VerifyRecord(
        "default", "pending", "sha256:aa", "c0ffee", START, START + 1, "watching", "restore", "sha256:bb"
    )
    again.record_verification(record)
    again.save()
    back = open_ledger(tmp_path, clock)
    assert back.verification("default") == record
    assert back.history() == [Deploy(1, "default", "sha256:aa", "c0ffee", START, "apply", "pending")]
