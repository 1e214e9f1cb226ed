"""How a build runs (issue 46 "Builds behave", issue 48 "Fresh checkouts build"): a fresh checkout installs the
packages its lockfile names, a build that watches is refused, every build has a timeout and says it still runs,
a failed build's output is shown once and neutralised, and its hint names a file or folder that exists.

The npm projects are real: ``npm ci`` installs a local ``file:`` package (no network), whose program the build runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from gitops.app import rehearsal
from gitops.cli import run
from gitops.config.manifest import load_manifest
from gitops.config.model import Manifest
from gitops.edges import build, depinstall
from gitops.errors import ExitCode, SourceError
from tests.cli.test_bots import _ended
from tests.factories import git

NPM = shutil.which("npm")
needs_npm = pytest.mark.skipif(NPM is None, reason="npm is not installed")

MANIFEST = """version: 1
servers: {local: {url: 'http://127.0.0.1:9', token_env: SCREEPS_TOKEN}}
build: npm run build
branches: [{server: local, branch: main, root: dist}]
"""

#: The tiny bundler the bot's package.json names as a local package: it writes dist/main.js, in colour.
BUNDLER = """#!/usr/bin/env node
const fs = require("fs");
fs.mkdirSync("dist", {recursive: true});
fs.writeFileSync("dist/main.js", "module.exports.loop = function () {};\\n");
console.log("\\x1b[32mbundled\\x1b[39m dist/main.js");
"""


def npm_bot(root: Path, *, manifest: str = MANIFEST, lockfile: bool = True) -> Path:
    """A committed npm project whose build (``npm run build``) runs a program of a local package, with its
    lockfile committed (``lockfile``) and no ``node_modules`` left (a fresh clone)."""
    (root / "tools/bundler").mkdir(parents=True)
    package = {
        "name": "bot",
        "version": "1.0.0",
        "private": True,
        "scripts": {"build": "bundler"},
        "devDependencies": {"bundler": "file:./tools/bundler"},
    }
    (root / "package.json").write_text(json.dumps(package))
    (root / "tools/bundler/package.json").write_text('{"name": "bundler", "version": "1.0.0", "bin": "cli.js"}')
    (root / "tools/bundler/cli.js").write_text(BUNDLER)
    (root / "tools/bundler/cli.js").chmod(0o755)
    (root / ".gitignore").write_text("node_modules/\ndist/\n")
    (root / "gitops.yaml").write_text(manifest)
    git(root, "init", "-q")
    if lockfile:
        assert NPM is not None
        subprocess.run(
            [NPM, "install", "--offline", "--no-audit", "--no-fund"], cwd=root, check=True, capture_output=True
        )
        shutil.rmtree(root / "node_modules")
        assert (root / "package-lock.json").is_file()
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "bot")
    return root


def gitops(
    capsys: pytest.CaptureFixture[str], root: Path, *args: str, command: str = "validate"
) -> tuple[int, str, str]:
    capsys.readouterr()
    code = run([command, *args, "-m", str(root / "gitops.yaml")])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- a fresh checkout installs its packages ----------------------------------------------------------------------


@needs_npm
def test_a_ref_checkout_installs_from_the_lockfile_and_builds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], temp_root: Path
) -> None:
    root = npm_bot(tmp_path / "bot")
    code, out, err = gitops(capsys, root, "--ref", "HEAD", "--list")
    assert code == 0, err
    assert "install: no node_modules there: the packages are installed first, from package-lock.json" in err
    assert "install: npm ci --no-audit --no-fund (in a temporary checkout of HEAD" in err
    assert "build: npm run build (in a temporary checkout of HEAD" in err
    assert "dist/main.js" in out
    assert not (root / "node_modules").exists()  # the working tree is not touched
    assert list(temp_root.iterdir()) == []


@needs_npm
def test_the_working_tree_of_a_fresh_clone_installs_before_gitops_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GitHub Action's build job: a fresh checkout, `gitops build` in its working tree."""
    root = npm_bot(tmp_path / "bot")
    monkeypatch.setenv("GITOPS_CACHE_DIR", str(tmp_path / "cache"))
    code, _, err = gitops(capsys, root, command="build")
    assert code == 0, err
    assert "install: npm ci --no-audit --no-fund" in err
    assert (root / "node_modules/.bin/bundler").exists()
    assert (root / "dist/main.js").is_file()
    # Installed now: the next build neither installs nor builds again (its inputs are unchanged).
    code, _, err = gitops(capsys, root, command="build")
    assert code == 0, err
    assert "install:" not in err
    assert "reused the output" in err


@needs_npm
def test_without_a_lockfile_it_installs_with_a_warning_and_writes_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = npm_bot(tmp_path / "bot", lockfile=False)
    code, _, err = gitops(capsys, root, "--ref", "HEAD")
    assert code == 0, err
    assert "has no lockfile beside it (package-lock.json, yarn.lock or pnpm-lock.yaml)" in err
    assert "install: npm install --no-package-lock" in err
    assert not (root / "package-lock.json").exists()


@needs_npm
def test_install_never_leaves_it_to_the_build_and_the_hint_names_the_working_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], temp_root: Path
) -> None:
    root = npm_bot(tmp_path / "bot", manifest=MANIFEST + "install: never\n")
    code, _, err = gitops(capsys, root, "--ref", "HEAD")
    assert code == ExitCode.LOCAL_CODE, err
    assert "\ninstall: " not in err
    assert "bundler: not found" in err
    hint = err.split("Error: the build command", 1)[1]
    assert "npm ci installs them from package-lock.json" in hint
    assert str(root) in hint
    assert str(temp_root) not in hint  # never the checkout, which is gone
    assert list(temp_root.iterdir()) == []


@needs_npm
def test_an_install_command_of_the_manifest_runs_instead(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = npm_bot(tmp_path / "bot", manifest=MANIFEST + "install: [npm, ci, --offline, --no-audit]\n")
    code, _, err = gitops(capsys, root, "--ref", "HEAD")
    assert code == 0, err
    assert "install: npm ci --offline --no-audit (in a temporary checkout" in err


@needs_npm
def test_a_build_that_installs_itself_gets_no_install_before_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = npm_bot(tmp_path / "bot", manifest=MANIFEST.replace("npm run build", "npm ci --no-audit && npm run build"))
    code, _, err = gitops(capsys, root, "--ref", "HEAD")
    assert code == 0, err
    assert "install:" not in err
    assert err.count("added 1 package") == 1


def test_a_project_without_dependencies_installs_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "bot"
    root.mkdir()
    (root / "package.json").write_text('{"name": "bot", "scripts": {"build": "mkdir -p dist && cp main.js dist/"}}')
    (root / "main.js").write_text("module.exports.loop = () => {};\n")
    (root / "gitops.yaml").write_text(MANIFEST)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "bot")
    code, _, err = gitops(capsys, root, "--ref", "HEAD")
    assert code == 0, err
    assert "install:" not in err


# --- a build that watches, a build that does not end ------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "flag"),
    [("rollup -cw", "-cw (rollup"), ("rollup -c -w", "-w (rollup"), ("tsc -w -p .", "-w (tsc")],
)
def test_a_build_whose_script_watches_is_refused_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], script: str, flag: str
) -> None:
    root = tmp_path / "bot"
    root.mkdir()
    started = tmp_path / "started"
    scripts = {"build": f"touch {started} && {script}"}
    (root / "package.json").write_text(json.dumps({"name": "bot", "scripts": scripts}))
    (root / "gitops.yaml").write_text(MANIFEST)
    code, _, err = gitops(capsys, root)
    assert code == ExitCode.LOCAL_CODE, err
    assert f"the build command 'npm run build' watches for changes: {flag}, in the package script 'build')" in err
    assert "so it would never end" in err
    assert not started.exists()


def test_a_build_that_outlives_its_timeout_is_stopped_with_its_processes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "bot"
    root.mkdir()
    pids = tmp_path / "pids"
    # A shell that starts a child of its own: both are ended (the build's whole process group).
    command = f"sleep 60 & echo $! > {pids}; echo $$ >> {pids}; wait"
    (root / "gitops.yaml").write_text(MANIFEST.replace("npm run build", json.dumps(command)) + "build_timeout: 2\n")
    began = time.monotonic()
    code, _, err = gitops(capsys, root)
    assert code == ExitCode.LOCAL_CODE, err
    assert time.monotonic() - began < 20
    assert "was still running after 2 s, and was stopped with its processes" in err
    assert "raise build_timeout in the manifest" in err
    for pid in pids.read_text().split():
        assert _ended(int(pid)), f"process {pid} of the build is still running"


def test_the_timeout_has_a_default_and_a_bound(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "bot"
    root.mkdir()
    (root / "gitops.yaml").write_text(MANIFEST + "build_timeout: 0\n")
    code, _, err = gitops(capsys, root)
    assert code == ExitCode.MANIFEST
    assert "build_timeout" in err
    assert Manifest.__dataclass_fields__["build_timeout"].default == 600


def test_a_silent_build_says_it_still_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(build, "SILENT_EVERY", 0.5)
    build.run_build(["sh", "-c", "echo begun; sleep 2.5; echo done"], tmp_path, env=dict(os.environ), timeout=30)
    err = capsys.readouterr().err
    assert "begun\n" in err
    assert "build: sh -c 'echo begun; sleep 2.5; echo done' still running, " in err
    assert "s so far (stopped at 30 s: build_timeout)" in err
    assert err.index("\nbegun\n") < err.index("still running") < err.index("\ndone\n")


# --- a failed build: its output once, neutralised; hints that name what exists -----------------------------------


def test_a_failed_build_is_shown_once_and_neutralised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "bot"
    root.mkdir()
    printed = r"printf '\033[31mTS2304: cannot find name\033[0m\n\033]0;title\007\n::warning::forged\n'; exit 2"
    (root / "fails.sh").write_text(printed)
    (root / "gitops.yaml").write_text(MANIFEST.replace("npm run build", "sh fails.sh"))
    code, _, err = gitops(capsys, root)
    assert code == ExitCode.LOCAL_CODE
    assert err.count("TS2304: cannot find name") == 1
    assert "\nTS2304: cannot find name\n" in err  # the colours dropped, not shown as text
    assert "\x1b" not in err
    assert "\x07" not in err
    assert "\\u001b]0;title\\u0007" in err  # any other escape is shown, inert
    assert "\n\\::warning::forged" in err  # not a workflow command
    assert "failed with exit code 2 (its output is above)" in err


def test_a_git_ignored_file_the_build_reads_is_named_in_the_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], temp_root: Path
) -> None:
    root = tmp_path / "bot"
    root.mkdir()
    (root / "Gruntfile.js").write_text("const config = require('./.screeps.json');\n")
    (root / ".screeps.json").write_text('{"branch": "main"}')
    (root / ".gitignore").write_text(".screeps.json\n")
    (root / "gitops.yaml").write_text(MANIFEST.replace("npm run build", "node Gruntfile.js"))
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "bot")
    code, _, err = gitops(capsys, root, "--ref", "HEAD")
    assert code == ExitCode.LOCAL_CODE, err
    hint = err.split("Error: the build command", 1)[1]
    assert "The build reads .screeps.json, which Git ignores: it is in " + str(root) in hint
    assert "npm ci" not in hint
    assert str(temp_root) not in hint


def test_the_hint_names_a_tool_missing_from_package_json(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text('{"name": "bot", "devDependencies": {"typescript": "5"}}')
    with pytest.raises(SourceError) as raised:
        build.run_build("echo 'sh: 1: rollup: not found'; exit 127", tmp_path, env=dict(os.environ))
    assert raised.value.hint is not None
    assert f"rollup is not among the dependencies of {tmp_path / 'package.json'}" in raised.value.hint


# --- which install, where ---------------------------------------------------------------------------------------


def _package(folder: Path, lockfile: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text('{"name": "bot", "devDependencies": {"rollup": "^4"}}')
    if lockfile is not None:
        (folder / lockfile).write_text("")
    return folder


def test_the_lockfile_decides_the_install(tmp_path: Path) -> None:
    yarn = _package(tmp_path / "yarn", "yarn.lock")
    (yarn / ".git").mkdir()
    found = depinstall.needed(yarn, "auto", ["yarn build"])
    assert found is not None
    assert (found.command, found.folder, found.lockfile) == (
        ["yarn", "install", "--frozen-lockfile"],
        yarn,
        "yarn.lock",
    )
    (yarn / ".yarnrc.yml").write_text("nodeLinker: node-modules\n")
    berry = depinstall.needed(yarn, "auto", ["yarn build"])
    assert berry is not None
    assert berry.command == ["yarn", "install", "--immutable"]
    pnpm = _package(tmp_path / "pnpm", "pnpm-lock.yaml")
    assert getattr(depinstall.needed(pnpm, "auto", ["pnpm build"]), "command", None) == [
        "pnpm",
        "install",
        "--frozen-lockfile",
    ]
    assert depinstall.needed(pnpm, "never", ["pnpm build"]) is None
    custom = depinstall.needed(pnpm, "pnpm install --offline", ["pnpm build"])
    assert custom is not None
    assert (custom.command, custom.folder) == ("pnpm install --offline", pnpm)
    (pnpm / "node_modules").mkdir()
    assert depinstall.needed(pnpm, "auto", ["pnpm build"]) is None


def test_a_workspace_installs_at_the_lockfile_above_the_manifest(tmp_path: Path) -> None:
    top = _package(tmp_path / "mono", "package-lock.json")
    (top / ".git").mkdir()
    bot = _package(top / "packages" / "bot")
    found = depinstall.needed(bot, "auto", ["npm run build"])
    assert found is not None
    assert (found.folder, found.lockfile) == (top, "package-lock.json")
    (top / "node_modules").mkdir()  # hoisted: the workspace is installed
    assert depinstall.needed(bot, "auto", ["npm run build"]) is None


def test_a_package_manager_that_is_not_installed_is_named(tmp_path: Path) -> None:
    folder = _package(tmp_path / "bot", "pnpm-lock.yaml")
    empty = tmp_path / "no-programs"
    empty.mkdir()
    with pytest.raises(SourceError) as raised:
        depinstall.install_first(folder, "auto", ["pnpm build"], env={"PATH": str(empty)}, timeout=30)
    assert "the install command 'pnpm install --frozen-lockfile' cannot start" in raised.value.message
    assert raised.value.hint is not None
    assert "The lockfile asks for pnpm, which is not installed here" in raised.value.hint
    assert "corepack enable" in raised.value.hint


def test_a_build_that_runs_no_node_tooling_gets_no_install(tmp_path: Path) -> None:
    """A Rust bot with a package.json of tooling beside it: cargo needs no node_modules (nor npm on the runner)."""
    folder = _package(tmp_path / "bot", "package-lock.json")
    assert depinstall.needed(folder, "auto", ["cargo build --release"]) is None
    assert depinstall.needed(folder, "auto", ["cargo build --release", "npx rollup -c"]) is not None
    assert depinstall.needed(folder, "npm ci --omit=dev", ["cargo build --release"]) is not None  # asked for


@needs_npm
def test_the_rehearsals_base_checkout_installs_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, temp_root: Path
) -> None:
    """`gitops rehearse --base` builds the base in a fresh checkout (issue 48, point 5: "rollup: not found")."""
    root = npm_bot(tmp_path / "bot")
    monkeypatch.setenv("GITOPS_CACHE_DIR", str(tmp_path / "cache"))
    base = rehearsal._read_base(load_manifest(root / "gitops.yaml"), "HEAD", dict(os.environ))
    assert [m.name for m in base.branches[0].code] == ["main"]
    assert "install: npm ci --no-audit --no-fund (in a temporary checkout of HEAD" in capsys.readouterr().err
    assert list(temp_root.iterdir()) == []
