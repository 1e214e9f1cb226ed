"""Issue 41: the manifest is found as git finds its repository: from a subfolder, and as gitops.yml too."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitops.cli import run
from gitops.config.manifest import load_manifest
from gitops.errors import ExitCode, ManifestError
from tests.factories import git

MANIFEST = """version: 1
servers:
  local: {url: "http://127.0.0.1:9", token_env: SCREEPS_TOKEN}
branches:
  - {server: local, branch: main, root: src}
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "bot"
    (root / "src" / "role").mkdir(parents=True)
    (root / "src" / "main.js").write_text("module.exports.loop = () => {};\n", "utf-8")
    git(root, "init", "-q", "-b", "main")
    return root


def validate_in(folder: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.chdir(folder)
    monkeypatch.delenv("GITOPS_MANIFEST", raising=False)
    return run(["validate", *args])


@pytest.mark.parametrize("name", ["gitops.yaml", "gitops.yml"])
def test_a_manifest_above_the_working_folder_is_found_and_said(
    repo: Path, name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / name).write_text(MANIFEST, "utf-8")
    assert validate_in(repo / "src" / "role", monkeypatch) == 0
    err = capsys.readouterr().err
    assert f"using the manifest {Path('../..') / name} (found above this folder)" in err
    assert validate_in(repo, monkeypatch) == 0
    assert "found above" not in capsys.readouterr().err  # in this folder: nothing to say


def test_the_walk_stops_at_the_top_of_the_repository(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo.parent / "gitops.yaml").write_text(MANIFEST, "utf-8")  # another project's, above this repository
    assert validate_in(repo / "src", monkeypatch) == ExitCode.MANIFEST
    err = capsys.readouterr().err
    assert "manifest gitops.yaml not found" in err
    assert "up to the top of the Git repository" in err


def test_a_named_manifest_is_never_replaced_by_one_found(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "gitops.yaml").write_text(MANIFEST, "utf-8")
    assert validate_in(repo / "src", monkeypatch, "-m", "nowhere.yaml") == ExitCode.MANIFEST
    assert "nowhere.yaml not found" in capsys.readouterr().err
    monkeypatch.setenv("GITOPS_MANIFEST", "also-nowhere.yaml")
    monkeypatch.chdir(repo / "src")
    assert run(["validate"]) == ExitCode.MANIFEST
    assert "also-nowhere.yaml not found" in capsys.readouterr().err


def test_a_folder_holding_gitops_yml_loads_it(repo: Path) -> None:
    (repo / "gitops.yml").write_text(MANIFEST, "utf-8")
    loaded = load_manifest(repo)
    assert loaded.path == (repo / "gitops.yml").resolve()
    assert loaded.manifest.branches[0].root == "src"


def test_two_manifests_in_one_folder_are_refused_by_name(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "gitops.yaml").write_text(MANIFEST, "utf-8")
    (repo / "gitops.yml").write_text(MANIFEST.replace("branch: main", "branch: other"), "utf-8")
    for folder in (repo, repo / "src"):  # here, and found from below
        assert validate_in(folder, monkeypatch) == ExitCode.MANIFEST
        err = capsys.readouterr().err
        assert f"Error: two manifests in {repo}: gitops.yaml and gitops.yml" in err
        assert "Keep one" in err
        assert "Traceback" not in err
    assert validate_in(repo, monkeypatch, "-m", "gitops.yml") == 0  # named: obeyed
    with pytest.raises(ManifestError, match="two manifests in"):
        load_manifest(repo)  # a folder named (as init and pull name one): both in it
