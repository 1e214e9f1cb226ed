"""``gitops watch`` end to end (issue 14): real file changes (watchfiles), the real stand-in over loopback, the
stand-in's clock for the hourly pace. The watch runs in a thread, stopped by its stop event; one test runs the CLI
as a child process and stops it with Ctrl-C (SIGINT)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gitops.app.options import Options
from gitops.app.watch import WatchSettings, WatchState, deploy_on_save
from gitops.edges.watching import file_changes
from gitops.standin.testing import ALICE, StandIn
from tests.factories import interruptible_python, reaped
from tests.project import Project

UPLOAD = "POST /api/user/code"
MAIN = "src/main.js"


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``condition`` every 50 ms for at most ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.fixture
def project(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({MAIN: "module.exports.loop = () => {};\n"})
    p.manifest([{"branch": "main", "root": "src"}])
    p.commit()
    return p


class Watching:
    def __init__(self, lines: list[str], state: WatchState) -> None:
        self.lines = lines
        self.state = state

    def said(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))


@contextmanager
def watching(project: Project, **settings: float | int) -> Iterator[Watching]:
    """Run the watch use case in a thread over the project; stop it and join it (bounded) when the block ends."""
    lines: list[str] = []
    errors: list[BaseException] = []
    stop = threading.Event()
    state = WatchState()
    options = Options(
        manifest=project.root / "gitops.yaml",
        env=dict(os.environ),
        state_dir=project.state_dir,
        clock=project.service.clock,
    )
    config = WatchSettings(debounce=float(settings.pop("debounce", 0.5)), **settings)  # type: ignore[arg-type]

    def run() -> None:
        try:
            with file_changes(project.root, config.poll, stop) as source:
                deploy_on_save(options, source, lines.append, settings=config, stop=stop, state=state)
        except BaseException as exc:  # reported by the test's thread
            errors.append(exc)

    thread = threading.Thread(target=run, name="gitops-watch-test")
    thread.start()
    try:
        yield Watching(lines, state)
    finally:
        stop.set()
        thread.join(15)
        assert not thread.is_alive(), "watch did not stop"
    assert not errors, errors


def uploads(standin: StandIn) -> int:
    return standin.count(UPLOAD, ALICE)


def main_module(standin: StandIn) -> object:
    return (standin.branch_modules(ALICE, "main") or {}).get("main")


def test_a_change_is_deployed_within_a_few_seconds(project: Project, standin: StandIn) -> None:
    with watching(project) as w:
        # The first round deploys what is not there yet: a new branch, created holding its modules (no upload).
        assert wait_for(lambda: w.state.deploys == 1 and main_module(standin) is not None), w.lines
        assert uploads(standin) == 0
        assert wait_for(lambda: w.said("deployed local/main"))
        start = time.monotonic()
        project.write({MAIN: "module.exports.loop = () => { /* v2 */ };\n"})
        assert wait_for(lambda: main_module(standin) == "module.exports.loop = () => { /* v2 */ };\n", 5), w.lines
        assert time.monotonic() - start < 5
        assert wait_for(lambda: sum("deployed local/main" in x for x in w.lines) == 2)
    line = [x for x in w.lines if "deployed local/main" in x][-1]
    assert "(src/main.js)" in line
    # No upload answer has said what remains yet: the count is the tool's own, an estimate.
    assert "local: ~239 of 240 uploads left today (estimated from this tool's own requests)" in line


def test_five_quick_changes_make_at_most_two_uploads(project: Project, standin: StandIn) -> None:
    with watching(project, debounce=1.0) as w:  # the default
        assert wait_for(lambda: w.state.deploys == 1), w.lines
        for n in range(5):
            project.write({MAIN: f"module.exports.loop = () => {n};\n"})
            time.sleep(0.1)
        assert wait_for(lambda: main_module(standin) == "module.exports.loop = () => 4;\n"), w.lines
        time.sleep(2.0)  # room for a late extra deploy, which must not come
    assert uploads(standin) <= 2, w.lines


def test_the_hourly_pace_is_honoured_with_the_service_clock(project: Project, standin: StandIn) -> None:
    with watching(project, max_uploads_per_hour=2) as w:
        assert wait_for(lambda: w.state.deploys == 1), w.lines  # created with its modules: no upload spent
        project.write({MAIN: "// one\n"})
        assert wait_for(lambda: uploads(standin) == 1 and w.state.deploys == 2), w.lines
        project.write({MAIN: "// two\n"})
        assert wait_for(lambda: uploads(standin) == 2 and w.state.deploys == 3), w.lines
        project.write({MAIN: "// three\n"})
        assert wait_for(lambda: w.said("pending: src/main.js; 2 upload(s) this hour are spent")), w.lines
        time.sleep(1.0)
        assert uploads(standin) == 2
        assert main_module(standin) == "// two\n"
        standin.clock.advance(3600)
        assert wait_for(lambda: main_module(standin) == "// three\n", 5), w.lines
    assert uploads(standin) == 3


def test_a_server_error_is_reported_and_retried_at_the_next_change(project: Project, standin: StandIn) -> None:
    with watching(project) as w:
        assert wait_for(lambda: w.state.deploys == 1), w.lines
        standin.inject_fault(UPLOAD, "500", count=10)
        project.write({MAIN: "// broken server\n"})
        assert wait_for(lambda: w.said("not deployed:")), w.lines
        assert main_module(standin) == "module.exports.loop = () => {};\n"
        standin.app.faults.clear()
        project.write({MAIN: "// fixed\n"})
        assert wait_for(lambda: main_module(standin) == "// fixed\n"), w.lines


def test_failed_uploads_count_against_the_pace(project: Project, standin: StandIn) -> None:
    # A server that fails every upload: each request sent (the client's own retry included) may have been counted
    # by the server, so each one is spent from the hour's share, and watch stops sending once it is spent.
    with watching(project, max_uploads_per_hour=3) as w:
        assert wait_for(lambda: w.state.deploys == 1), w.lines
        standin.inject_fault(UPLOAD, "500", count=1000)
        for n in range(6):
            failures = sum("not deployed:" in line for line in w.lines)
            project.write({MAIN: f"// attempt {n}\n"})
            assert wait_for(
                lambda: (
                    sum("not deployed:" in line for line in w.lines) > failures  # noqa: B023
                    or w.said("upload(s) this hour are spent")
                )
            ), w.lines
            if w.said("upload(s) this hour are spent"):
                break
        assert w.said("3 upload(s) this hour are spent"), w.lines
        time.sleep(1.0)
        sent = standin.count(UPLOAD)
        # At most the pace, plus the one retry the client makes of an upload it began within the pace.
        assert 3 <= sent <= 3 + 1, w.lines
        assert w.state.uploads == w.state.failed_uploads == sent
        standin.app.faults.clear()
        standin.clock.advance(3600)
        assert wait_for(lambda: main_module(standin) == f"// attempt {n}\n", 10), w.lines
    assert standin.count(UPLOAD) == sent + 1


def test_bad_local_code_waits_for_the_next_change(project: Project, standin: StandIn) -> None:
    with watching(project) as w:
        assert wait_for(lambda: w.state.deploys == 1), w.lines
        project.write({"src/bad.js": b"\xff\xfe not UTF-8"})
        assert wait_for(lambda: w.said("not deployed (src/bad.js)")), w.lines
        project.remove("src/bad.js")
        project.write({MAIN: "// good again\n"})
        assert wait_for(lambda: main_module(standin) == "// good again\n"), w.lines


def test_ctrl_c_stops_the_cli_cleanly(project: Project, standin: StandIn, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    manifest = str(project.root / "gitops.yaml")
    child = subprocess.Popen(
        interruptible_python("-m", "gitops", "watch", "-m", manifest, "--state-dir", str(project.state_dir)),
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with reaped(child):
        assert wait_for(lambda: main_module(standin) is not None, 20)
        time.sleep(0.5)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=15)
    assert child.returncode == 0, err
    assert "Traceback" not in err
    assert "deployed local/main" in out
    assert "Stopped: 1 deploy(s), 0 upload attempt(s)." in out  # the first deploy created the branch with its modules


def test_what_counts_as_a_change(tmp_path: Path) -> None:
    from gitops.app.watch import classify
    from gitops.config.manifest import load_manifest
    from gitops.edges.ignored import IgnoredFiles

    (tmp_path / "gitops.yaml").write_text(
        "version: 1\n"
        "servers: {local: {url: 'http://127.0.0.1:1', token_env: SCREEPS_TOKEN}}\n"
        "branches:\n"
        "  - {server: local, branch: plain, root: dist}\n"
        "  - {server: local, branch: built, root: out, build: 'true'}\n",
        encoding="utf-8",
    )
    loaded = load_manifest(tmp_path / "gitops.yaml")
    ignored = IgnoredFiles(files=frozenset({"notes.log"}), folders=frozenset({"dist", "tmp"}))
    state = tmp_path / "state"

    def kind(rel: str) -> str | None:
        return classify(tmp_path / rel, loaded, ignored, state)

    assert kind("gitops.yaml") == "manifest"
    assert kind("dist/main.js") == "code"  # an ignored root is read whole
    assert kind("out/main.js") is None  # the build's own output
    assert kind("src/main.ts") == "code"  # a source of the build
    assert kind("notes.log") is None
    assert kind("tmp/x.js") is None
    assert kind(".git/index") is None
    assert kind("state/ledger.json") is None
    assert classify(tmp_path.parent / "elsewhere.js", loaded, ignored, state) is None


def test_problems_that_need_the_person_end_the_watch(
    project: Project, standin: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SCREEPS_TOKEN")
    result = project.gitops("watch")
    assert result.code == 7, result.err
    assert "SCREEPS_TOKEN" in result.err
    (project.root / "gitops.yaml").write_text("version: 1\nservers: nope\n", encoding="utf-8")
    result = project.gitops("watch")
    assert result.code == 5, result.err
    assert "Traceback" not in result.err


def test_watch_help_names_the_environment_variables(project: Project) -> None:
    from gitops.cli import run

    assert run(["watch", "--help"]) == 0
    out = project.capsys.readouterr().out
    for name in ("GITOPS_SERVERS", "GITOPS_BRANCHES", "GITOPS_MAX_UPLOADS_PER_HOUR", "GITOPS_DEBOUNCE"):
        assert name in out
