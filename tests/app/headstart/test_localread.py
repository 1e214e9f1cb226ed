"""The local code is read while the servers are asked (``gitops.app.headstart.localread.LocalRead``, issue 12), without
changing what a run says or the order that matters: a build still runs before any request, and when the local code
and a server both fail, the local code's error is the one reported (as when it was read first)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from gitops.app.headstart.localread import LocalRead, read_ahead, read_marker
from gitops.app.options import Options
from gitops.config.manifest import load_manifest
from gitops.edges.threads import start_quiet
from gitops.standin.testing import StandIn
from tests.factories import interruptible_python, reaped, wait_while_running
from tests.project import Project, one_branch_project

LIST = "GET /api/user/branches"


def test_a_build_runs_and_fails_before_any_request_is_sent(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The build takes a while before it fails: were the servers asked meanwhile, the branch list would have gone.
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": "module.exports.loop = () => {};\n"})
    p.manifest([{"branch": "main", "root": "src", "build": "sleep 0.5; echo 'TS2304: cannot find name' >&2; exit 2"}])
    p.commit()
    for command in ("plan", "apply"):
        result = p.gitops(command, *(("--yes",) if command == "apply" else ()))
        assert result.code == 6, result.err
        assert "TS2304: cannot find name" in result.err
        assert standin.count(LIST) == 0


@pytest.mark.parametrize("fault", ["500", "html"])
def test_when_the_local_code_and_the_server_both_fail_the_local_error_is_reported(
    tmp_path: Path,
    standin: StandIn,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
) -> None:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": "module.exports.loop = () => {};\n", "src/notes.txt": "not a module\n"})
    p.manifest([{"branch": "main", "root": "src", "include": ["**/*"]}])
    p.commit()
    standin.inject_fault(LIST, fault, count=20)
    for command in ("plan", "apply"):
        result = p.gitops(command, *(("--yes",) if command == "apply" else ()))
        assert result.code == 6, result.err
        assert "notes.txt" in result.err
        assert "Traceback" not in result.err
    assert standin.count("POST /api/user/code") == 0


def test_a_server_error_with_sound_local_code_is_the_servers(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = one_branch_project(tmp_path, standin, capsys, monkeypatch)
    standin.inject_fault(LIST, "html", count=20)
    result = p.apply("--yes")
    assert result.code == 1, result.err
    assert "GET /api/user/branches" in result.err


def test_the_worker_reads_the_same_code_as_a_read_in_this_thread(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": "module.exports.loop = () => {};\n", "src/lib/a.js": "module.exports = 1;\n"})
    loaded = load_manifest(p.manifest([{"branch": "main", "root": "src"}]))
    p.commit()
    here = LocalRead(loaded, None, {}).result()  # never started: read in this thread
    threads_before = set(threading.enumerate())
    reading = LocalRead(loaded, "HEAD", {})
    reading.start(then_import=("gitops.render.plan",))
    there = reading.result()
    # Joined: no thread is left that was not there before (others, the stand-in's, may end meanwhile).
    assert set(threading.enumerate()) - threads_before == set()
    for local in (here, there):
        assert [b.branch for b in local.branches] == ["main"]
    assert {m.name: m.digest for m in here.branches[0].code} == {m.name: m.digest for m in there.branches[0].code}
    assert there.source.kind == "ref"


@pytest.mark.skipif(os.name == "nt", reason="POSIX signals")
def test_ctrl_c_while_the_server_is_awaited_ends_the_run_at_once(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C during the wait for the branch list (the local read's thread started) ends the run with 130 and one
    error line, no traceback, without waiting for the worker or the answer."""
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({f"src/lib/m{n:03d}.js": f"module.exports = {n};\n" for n in range(300)})
    p.write({"src/main.js": "module.exports.loop = () => {};\n"})
    p.manifest([{"branch": "main", "root": "src"}])
    p.commit()
    # Longer than the client waits for any answer (30 s): an interrupt that waited for the answer would not end
    # the run before the client gave up.
    standin.inject_fault(LIST, "delay", delay=60)
    # -X faulthandler: should the run not end, SIGABRT makes it print where each of its threads is.
    argv = ["-X", "faulthandler", "-m", "gitops", "plan", "-m", str(p.root / "gitops.yaml")]
    argv += ["--state-dir", str(p.state_dir)]
    proc = subprocess.Popen(
        interruptible_python(*argv), env={**os.environ, "NO_COLOR": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    with reaped(proc):
        wait_while_running(proc, lambda: standin.count(LIST) > 0)
        assert standin.count(LIST) == 1, "the branch list was not asked"
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            # Generous for a loaded machine (the run saves its ledger with fsync as it ends), and still under 30 s.
            _, err = proc.communicate(timeout=25)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=15)
            pytest.fail("the run did not end within 25 s of the Ctrl-C; its threads:\n" + err.decode())
        waited = time.monotonic() - started
    assert proc.returncode == 130, err.decode()
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1, err.decode()
    assert lines[0].startswith("Error: ")
    assert waited < 25  # the answer, 60 s away, was not waited for, nor the client's 30 s


def test_a_helper_thread_leaves_ctrl_c_and_sigterm_to_the_main_thread() -> None:
    """The local read's worker and the request deadline's watchdog start with SIGINT and SIGTERM blocked
    (``gitops.edges.threads.start_quiet``): the kernel then hands those signals to the main thread, which a socket
    read would otherwise keep from seeing them."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    seen: list[set[int | signal.Signals]] = []
    thread = threading.Thread(target=lambda: seen.append(signal.pthread_sigmask(signal.SIG_BLOCK, [])))
    start_quiet(thread)
    thread.join()
    assert {signal.SIGINT, signal.SIGTERM} <= seen[0]
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before  # this thread's mask is as it was
    assert signal.SIGINT not in before


@pytest.mark.skipif(os.name == "nt", reason="POSIX signals")
def test_ctrl_c_during_an_upload_says_it_may_have_landed(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": "module.exports.loop = () => {};\n"})
    p.manifest([{"branch": "default", "root": "src"}])
    p.commit()
    standin.inject_fault("POST /api/user/code", "delay", delay=60)  # received, then answered a minute later
    argv = ["-m", "gitops", "apply", "--yes", "-m", str(p.root / "gitops.yaml"), "--state-dir", str(p.state_dir)]
    proc = subprocess.Popen(
        interruptible_python(*argv), env={**os.environ, "NO_COLOR": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    with reaped(proc):
        wait_while_running(proc, lambda: standin.count("POST /api/user/code") > 0)
        assert standin.count("POST /api/user/code") == 1, "the upload was not sent"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=25)
    assert proc.returncode == 130, err.decode()
    text = err.decode()
    assert "interrupted while the upload to local/default was in flight: the server may have received it" in text
    assert "The next 'gitops plan' checks the server" in text


# --- the hint of changed files (LocalRead.changes_seen) ---------------------------------------------------------


def _bot(tmp_path: Path, files: int = 30) -> Options:
    """A manifest of one branch of ``files`` modules, and the options of a plan of it."""
    src = tmp_path / "bot" / "src"
    src.mkdir(parents=True)
    for i in range(files):
        (src / f"m{i:03}.js").write_text(f"module.exports.n = {i};\n", encoding="utf-8")
    manifest = tmp_path / "bot" / "gitops.yaml"
    manifest.write_text(
        '{"version": 1, "servers": {"s": {"url": "http://127.0.0.1:9", "token_env": "T"}},'
        ' "branches": [{"server": "s", "branch": "main", "root": "src"}]}',
        encoding="utf-8",
    )
    return Options(manifest=manifest, env={"HOME": str(tmp_path)}, state_dir=tmp_path / "state", refresh="never")


def _seen_after_the_read(reading: LocalRead) -> bool:
    """``changes_seen`` once the child has read everything (its result taken)."""
    try:
        reading.start()
        reading.result()
        if reading._watching is not None:
            reading._watching.join()  # when_changes_seen's thread reads the pipe: its answer, once the child said it
        deadline = time.monotonic() + 10
        seen = reading.changes_seen()
        while not seen and reading._newer >= 0 and time.monotonic() < deadline:  # the end of the pipe, once it exits
            time.sleep(0.01)
            seen = reading.changes_seen()
        return seen
    finally:
        reading.cancel()


def test_no_recorded_read_counts_as_changed(tmp_path: Path) -> None:
    options = _bot(tmp_path)
    marker, since = read_marker(options)
    assert since is None
    assert marker is not None
    assert not marker.exists()
    reading = read_ahead(options)
    try:
        assert reading.changes_seen()  # unknown: what runs as before (the client imported at once)
    finally:
        reading.cancel()


def test_a_read_sees_files_changed_since_the_code_was_last_found_on_the_servers(tmp_path: Path) -> None:
    options = _bot(tmp_path)
    reading = read_ahead(options)
    _seen_after_the_read(reading)
    reading.remember_read()  # as after a plan without changes, or an apply
    marker, since = read_marker(options)
    assert marker is not None
    assert since == reading._began

    assert not _seen_after_the_read(read_ahead(options))  # nothing changed since: no hint

    changed = tmp_path / "bot" / "src" / "m017.js"
    changed.write_text("module.exports.n = 'changed';\n", encoding="utf-8")
    os.utime(changed, ns=(since + 10**9, since + 10**9))  # a second later than the recorded read
    assert _seen_after_the_read(read_ahead(options))


def test_when_changes_seen_calls_back_from_a_thread_that_ends_with_the_child(tmp_path: Path) -> None:
    options = _bot(tmp_path, files=300)
    first = read_ahead(options)
    _seen_after_the_read(first)
    first.remember_read()
    _, since = read_marker(options)
    assert since is not None
    last = tmp_path / "bot" / "src" / "m299.js"  # read last: the callback comes from the waiting thread
    os.utime(last, ns=(since + 10**9, since + 10**9))
    called: list[str] = []
    reading = read_ahead(options)
    reading.when_changes_seen(lambda: called.append(threading.current_thread().name))
    assert _seen_after_the_read(reading)
    assert called in (["gitops-changes"], ["MainThread"])  # once: by the thread, or at once if already seen
    quiet: list[str] = []
    os.utime(last, ns=(since - 10**9, since - 10**9))
    reading = read_ahead(options)
    reading.when_changes_seen(lambda: quiet.append("called"))
    assert not _seen_after_the_read(reading)
    assert quiet == []
    assert all(t.name != "gitops-changes" for t in threading.enumerate())  # joined by cancel()


def test_a_plan_without_changes_and_an_apply_record_the_read_and_a_plan_with_changes_does_not(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = one_branch_project(tmp_path, standin, capsys, monkeypatch)
    options = Options(manifest=p.root / "gitops.yaml", env=dict(os.environ), state_dir=p.state_dir)
    assert read_marker(options)[1] is None
    assert p.apply("--yes").code == 0
    after_apply = read_marker(options)[1]
    assert after_apply is not None
    p.write({"src/main.js": "module.exports.loop = () => { /* new */ };\n"})
    assert p.plan().code == 2  # changes: the servers do not hold this code
    assert read_marker(options)[1] == after_apply
    assert p.apply("--yes").code == 0
    after_second = read_marker(options)[1]
    assert after_second is not None
    assert after_second > after_apply
    assert p.plan().code == 0
    assert (read_marker(options)[1] or 0) > after_second
