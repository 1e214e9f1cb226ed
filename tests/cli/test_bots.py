"""Real bot layouts (issue 13): the examples, validated and deployed to the stand-in as a player would.

TypeScript (a build into git-ignored ``dist/`` with a source map, also with ``--ref``), a classic flat bot
(``node_modules/`` and ``Gruntfile.js`` present and left out), a Rust/wasm bot (a loader and a binary module named
without suffix), the require check on a deleted module and a switched separator, and the README's first manifest.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from gitops.cli import run
from gitops.standin.testing import ALICE, FULL_TOKEN, StandIn
from tests.factories import git, interruptible_python, reaped
from tests.project import Project, Result

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
WASM_ADD = (EXAMPLES / "rust-wasm/pkg/mybot_bg.wasm").read_bytes()


def from_example(
    name: str, tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    """A project holding a copy of ``examples/<name>``, its manifest pointed at the stand-in, committed."""
    p = Project(tmp_path / name, standin, capsys, monkeypatch)
    shutil.copytree(EXAMPLES / name, p.root, dirs_exist_ok=True, ignore=shutil.ignore_patterns("dist", "node_modules"))
    manifest = p.root / "gitops.yaml"
    manifest.write_text(manifest.read_text().replace("http://127.0.0.1:21025", standin.url))
    p.commit("the example")
    return p


def validate(p: Project, *args: str) -> Result:
    """``gitops validate`` in the project (it takes no --state-dir)."""
    p.capsys.readouterr()
    code = run(["validate", *args, "-m", str(p.root / "gitops.yaml")])
    captured = p.capsys.readouterr()
    return Result(code, captured.out, captured.err)


def worktrees(repo: Path) -> list[str]:
    return [line for line in git(repo, "worktree", "list", "--porcelain").splitlines() if line.startswith("worktree ")]


# --- TypeScript: a build into git-ignored dist/, a wrapped source map -----------------------------------------------


def test_typescript_example_builds_and_deploys_a_wrapped_source_map(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = from_example("typescript", tmp_path, standin, capsys, monkeypatch)
    listed = validate(p, "--list")
    assert listed.code == 0, listed.err
    assert "build: node build.mjs" in listed.err
    assert "built dist/main.js" in listed.err  # the build's output is streamed to stderr
    assert re.search(r"^    main\s+text\s+.*dist/main\.js$", listed.out, re.M), listed.out
    assert re.search(r"^    main\.js\.map\s+source map\s+.*dist/main\.js\.map$", listed.out, re.M), listed.out

    result = p.apply("--yes")
    assert result.code == 0, result.err
    modules = standin.branch_modules(ALICE, "main")
    assert modules is not None
    assert set(modules) == {"main", "main.js.map"}
    wrapped = modules["main.js.map"]
    assert isinstance(wrapped, str)
    assert wrapped.startswith("module.exports = {")
    assert wrapped.endswith("};")  # rollup-plugin-screeps' bytes: no newline at the end
    source_map = json.loads(wrapped[len("module.exports = ") : -1])
    assert source_map["version"] == 3
    assert source_map["file"] == "main.js"
    assert "require(" not in str(modules["main"])  # bundled output passes the require check untouched


def test_typescript_example_with_ref_builds_that_commit_in_a_temporary_worktree(
    tmp_path: Path,
    standin: StandIn,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    temp_root: Path,
) -> None:
    p = from_example("typescript", tmp_path, standin, capsys, monkeypatch)
    committed = git(p.root, "rev-parse", "HEAD").strip()
    # Uncommitted work in the working tree must not reach the server, and the working tree is left as it is.
    main_ts = p.root / "src/main.ts"
    main_ts.write_text(main_ts.read_text().replace("runHarvester(", "uncommitted(") + "\n")

    result = p.apply("--yes", "--ref", "HEAD")
    assert result.code == 0, result.err
    assert f"temporary checkout of HEAD, commit {committed[:12]}" in result.err
    modules = standin.branch_modules(ALICE, "main")
    assert modules is not None
    assert "runHarvester(Game.creeps[name])" in str(modules["main"])
    assert "uncommitted" not in str(modules["main"])
    assert not (p.root / "dist").exists()  # built in the checkout, not here
    assert "uncommitted(" in main_ts.read_text()
    assert worktrees(p.root) == [f"worktree {p.root}"]
    assert list(temp_root.iterdir()) == []


def test_ref_with_an_uncommitted_build_output_root_needs_the_build_key(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = from_example("typescript", tmp_path, standin, capsys, monkeypatch)
    assert validate(p, "--ref", "HEAD").code == 0
    # Without the build key, --ref reads the commit, which has no dist/: the old advice, and still true then.
    manifest = p.root / "gitops.yaml"
    manifest.write_text(manifest.read_text().replace("build: node build.mjs", ""))
    result = validate(p, "--ref", "HEAD")
    assert result.code == 6
    assert "'dist' does not exist in commit" in result.err


def test_a_failing_build_stops_with_exit_6_and_its_code_and_removes_the_checkout(
    tmp_path: Path,
    standin: StandIn,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    temp_root: Path,
) -> None:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": "module.exports.loop = () => {};\n"})
    p.manifest(
        [{"branch": "main", "root": "src", "build": "echo compiling; echo 'TS2304: cannot find name' >&2; exit 3"}]
    )
    p.commit()
    for args in ((), ("--ref", "HEAD")):
        result = validate(p, *args)
        assert result.code == 6, result.err
        assert "the build command \"echo compiling; echo 'TS2304: cannot find name' >&2; exit 3\" failed" in result.err
        assert "exit code 3" in result.err
        # Its output, shown as it came, once: the error points to it rather than repeating it.
        assert result.err.splitlines().count("TS2304: cannot find name") == 1
        assert "    | " not in result.err
        assert "compiling\nTS2304: cannot find name\n" in result.err
        assert "(its output is above)" in result.err
        assert worktrees(p.root) == [f"worktree {p.root}"]
        assert list(temp_root.iterdir()) == []
    argv = p.manifest([{"branch": "main", "root": "src", "build": ["no-such-program-for-gitops"]}])
    assert argv.exists()
    result = validate(p)
    assert result.code == 6
    assert "the build command 'no-such-program-for-gitops' cannot start" in result.err


def test_branches_sharing_a_build_command_run_it_once(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({".gitignore": "out/\nruns.txt\n", "src/x.js": ""})
    build = "echo run >> runs.txt && mkdir -p out && echo 'module.exports.loop = () => {};' > out/main.js"
    p.manifest(
        [
            {"branch": "main", "root": "out"},
            {"branch": "sim", "root": "out", "build": build},
        ],
        build=build,
    )
    p.commit()
    result = validate(p)
    assert result.code == 0, result.err
    assert (p.root / "runs.txt").read_text() == "run\n"


def test_a_build_never_sees_the_credentials(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build command is the repository's code (a pull request's, in the Action's plan): it runs without the
    token the manifest names and without the Action's secret inputs, yet with the rest of the environment."""
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    monkeypatch.setenv("GITOPS_ACTION_TOKEN", FULL_TOKEN)
    monkeypatch.setenv("SCREEPS_DEPLOY_KEY", FULL_TOKEN)
    monkeypatch.setenv("GITOPS_BUILD_PROBE", "visible")
    p.write({".gitignore": "out/\n", "src/x.js": ""})
    build = (
        "mkdir -p out && echo 'module.exports.loop = () => {};' > out/main.js && "
        'echo "token=${SCREEPS_TOKEN:-absent} action=${GITOPS_ACTION_TOKEN:-absent} '
        'named=${SCREEPS_DEPLOY_KEY:-absent} probe=${GITOPS_BUILD_PROBE:-absent}" > out/seen.txt'
    )
    path = p.manifest([{"branch": "main", "root": "out", "include": ["*.js"]}], build=build)
    # The manifest names a second variable for the same server's token: that one is withheld too.
    path.write_text(path.read_text().replace("token_env: SCREEPS_TOKEN", "token_env: SCREEPS_DEPLOY_KEY"))
    p.commit()
    result = p.plan()
    assert result.code == 2, result.err
    assert (p.root / "out/seen.txt").read_text() == "token=absent action=absent named=absent probe=visible\n"


@pytest.mark.skipif(os.name == "nt", reason="POSIX signals")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_build_leaves_no_checkout_and_no_process(tmp_path: Path, signum: int) -> None:
    repo = tmp_path / "bot"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "src").mkdir()
    (repo / "src/main.js").write_text("module.exports.loop = () => {};\n")
    started = tmp_path / "started"
    (repo / "gitops.yaml").write_text(
        "version: 1\nservers: {local: {url: 'http://127.0.0.1:9', token_env: SCREEPS_TOKEN}}\n"
        f"build: 'echo $$ > {started}; sleep 60'\n"
        "branches: [{server: local, branch: main, root: src}]\n"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "bot")
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp), "NO_COLOR": "1"}
    proc = subprocess.Popen(
        interruptible_python("-m", "gitops", "validate", "--ref", "HEAD", "-m", str(repo / "gitops.yaml")),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    with reaped(proc):
        deadline = time.monotonic() + 30
        while not (started.exists() and started.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), "the build did not start"
        build_pid = int(started.read_text())
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err.decode()
    assert b"interrupted" in err
    assert worktrees(repo) == [f"worktree {repo}"]
    assert list(temp.iterdir()) == []
    assert _ended(build_pid), f"the build's shell (pid {build_pid}) is still running"


@pytest.mark.skipif(os.name == "nt", reason="POSIX signals")
def test_an_interrupt_while_the_build_starts_still_ends_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGTERM that lands once the build's process exists but before Popen has returned (a loaded machine)."""
    from gitops.edges import build

    spawned: list[int] = []
    real_popen = subprocess.Popen

    def spawn_then_interrupted(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        proc: subprocess.Popen[bytes] = real_popen(*args, **kwargs)  # type: ignore[call-overload]
        spawned.append(proc.pid)
        os.kill(os.getpid(), signal.SIGTERM)
        return proc

    monkeypatch.setattr(subprocess, "Popen", spawn_then_interrupted)
    with pytest.raises(KeyboardInterrupt), build.interrupts_as_keyboard():
        build.run_build(["sleep", "60"], tmp_path, env=dict(os.environ))
    monkeypatch.undo()
    assert len(spawned) == 1
    assert _ended(spawned[0]), f"the build (pid {spawned[0]}) is still running"


def _ended(pid: int, within: float = 5.0) -> bool:
    """Whether process ``pid`` has ended: it is gone, or a zombie (dead, waiting for whoever adopted it to reap it,
    which a loaded machine's init does a moment later). Asked for up to ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            state = ""
        if state == "Z":
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


# --- a classic flat bot: node_modules/ and Gruntfile.js left out; the require check ------------------------------


def test_classic_example_leaves_out_node_modules_and_the_gruntfile(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = from_example("classic", tmp_path, standin, capsys, monkeypatch)
    # What `npm install` leaves: never committed (the example ignores it), never modules.
    p.write({f"node_modules/grunt/lib/part{n}.js": "module.exports = {};\n" for n in range(50)})
    p.write({"node_modules/grunt-screeps/index.js": "require('https');\n", "debug.log.js": ""})
    manifest = p.root / "gitops.yaml"
    manifest.write_text(manifest.read_text().replace('["*.js"]', '["**/*.js"]'))
    (p.root / ".gitignore").write_text("node_modules/\n*.log.js\n")
    listed = validate(p, "--list")
    assert listed.code == 0, listed.err
    names = re.findall(r"^    (\S+)\s+text\s", listed.out, re.M)
    assert names == ["main", "role.harvester", "role.upgrader"]
    assert "node_modules" not in listed.out
    assert "Gruntfile" not in listed.out

    result = p.apply("--yes")
    assert result.code == 0, result.err
    modules = standin.branch_modules(ALICE, "main")
    assert modules is not None
    assert sorted(modules) == ["main", "role.harvester", "role.upgrader"]


def test_deleting_a_required_module_is_refused_before_any_upload(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = from_example("classic", tmp_path, standin, capsys, monkeypatch)
    assert p.apply("--yes").code == 0
    uploads = standin.count("POST /api/user/code")
    p.remove("role.upgrader.js")
    result = p.plan()
    assert result.code == 6
    assert "main.js:2: require('role.upgrader') names a module the branch will not hold" in result.err
    assert p.apply("--yes").code == 6
    assert standin.count("POST /api/user/code") == uploads

    # On purpose: an optional module listed under requires.ignore.
    manifest = p.root / "gitops.yaml"
    manifest.write_text(manifest.read_text() + "    requires: {ignore: [role.upgrader]}\n")
    assert p.plan().code == 2


def test_switching_the_separator_is_refused_with_a_hint(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write(
        {
            "src/main.js": "const h = require('role/harvester');\nmodule.exports.loop = () => h.run();\n",
            "src/role/harvester.js": "module.exports.run = () => {};\n",
        }
    )
    p.manifest([{"branch": "main", "root": "src", "naming": {"separator": "."}}])
    p.commit()
    result = p.plan()
    assert result.code == 6
    assert (
        "src/main.js:1: require('role/harvester') names a module the branch will not hold; the branch has "
        "'role.harvester' (naming.separator is '.')"
    ) in result.err


# --- a Rust/wasm bot: the binary module named without its suffix ----------------------------------------------------


def test_rust_wasm_example_deploys_the_binary_module_without_suffix(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = from_example("rust-wasm", tmp_path, standin, capsys, monkeypatch)
    listed = validate(p, "--list")
    assert listed.code == 0, listed.err
    assert re.search(r"^    mybot_bg\s+binary\s+.*pkg/mybot_bg\.wasm$", listed.out, re.M), listed.out
    assert p.apply("--yes").code == 0
    modules = standin.branch_modules(ALICE, "main")
    assert modules is not None
    assert sorted(modules) == ["main", "mybot_bg"]
    assert modules["mybot_bg"] == {"binary": base64.b64encode(WASM_ADD).decode("ascii")}


# --- source map options and files the game could not run -------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "expected"),
    [("wrap", 'module.exports = {"version":3};'), ("raw", '{"version":3}\n'), ("omit", None)],
)
def test_source_map_options(
    tmp_path: Path,
    standin: StandIn,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    option: str,
    expected: str | None,
) -> None:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": "module.exports.loop = () => {};\n", "src/main.js.map": '{"version":3}\n'})
    p.manifest([{"branch": "main", "root": "src", "include": ["*.js", "*.map"], "source_maps": option}])
    p.commit()
    assert p.apply("--yes").code == 0
    modules = standin.branch_modules(ALICE, "main")
    assert modules is not None
    assert modules.get("main.js.map") == expected


def test_a_file_that_is_not_javascript_nor_binary_is_refused(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": "", "src/rooms.json": "{}", "src/broken.js.map": "not json"})
    p.manifest([{"branch": "main", "root": "src", "include": ["*"]}])
    p.commit()
    result = validate(p)
    assert result.code == 6
    assert "src/rooms.json is not JavaScript (.js, .cjs, .mjs or a suffix of naming.strip_suffixes)" in result.err
    assert "src/broken.js.map is not valid JSON" in result.err


# --- the README leads with a manifest a plain JavaScript bot can copy --------------------------------------------


def test_the_readme_first_manifest_validates_for_a_plain_javascript_bot(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## The manifest") :]
    first = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert first is not None
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": "const h = require('role/harvester');\n", "src/role/harvester.js": ""})
    (p.root / "gitops.yaml").write_text(first.group(1))
    p.commit()
    result = validate(p)
    assert result.code == 0, result.err
