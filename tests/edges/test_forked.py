"""The local code read in a child process (``gitops.edges.forked``, ``gitops.app.headstart.localread.LocalRead``;
issue 23).

A fork is only safe in a process with a single thread; the test process has several (the stand-in's, xdist's), so
every check that forks runs in a fresh interpreter of its own: a small script for :class:`ForkedCall` itself, and
``python -m gitops`` for a whole run, with the fork observed from inside that process (``_OBSERVE``). What is
checked: the child's result is the code a read in this process gives; every child is collected, also after a
Ctrl-C or a failure; a child dies with its parent; a read that fails in the child is done again in the parent, so
that the error, its wording and its exit code are those of a run without a child.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from gitops.core.codeset import WireModule, upload_body
from gitops.edges.forked import ForkedCall, can_fork
from gitops.standin.testing import ALICE, StandIn
from tests.factories import interruptible_python, reaped, wait_while_running
from tests.project import Project, one_branch_project

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork is used on Linux only")

LIST = "GET /api/user/branches"


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (not gone, not a zombie waiting for its parent)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _script(tmp_path: Path, body: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    code = "import os, sys, time, json\nfrom gitops.edges.forked import ForkedCall, can_fork\n" + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=tmp_path, check=False
    )


def test_nothing_is_forked_in_a_process_with_threads() -> None:
    release = threading.Event()
    other = threading.Thread(target=release.wait, args=(30,))
    other.start()
    try:
        assert not can_fork()
        assert ForkedCall.start(lambda: 1) is None
    finally:
        release.set()
        other.join()


def test_the_childs_result_comes_back_and_the_child_is_collected(tmp_path: Path) -> None:
    done = _script(
        tmp_path,
        """
        from gitops.core.codeset import CodeSet, Module
        code = CodeSet.of([Module("main", text="x" * 3_000_000), Module("wasm", binary=bytes(range(256)))])
        def preface(result, told):
            return b"made first " + str(result[0]).encode() + b" after " + told
        call = ForkedCall.start(lambda: (os.getpid(), code), preface)
        assert call is not None and can_fork()
        call.tell(b"being told")
        call.tell(b"told twice")  # once only
        assert call.preface() == b"made first " + str(call.pid).encode() + b" after being told"  # before the result
        pid, back = call.result()
        assert pid == call.pid != os.getpid()
        assert back == code and [m.digest for m in back] == [m.digest for m in code]
        assert call.ready() and call.result() is None  # taken once
        call.collect()
        try:
            os.waitpid(call.pid, os.WNOHANG)
            print("not collected")
        except ChildProcessError:
            print("collected")
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["collected"]
    assert done.stderr == ""


def test_the_preface_is_handed_over_before_the_child_pickles_its_result(tmp_path: Path) -> None:
    """The child says when its preface is written, so the parent starts on it (the bodies' deflate) while the child
    still pickles its code. Here the result's pickling waits until the parent has taken the preface: a preface that
    waited for the whole result would wait out the child's 20 s first."""
    done = _script(
        tmp_path,
        """
        import pathlib
        flag = pathlib.Path("preface-taken")
        class Late:
            def __reduce__(self):
                deadline = time.monotonic() + 20
                while not flag.exists() and time.monotonic() < deadline:
                    time.sleep(0.01)
                return (bool, (flag.exists(),))
        call = ForkedCall.start(lambda: Late(), lambda result, told: b"bodies")
        call.tell(b"")
        started = time.monotonic()
        preface = call.preface()
        waited = time.monotonic() - started
        assert not call.ready()  # the result is not written yet
        flag.touch()
        print(json.dumps({"preface": preface.decode(), "waited": waited, "result": call.result()}))
        call.collect()
        """,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["preface"] == "bodies"
    assert out["result"] is True  # pickled after the parent had the preface
    assert out["waited"] < 10


def test_collect_closes_the_childs_files_when_the_result_was_not_taken(tmp_path: Path) -> None:
    """A caller that stops after the preface (its work with the preface failed) still collects the child, and that
    closes the child's result file and pipe: no descriptor is left open."""
    done = _script(
        tmp_path,
        """
        def open_fds():
            return sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
        before = open_fds()
        call = ForkedCall.start(lambda: 42, lambda result, told: b"bodies")
        assert open_fds() != before  # the result file, the pipes and the pidfd
        assert call.preface() == b"bodies"
        call.collect()  # no result() taken
        print(json.dumps({"left": [fd for fd in open_fds() if fd not in before]}))
        """,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["left"] == []


def test_the_childs_code_comes_with_its_digest(tmp_path: Path) -> None:
    """The child computes each branch's code digest before pickling the code: the plan needs it, and this
    process then does not hash the 2,000 module digests again (the digest is kept with the set)."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.js").write_text("module.exports.loop = () => {};\n", encoding="utf-8")
    (tmp_path / "gitops.yaml").write_text(
        "version: 1\nservers:\n  local:\n    url: http://127.0.0.1:21025\n    token_env: SCREEPS_TOKEN\n"
        "branches:\n  - server: local\n    branch: main\n    root: src\n",
        encoding="utf-8",
    )
    done = _script(
        tmp_path,
        """
        from pathlib import Path
        from gitops.app.headstart.localread import LocalRead
        from gitops.config.manifest import load_manifest
        reading = LocalRead(load_manifest(Path("gitops.yaml")), None, {})
        forked = reading._forked is not None
        code = reading.result().branches[0].code
        print(json.dumps({"forked": forked, "digest_kept": "digest" in vars(code), "main": code.names()}))
        """,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"forked": True, "digest_kept": True, "main": ["main"]}


@pytest.mark.parametrize("work", ["raise SystemExit(3)", "raise ValueError('secret-canary-0123')", "return lambda: 1"])
def test_a_child_that_fails_answers_none_and_says_nothing(tmp_path: Path, work: str) -> None:
    """An exception, an exit or a result that cannot be pickled: ``None`` (the caller reads again itself), and
    the child writes nothing to the terminal (no traceback of its own beside the parent's message)."""
    done = _script(
        tmp_path,
        f"""
        def work():
            {work}
        call = ForkedCall.start(work)
        print(call.result())
        call.collect()
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None"]
    assert done.stderr == ""


@pytest.mark.parametrize("how", ["never told", "told too much"])
def test_a_child_waiting_to_be_told_is_not_left_waiting(tmp_path: Path, how: str) -> None:
    """A parent that waits for its child without telling it anything (or tells it more than the pipe holds at
    once) neither blocks nor leaves the child waiting: the child's preface sees nothing told."""
    done = _script(
        tmp_path,
        f"""
        call = ForkedCall.start(lambda: 1, lambda result, told: repr(told).encode())
        started = time.monotonic()
        if {how!r} == "told too much":
            call.tell(b"x" * 10_000_000)
        preface = call.preface()
        print(json.dumps({{"preface": preface.decode(), "result": call.result(), "s": time.monotonic() - started}}))
        call.collect()
        """,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["preface"], out["result"]) == ("None", 1)
    assert out["s"] < 30


def test_a_torn_result_file_answers_none(tmp_path: Path) -> None:
    """A result file shorter than its header says (cut here, after the child wrote it): no preface, no result, no
    error: the caller reads the code itself, as for any other failure of the child."""
    done = _script(
        tmp_path,
        """
        call = ForkedCall.start(lambda: "x" * 100_000, lambda result, told: b"p" * 1000)
        call.tell(b"")
        while not call.ready():
            time.sleep(0.01)
        os.ftruncate(call._fds[1], 500)  # inside the preface
        print(call.preface(), call.result())
        call.collect()
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "None"]


def test_cancel_kills_and_collects_a_child_still_at_work(tmp_path: Path) -> None:
    done = _script(
        tmp_path,
        """
        call = ForkedCall.start(lambda: time.sleep(60))
        started = time.monotonic()
        call.cancel()
        print(json.dumps({"pid": call.pid, "seconds": time.monotonic() - started, "result": call.result()}))
        """,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["result"] is None
    assert out["seconds"] < 30  # killed, not waited for (60 s)
    assert not _alive(out["pid"])


def test_a_child_dies_with_its_parent(tmp_path: Path) -> None:
    """A parent killed outright (SIGKILL: no handler, no cleanup) leaves no child reading on."""
    pid_file = tmp_path / "child.pid"
    code = textwrap.dedent(
        f"""
        import os, time
        from gitops.edges.forked import ForkedCall
        def work():
            open({str(pid_file)!r} + ".tmp", "w").write(str(os.getpid()))
            os.replace({str(pid_file)!r} + ".tmp", {str(pid_file)!r})
            time.sleep(60)
        call = ForkedCall.start(work)
        time.sleep(60)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        child = int(pid_file.read_text())
        assert _alive(child)
    finally:
        parent.kill()
        parent.wait(timeout=30)
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(child), "the child outlived its parent"


#: Run ``python -m gitops ARGS`` with the fork observed: each ForkedCall started is logged (its pid) to the file
#: in $OBSERVE; with $SLOW_READ set, the read sleeps that long first (in whichever process reads).
_OBSERVE = textwrap.dedent(
    """
    import json, os, sys, threading, time
    from gitops.edges import forked, sources
    original_start = forked.ForkedCall.start.__func__
    def start(cls, work, *args):
        call = original_start(cls, work, *args)
        with open(os.environ["OBSERVE"], "a") as fh:
            fh.write(json.dumps({"pid": call.pid if call else None, "parent": os.getpid()}) + "\\n")
        return call
    forked.ForkedCall.start = classmethod(start)
    original_read = sources.read_local_code
    def read_local_code(*args, **kwargs):
        with open(os.environ["OBSERVE"], "a") as fh:
            fh.write(json.dumps({"read_by": os.getpid()}) + "\\n")
        time.sleep(float(os.environ.get("SLOW_READ", "0")))
        return original_read(*args, **kwargs)
    sources.read_local_code = read_local_code
    from gitops.app.headstart import localread
    original_bodies = localread._bodies_from
    def bodies_from(preface):
        bodies = original_bodies(preface)
        with open(os.environ["OBSERVE"], "a") as fh:
            made = [[b.server, b.branch, len(b.content())] for b in bodies]
            fh.write(json.dumps({"bodies_from_child": made, "thread": threading.current_thread().name}) + "\\n")
        return bodies
    localread._bodies_from = bodies_from
    from gitops.edges.service import requestbodies
    original_json = requestbodies.json_body
    def json_body(body):
        if isinstance(body, dict) and ("modules" in body or "defaultModules" in body):
            with open(os.environ["OBSERVE"], "a") as fh:
                fh.write(json.dumps({"encoded_by": os.getpid()}) + "\\n")
        return original_json(body)
    requestbodies.json_body = json_body
    sys.argv = ["gitops", *sys.argv[1:]]
    from gitops.cli import main
    main()
    """
)


def _observed_run(
    p: Project, observe: Path, *args: str, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-c", _OBSERVE, *args, "-m", str(p.root / "gitops.yaml"), "--state-dir", str(p.state_dir)]
    env = {**os.environ, "NO_COLOR": "1", "OBSERVE": str(observe), **(extra_env or {})}
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)


def _bodies(observe: Path) -> list[list[object]]:
    """The upload bodies the parent took from the child (server, branch, bytes), if it did; always in the thread
    that waits for them alone (so that their deflate starts at once, whatever the worker is doing)."""
    events = [json.loads(line) for line in observe.read_text().splitlines()]
    taken = [e for e in events if "bodies_from_child" in e]
    assert all(e["thread"] == "gitops-local-bodies" for e in taken), taken
    return [body for e in taken for body in e["bodies_from_child"]]


def _events(observe: Path) -> tuple[dict[str, int | None], list[int]]:
    """The fork's record (its pid and the parent's), and which process read the code, in order. The parent logs
    the fork after the child began, so the child's read may be logged first."""
    events = [json.loads(line) for line in observe.read_text().splitlines() if '"pid"' in line or '"read_by"' in line]
    started = [e for e in events if "pid" in e]
    assert len(started) == 1, events
    return started[0], [e["read_by"] for e in events if "read_by" in e]


def test_a_run_reads_its_code_in_a_child_and_plans_as_before(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({f"src/lib/m{n:03d}.js": f"module.exports = {n};\n" for n in range(50)})
    p.write({"src/main.js": "module.exports.loop = () => {};\n"})
    p.manifest([{"branch": "main", "root": "src"}])
    p.commit()
    observe = tmp_path / "observe.jsonl"
    first = _observed_run(p, observe, "apply", "--yes")
    assert first.returncode == 0, first.stderr
    started, reads = _events(observe)
    child = started["pid"]
    assert isinstance(child, int)
    assert reads == [child]  # read once, by the child: the parent took its result
    # apply --yes: the child made the upload body too, for the deflate ahead (the bytes the upload sends).
    expected = {f"lib/m{n:03d}": f"module.exports = {n};\n" for n in range(50)}
    wire = dict(sorted({"main": "module.exports.loop = () => {};\n", **expected}.items()))
    assert _bodies(observe) == [["local", "main", len(upload_body("main", wire))]]
    assert not _alive(child)
    assert standin.branch_modules(ALICE, "main") == {"main": "module.exports.loop = () => {};\n", **expected}
    # The same code planned again, in this process (a thread, no child): nothing to do, as the child's read said.
    assert "no changes" in p.plan().out.lower()
    # Applied again: the ledger says the server holds this code, so the child is told no body is wanted.
    observe.unlink()
    again = _observed_run(p, observe, "apply", "--yes")
    assert again.returncode == 0, again.stderr
    assert _bodies(observe) == []
    assert _events(observe)[1] == [_events(observe)[0]["pid"]]
    # One module changed: its branch's body is wanted again.
    p.write({"src/lib/m007.js": "module.exports = 'seven';\n"})
    observe.unlink()
    changed = _observed_run(p, observe, "apply", "--yes")
    assert changed.returncode == 0, changed.stderr
    wire["lib/m007"] = "module.exports = 'seven';\n"
    assert _bodies(observe) == [["local", "main", len(upload_body("main", wire))]]
    # The upload sent the child's body: this process encoded no upload body of its own.
    assert '"encoded_by"' not in observe.read_text()
    held = standin.branch_modules(ALICE, "main")
    assert held is not None
    assert held["lib/m007"] == "module.exports = 'seven';\n"


def test_a_read_that_fails_in_the_child_fails_as_in_a_run_without_one(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": "module.exports.loop = () => {};\n", "src/notes.txt": "not a module\n"})
    p.manifest([{"branch": "main", "root": "src", "include": ["**/*"]}])
    p.commit()
    observe = tmp_path / "observe.jsonl"
    forked = _observed_run(p, observe, "plan")
    here = p.gitops("plan")  # in this process: no child
    assert forked.returncode == here.code == 6, forked.stderr
    assert forked.stderr == here.err
    assert "notes.txt" in forked.stderr
    assert "Traceback" not in forked.stderr
    assert _bodies(observe) == []  # a plan uploads nothing: the child made no body
    started, reads = _events(observe)
    child, parent = started["pid"], started["parent"]
    assert isinstance(child, int)
    assert reads == [child, parent]  # failed in the child, read again in the parent
    assert not _alive(child)


def test_ctrl_c_during_the_childs_read_kills_the_child(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT to the gitops process alone (not its group): the run ends with 130, and its child, still reading
    (for a minute), is gone when the run has ended (killed by the run, or by the kernel as its parent died)."""
    p = one_branch_project(tmp_path, standin, capsys, monkeypatch)
    observe = tmp_path / "observe.jsonl"
    argv = interruptible_python("-c", _OBSERVE, "plan", "-m", str(p.root / "gitops.yaml"))
    env = {**os.environ, "NO_COLOR": "1", "OBSERVE": str(observe), "SLOW_READ": "60"}
    proc = subprocess.Popen([*argv, "--state-dir", str(p.state_dir)], env=env, stderr=subprocess.PIPE, text=True)
    with reaped(proc):
        wait_while_running(proc, lambda: standin.count(LIST) > 0)
        assert standin.count(LIST) == 1, "the branch list was not asked"
        wait_while_running(proc, lambda: observe.exists() and '"pid"' in observe.read_text())
        child = _events(observe)[0]["pid"]
        assert isinstance(child, int)
        assert _alive(child)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=25)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert not _alive(child)


def test_the_childs_upload_body_is_the_clients() -> None:
    """The body the child makes ahead is, byte for byte, the one the client sends (else its deflate is wasted)."""
    from gitops.edges.service import requestbodies

    modules: dict[str, WireModule] = {"main": "loop();\n", "lib/ü": "// é\n", "bin": {"binary": "AAEC"}}
    wire = dict(sorted(modules.items()))
    assert upload_body("default", wire) == requestbodies.json_body(requestbodies.upload_body("default", wire))
