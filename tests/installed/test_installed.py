"""The installed wheel, as a ``pip install``/``pipx install`` user has it: every command ``gitops --help`` lists runs
(``rehearse`` on the real private server included), every data file the wheel records reads through the package,
and the wheel holds what the checkout ships (it is built from the sdist, so the sdist holds it too).

Every command runs the venv's ``gitops`` script from a folder outside this checkout, so nothing of the checkout is
on ``sys.path``; only the harness (this file) imports from it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tarfile
import time
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gitops import __version__
from gitops.cli.extras import INSTALL_HINT
from gitops.cli.help import installed_links
from gitops.edges.locking import file_lock
from gitops.errors import ExitCode
from tests.factories import git
from tests.installed.conftest import ROOT, Installed
from tests.private.harness import install_problem

# The first test also waits for the build and the install (about 45 s on 2 idle cores, more on a busy machine).
pytestmark = pytest.mark.timeout(600)

#: The commands these tests ran, to check against the list ``gitops --help`` prints (the last test).
RAN: set[str] = set()
TOKEN = "0123456789abcdef0123456789abcdef"  # the stand-in's made-up account below, not a secret
INSTALL = Path(os.environ.get("PRIVATE_SERVER_DIR", ROOT / ".private-server"))


def gitops(
    installed: Installed, *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    command = next((a for a in args if not a.startswith("-")), "")
    RAN.add(command)
    return subprocess.run(
        [str(installed.gitops), *args],
        cwd=cwd,
        env=env or installed.env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def ok(done: subprocess.CompletedProcess[str], code: int = 0) -> str:
    assert done.returncode == code, f"{done.args}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr
    return done.stdout


def python(installed: Installed, code: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``code`` run by the installed interpreter, from a folder outside the checkout."""
    return subprocess.run(
        [str(installed.python), "-c", code],
        cwd=cwd or installed.home,
        env=installed.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_tool_that_runs_is_the_wheel_not_the_checkout(installed: Installed) -> None:
    done = python(
        installed, "import gitops, json, sys; print(json.dumps([gitops.__file__, gitops.__version__, sys.path]))"
    )
    assert done.returncode == 0, done.stderr
    where, version, path = json.loads(done.stdout)
    assert Path(where).is_relative_to(installed.venv)
    assert version == __version__
    assert not [p for p in path if p and Path(p).resolve().is_relative_to(ROOT)], path
    assert ok(gitops(installed, "--version", cwd=installed.home)) == f"gitops, version {__version__}\n"


def test_the_wheel_has_the_metadata_of_the_release(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(name).decode("utf-8")
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in archive.namelist())
    assert f"\nVersion: {__version__}\n" in metadata
    assert "\nLicense-Expression: MIT\n" in metadata
    assert "\nProject-URL: Homepage, https://github.com/OWNER/screeps-gitops\n" in metadata
    assert "\nProvides-Extra: serve\n" in metadata
    for package in ("starlette", "uvicorn", "watchfiles"):
        [line] = [ln for ln in metadata.splitlines() if ln.startswith(f"Requires-Dist: {package}")]
        assert line.endswith('; extra == "serve"'), line


def _shipped_from_the_checkout() -> dict[str, Path]:
    """What pyproject.toml says the wheel holds: wheel name -> the checkout's file (packages' modules, package-data)."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    mapped: dict[str, str] = setuptools.get("package-dir", {})
    data: dict[str, list[str]] = setuptools.get("package-data", {})
    shipped: dict[str, Path] = {}
    for package in setuptools["packages"]:
        # The package's folder: its own mapping, or its nearest mapped parent's folder and the rest of its name.
        parent = max((m for m in mapped if package == m or package.startswith(m + ".")), key=len, default="")
        rest = package[len(parent) :].lstrip(".").split(".") if package != parent else []
        folder = ROOT.joinpath(mapped[parent] if parent else "", *(rest if parent else package.split(".")))
        wheel_folder = package.replace(".", "/")
        files = set(folder.glob("*.py")) | {f for pattern in data.get(package, []) for f in folder.glob(pattern)}
        for file in files:
            if file.is_file() and "__pycache__" not in file.parts:
                shipped[f"{wheel_folder}/{file.relative_to(folder).as_posix()}"] = file
    return shipped


def test_the_wheel_built_from_the_sdist_holds_every_file_the_checkout_ships(installed: Installed) -> None:
    shipped = _shipped_from_the_checkout()
    assert "gitops/_privateserver/no_snapshot.js" in shipped
    assert "gitops/_docs/rehearsal.md" in shipped
    with zipfile.ZipFile(installed.wheel) as archive:
        held = {n for n in archive.namelist() if not n.split("/")[0].endswith(".dist-info")}
        for name, file in shipped.items():
            assert archive.read(name) == file.read_bytes(), name
    assert held == set(shipped)
    with tarfile.open(installed.sdist) as sdist:
        top = installed.sdist.name.removesuffix(".tar.gz")
        names = {m.name.removeprefix(top + "/") for m in sdist.getmembers() if m.isfile()}
    assert {f.relative_to(ROOT).as_posix() for f in shipped.values()} <= names
    assert {"pyproject.toml", "README.md", "LICENSE"} <= names
    # The install page names the wheel python -m build writes.
    assert f"./dist/{installed.wheel.name}[serve]" in (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")


#: Run by the installed interpreter: every data file that RECORD lists, read through importlib.resources from its
#: package (as the tool reads it), and its digest compared with RECORD's.
_READ_EVERY_DATA_FILE = """
import base64, csv, hashlib, importlib.metadata, json, sys
from importlib import resources
record = importlib.metadata.distribution("screeps-gitops").read_text("RECORD")
read = []
for name, digest, _ in csv.reader(record.splitlines()):
    folder, _, base = name.rpartition("/")
    if not name.startswith("gitops/") or name.endswith((".py", ".pyc")):
        continue
    data = resources.files(folder.replace("/", ".")).joinpath(base).read_bytes()
    algorithm, _, expected = digest.partition("=")
    got = base64.urlsafe_b64encode(hashlib.new(algorithm, data).digest()).rstrip(b"=").decode()
    assert got == expected, name
    read.append(name)
print(json.dumps(read))
"""


def test_every_data_file_the_wheel_records_reads_through_its_package(installed: Installed) -> None:
    done = python(installed, _READ_EVERY_DATA_FILE)
    assert done.returncode == 0, done.stderr
    read = set(json.loads(done.stdout))
    data = {name for name in _shipped_from_the_checkout() if not name.endswith(".py")}
    assert read == data
    assert {"gitops/standin/page.html", "gitops/_privateserver/package-lock.json", "gitops/py.typed"} <= read


def test_help_prints_every_shipped_page(installed: Installed) -> None:
    listing = ok(gitops(installed, "help", cwd=installed.home))
    topics = re.findall(r"^  ([a-z-]+) ", listing, re.MULTILINE)
    assert "rehearsal" in topics
    assert "exit-codes" in topics
    for topic in topics:
        page = ok(gitops(installed, "help", topic, cwd=installed.home))
        assert page.startswith("# "), topic
    # As the page reads where the tool is installed: its links name help topics or the repository's files.
    layouts = ok(gitops(installed, "help", "layouts", cwd=installed.home))
    assert layouts == installed_links((ROOT / "docs/your-layout.md").read_text(encoding="utf-8")).rstrip("\n") + "\n"


def test_demo_deploys_the_bundled_example_from_an_empty_folder(installed: Installed, tmp_path: Path) -> None:
    out = ok(gitops(installed, "demo", cwd=tmp_path))
    assert "Local stand-in service running at http://127.0.0.1:" in out
    assert "No changes" in out
    assert "main (active: world)" in out
    assert "role/harvester" in out
    assert list(tmp_path.iterdir()) == [], "the demo works in a temporary folder and leaves the current one alone"


def test_the_missing_extra_names_the_packages_to_install(installed: Installed, tmp_path: Path) -> None:
    # The installed tool with the extra's modules hidden, as after an install without [serve].
    hide = (
        "import sys\n"
        "class Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('starlette', 'uvicorn', 'watchfiles'):\n"
        "            raise ModuleNotFoundError(name, name=name)\n"
        "sys.meta_path.insert(0, Hide())\n"
        "from gitops.cli import run\n"
        "raise SystemExit(run(['serve', '--demo']))\n"
    )
    RAN.add("serve")
    done = python(installed, hide, cwd=tmp_path)
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert INSTALL_HINT in " ".join(done.stderr.split())


@pytest.fixture
def standin(installed: Installed, tmp_path: Path) -> Iterator[str]:
    """``gitops serve`` of the installed wheel, with one account, on a free loopback port."""
    accounts = tmp_path / "accounts.yaml"
    accounts.write_text(
        yaml.safe_dump({"users": [{"username": "smoke", "tokens": [{"value": TOKEN, "full": True}]}]}),
        encoding="utf-8",
    )
    RAN.add("serve")
    server = subprocess.Popen(
        [
            str(installed.gitops),
            "serve",
            "--accounts",
            str(accounts),
            "--data",
            str(tmp_path / "data.sqlite3"),
            "--port",
            "0",
        ],
        cwd=tmp_path,
        env=installed.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        match = re.search(r"listening on (http://127\.0\.0\.1:\d+)", first)
        assert match, first
        yield match.group(1)
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=30)  # also closes its pipe
    assert server.returncode == 0


def _bot(folder: Path, main: str) -> Path:
    (folder / "src").mkdir(parents=True, exist_ok=True)
    (folder / "src" / "main.js").write_text(main, encoding="utf-8")
    if not (folder / ".git").exists():
        git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "code")
    return folder


def _main(word: str) -> str:
    return f"module.exports.loop = function () {{ console.log('{word} ' + Game.time); }};\n"


def test_the_deploy_commands_run_against_the_installed_stand_in(
    installed: Installed, standin: str, tmp_path: Path
) -> None:
    repo = _bot(tmp_path / "bot", _main("one"))
    env = installed.env(SCREEPS_TOKEN=TOKEN, GITOPS_STATE_DIR=str(tmp_path / "state"))
    assert "Wrote gitops.yaml" in ok(gitops(installed, "init", "--server", standin, "--branch", "main", cwd=repo))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "manifest")
    assert "is valid" in ok(gitops(installed, "validate", cwd=repo, env=env))
    ok(gitops(installed, "build", cwd=repo, env=env))
    assert "create" in ok(gitops(installed, "plan", cwd=repo, env=env), code=2)
    assert "Applied" in ok(gitops(installed, "apply", "--yes", cwd=repo, env=env))
    _bot(repo, _main("two"))
    ok(gitops(installed, "apply", "--yes", cwd=repo, env=env))
    assert "2 recorded deploy(s)" in ok(gitops(installed, "history", cwd=repo, env=env))
    assert "No drift" in ok(gitops(installed, "drift", cwd=repo, env=env))
    assert "Applied" in ok(gitops(installed, "rollback", "--to", "1", "--yes", cwd=repo, env=env))
    assert "local/main" in ok(gitops(installed, "status", cwd=repo, env=env))
    assert "1 would update" in ok(gitops(installed, "pull", "--dry-run", cwd=repo, env=env))
    assert "full access" in ok(gitops(installed, "token", cwd=repo, env=env))
    assert "noratelimit" in ok(gitops(installed, "unlock", cwd=repo, env=env))
    ok(gitops(installed, "console", "--seconds", "1", cwd=repo, env=env))
    assert '"$schema"' in ok(gitops(installed, "schema", cwd=repo, env=env))
    _action_plan(installed, repo, tmp_path)
    _gitlab_plan(installed, repo, tmp_path)
    _watch_deploys_a_change(installed, repo, env, tmp_path / "state")


def _action_plan(installed: Installed, repo: Path, tmp_path: Path) -> None:
    outputs = tmp_path / "github-output"
    env = installed.env(
        GITOPS_STATE_DIR=str(tmp_path / "state"),
        GITOPS_ACTION_CREDENTIALS=f"SCREEPS_TOKEN={TOKEN}",
        GITOPS_ACTION_COMMAND="plan",
        GITOPS_MANIFEST="gitops.yaml",
        GITOPS_ACTION_COMMENT="false",
        GITHUB_OUTPUT=str(outputs),
        GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"),
    )
    ok(gitops(installed, "action", cwd=repo, env=env))
    assert re.search(r"exit-code<<(\S+)\n2\n\1\n", outputs.read_text(encoding="utf-8"))  # the rollback's change


def _gitlab_plan(installed: Installed, repo: Path, tmp_path: Path) -> None:
    outputs = tmp_path / "gitlab.env"
    env = installed.env(
        GITOPS_STATE_DIR=str(tmp_path / "state"),
        SCREEPS_TOKEN=TOKEN,
        CI_PIPELINE_SOURCE="push",
        GITOPS_COMMAND="plan",
        GITOPS_OUTPUT_FILE=str(outputs),
    )
    ok(gitops(installed, "gitlab", cwd=repo, env=env))
    assert "GITOPS_EXIT_CODE=2\n" in outputs.read_text(encoding="utf-8")  # the rollback's change, as the Action's


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for_the_ledgers(state: Path) -> None:
    """Until no run holds a ledger of ``state``: watch prints a deploy's line before its session has closed, and a
    Ctrl-C during that close ends it as an interrupted deploy (exit 130), not the idle stop this test checks."""
    for lock_path in state.rglob("*.lock"):
        lock = file_lock(lock_path)
        lock.acquire(timeout=30)
        lock.release()


def _watch_deploys_a_change(installed: Installed, repo: Path, env: dict[str, str], state: Path) -> None:
    RAN.add("watch")
    watch = subprocess.Popen(
        [str(installed.gitops), "watch", "--debounce", "0.3"],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as at a terminal: a suite started in the background of a non-interactive shell passes SIGINT on
        # ignored, and Python then never raises KeyboardInterrupt (seen: a fresh clone's run waited 30 s for it).
        preexec_fn=_interruptible,  # noqa: PLW1509 (a signal disposition, set in the child before exec)
    )
    try:
        assert watch.stdout is not None
        assert watch.stdout.readline().startswith("Watching ")
        assert "deployed local/main (start of watch)" in watch.stdout.readline()
        time.sleep(0.5)
        (repo / "src" / "main.js").write_text(_main("three"), encoding="utf-8")
        assert "deployed local/main (src/main.js)" in watch.stdout.readline()
        _wait_for_the_ledgers(state)
    finally:
        watch.send_signal(signal.SIGINT)
        try:
            _, err = watch.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            watch.kill()
            _, err = watch.communicate()
            pytest.fail(f"gitops watch did not stop within 60 s of Ctrl-C; its stderr:\n{err[-3000:]}")
    assert "Traceback" not in err
    assert watch.returncode == 0, err  # Ctrl-C is how watch ends


_HEALTHY = """\
module.exports.loop = function () {
    if (!Game.spawns.Spawn1) throw new Error('no spawn of its own');
    Memory.seen = (Memory.seen || 0) + 1;
};
"""


def test_rehearse_runs_a_bot_on_the_installed_private_server(installed: Installed, tmp_path: Path) -> None:
    problem = install_problem()
    if problem:
        pytest.fail(problem, pytrace=False)
    repo = _bot(tmp_path / "bot", _HEALTHY)
    manifest = {
        "version": 1,
        "servers": {"live": {"url": "http://127.0.0.1:9", "token_env": "SCREEPS_TOKEN"}},
        "branches": [{"server": "live", "branch": "main", "root": "src", "include": ["*.js"]}],
    }
    (repo / "gitops.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    env = installed.env(GITOPS_STATE_DIR=str(tmp_path / "state"), TMPDIR=str(tmp_path))
    done = gitops(installed, "rehearse", "--ticks", "3", "--server-dir", str(INSTALL), "--json", cwd=repo, env=env)
    report = json.loads(ok(done))
    assert report["result"] == "healthy", report


def test_every_command_that_help_lists_ran_from_the_installed_wheel(installed: Installed) -> None:
    # Last in this file: the tests above record the commands they run.
    listing = ok(gitops(installed, "--help", cwd=installed.home))
    commands = set(re.findall(r"^  ([a-z]+)  ", listing.split("Commands:")[1], re.MULTILINE))
    assert len(commands) >= 19
    assert commands - RAN == set()
