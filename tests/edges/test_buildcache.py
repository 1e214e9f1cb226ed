"""A build runs once per state of its inputs (issue 41): validate, plan and apply reuse the last build's output when
what the build reads and what it wrote are unchanged, and say so; anything else builds again.

Real git repositories, a real build command (through ``sh -c``) that counts its runs in a file outside the
repository, and the real CLI in-process.
"""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import pytest
import yaml

from gitops.cli import run
from gitops.edges.buildcache import REBUILD_VARIABLE
from tests.factories import commit_all, git

#: Counts its runs in $BUILD_COUNT, then writes dist/main.js from src/main.js.
BUILD = 'echo run >> "$BUILD_COUNT"; mkdir -p dist; cat src/main.js > dist/main.js'
REUSED = "build: reused the output of the build of "


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "bot"
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.js").write_text("module.exports.loop = () => {};\n", encoding="utf-8")
    (root / "package-lock.json").write_text('{"lockfileVersion": 3}\n', encoding="utf-8")
    (root / ".gitignore").write_text("dist/\nnode_modules/\n", encoding="utf-8")
    manifest = {
        "version": 1,
        "servers": {"local": {"url": "http://127.0.0.1:9", "token_env": "SCREEPS_TOKEN"}},
        "build": BUILD,
        "branches": [{"server": "local", "branch": "main", "root": "dist"}],
    }
    (root / "gitops.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    git(root, "init", "-q")
    commit_all(root, "bot")
    monkeypatch.setenv("BUILD_COUNT", str(tmp_path / "count.txt"))
    monkeypatch.setenv("GITOPS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(REBUILD_VARIABLE, raising=False)
    monkeypatch.delenv("GITOPS_SKIP_BUILD", raising=False)
    return root


def _runs(repo: Path) -> int:
    count = repo.parent / "count.txt"
    return len(count.read_text().splitlines()) if count.exists() else 0


def _validate(repo: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    code = run(["validate", "-m", str(repo / "gitops.yaml"), *args])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    return captured.err


def test_the_second_validate_reuses_the_build_and_says_so(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = _validate(repo, capsys)
    assert _runs(repo) == 1
    assert REUSED not in first
    second = _validate(repo, capsys)
    assert _runs(repo) == 1
    assert REUSED in second
    assert "(inputs unchanged); --rebuild forces it" in second
    # The record is private.
    records = list((repo.parent / "cache" / "builds").iterdir())
    assert len(records) == 1
    assert stat.S_IMODE(records[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(records[0].parent.stat().st_mode) == 0o700


@pytest.mark.parametrize(
    "change",
    [
        "tracked source edited",
        "untracked source added",
        "tracked source deleted",
        "lockfile edited",
        "ignored install record changed",
        "output edited by hand",
        "output file added",
        "output file removed",
        "manifest's build command changed",
    ],
)
def test_a_change_to_what_the_build_reads_or_wrote_builds_again(
    repo: Path, capsys: pytest.CaptureFixture[str], change: str
) -> None:
    (repo / "node_modules").mkdir()
    (repo / "node_modules" / ".package-lock.json").write_text("{}", encoding="utf-8")
    (repo / "src" / "util.js").write_text("module.exports = 1;\n", encoding="utf-8")
    commit_all(repo, "util")
    _validate(repo, capsys)
    assert _runs(repo) == 1
    if change == "tracked source edited":
        (repo / "src" / "main.js").write_text("module.exports.loop = () => { 1; };\n", encoding="utf-8")
    elif change == "untracked source added":
        (repo / "src" / "new.js").write_text("module.exports = 2;\n", encoding="utf-8")
    elif change == "tracked source deleted":
        (repo / "src" / "util.js").unlink()
    elif change == "lockfile edited":
        (repo / "package-lock.json").write_text('{"lockfileVersion": 3, "packages": {}}\n', encoding="utf-8")
    elif change == "ignored install record changed":
        (repo / "node_modules" / ".package-lock.json").write_text('{"x": 1}', encoding="utf-8")
    elif change == "output edited by hand":
        (repo / "dist" / "main.js").write_text("module.exports.loop = () => { hacked(); };\n", encoding="utf-8")
    elif change == "output file added":
        (repo / "dist" / "extra.js").write_text("module.exports = 3;\n", encoding="utf-8")
    elif change == "output file removed":
        (repo / "dist" / "main.js").unlink()
    else:
        path = repo / "gitops.yaml"
        path.write_text(path.read_text("utf-8").replace("echo run", "echo  run"), encoding="utf-8")
    err = _validate(repo, capsys)
    assert _runs(repo) == 2, change
    assert REUSED not in err
    # Built again, the output is the build's, not the hand-edited one.
    assert (repo / "dist" / "main.js").read_text("utf-8") == (repo / "src" / "main.js").read_text("utf-8")
    _validate(repo, capsys)
    assert _runs(repo) == 2  # and that build is reused in turn


def test_a_file_touched_without_a_change_of_content_is_reused(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _validate(repo, capsys)
    source = repo / "src" / "main.js"
    source.write_bytes(source.read_bytes())  # a new modification time, the same bytes
    assert REUSED in _validate(repo, capsys)
    assert _runs(repo) == 1


def test_rebuild_forces_the_build(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _validate(repo, capsys)
    _validate(repo, capsys, "--rebuild")
    assert _runs(repo) == 2
    monkeypatch.setenv(REBUILD_VARIABLE, "1")
    _validate(repo, capsys)
    assert _runs(repo) == 3
    monkeypatch.delenv(REBUILD_VARIABLE)
    assert REUSED in _validate(repo, capsys)
    assert _runs(repo) == 3


def test_gitops_build_reuses_and_build_out_always_builds(
    repo: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    manifest = str(repo / "gitops.yaml")
    assert run(["build", "-m", manifest]) == 0
    assert run(["build", "-m", manifest]) == 0
    assert _runs(repo) == 1
    assert REUSED in capsys.readouterr().err
    assert run(["build", "-m", manifest, "--rebuild"]) == 0
    assert _runs(repo) == 2
    # A code set file for a deploy job is made by the build itself.
    assert run(["build", "-m", manifest, "--out", str(tmp_path / "codeset.json")]) == 0
    assert _runs(repo) == 3


def test_plan_reuses_the_build_of_validate(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _validate(repo, capsys)
    # --refresh=never plans from the (empty) ledger: no server is asked.
    code = run(["plan", "-m", str(repo / "gitops.yaml"), "--refresh=never", "--state-dir", str(repo.parent / "st")])
    err = capsys.readouterr().err
    assert code in (0, 2), err
    assert REUSED in err
    assert _runs(repo) == 1


def test_a_ref_build_is_never_reused(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _validate(repo, capsys, "--ref", "HEAD")
    _validate(repo, capsys, "--ref", "HEAD")
    assert _runs(repo) == 2
    assert not (repo.parent / "cache" / "builds").exists()


def test_a_damaged_record_is_said_and_only_costs_a_build(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _validate(repo, capsys)
    (record,) = (repo.parent / "cache" / "builds").iterdir()
    record.write_text("{not json", encoding="utf-8")
    err = _validate(repo, capsys)
    assert _runs(repo) == 2
    assert f"build: the record of the last build, {record}, does not hold a record" in err
    assert "Traceback" not in err
    assert REUSED in _validate(repo, capsys)  # written again by that build
    assert _runs(repo) == 2


def test_a_forged_record_cannot_pass_off_other_output(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _validate(repo, capsys)
    (record,) = (repo.parent / "cache" / "builds").iterdir()
    data = json.loads(record.read_text("utf-8"))
    # Other output than the record names (its digests are the build's): the record says this is the build of the
    # inputs on disk, but its digests do not match, so the build runs and its output replaces it.
    (repo / "dist" / "main.js").write_text("stolen();\n", encoding="utf-8")
    data["built_at"] = 0
    record.write_text(json.dumps(data), encoding="utf-8")
    _validate(repo, capsys)
    assert _runs(repo) == 2
    assert (repo / "dist" / "main.js").read_text("utf-8") == (repo / "src" / "main.js").read_text("utf-8")


def test_a_build_that_rewrites_its_inputs_leaves_no_record(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = repo / "gitops.yaml"
    stamping = "date +%s%N > src/stamp.txt; " + BUILD
    path.write_text(path.read_text("utf-8").replace(BUILD, stamping), encoding="utf-8")
    commit_all(repo, "stamp")
    _validate(repo, capsys)
    _validate(repo, capsys)
    assert _runs(repo) == 2
    assert not list((repo.parent / "cache" / "builds").glob("*.json"))


def test_outside_git_every_run_builds(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.rmtree(repo / ".git")
    _validate(repo, capsys)
    _validate(repo, capsys)
    assert _runs(repo) == 2
