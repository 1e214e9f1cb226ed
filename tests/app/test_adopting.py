"""``gitops/app/adopting.py``: what ``gitops init`` reads of a real folder, and how it writes the new manifest:
whole or not at all, never over a file, and the credentials file kept out of Git."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from gitops.app.adopting import ignore_credentials_file, refuse_existing, snapshot_of, write_new_manifest
from gitops.errors import ManifestError, UsageError
from tests.factories import make_repo, write_files

MANIFEST = {
    "version": 1,
    "servers": {"main": {"url": "https://screeps.com", "token_env": "SCREEPS_TOKEN"}},
    "branches": [{"server": "main", "branch": "default", "root": "src"}],
}


def test_the_snapshot_lists_the_folder_and_reads_the_few_files_that_tell_the_layout(tmp_path: Path) -> None:
    write_files(
        tmp_path,
        {
            "package.json": '{"scripts": {"build": "rollup -c"}}',
            "rollup.config.js": "export default {}",
            "src/main.js": "module.exports.loop = () => {};",
            "src/role/harvester.js": "x",
            "node_modules/x/index.js": "never listed",
            "README.md": "not read",
        },
    )
    (tmp_path / ".git").mkdir()
    snapshot = snapshot_of(tmp_path)
    assert snapshot.files == frozenset({"package.json", "rollup.config.js", "README.md"})
    assert "node_modules" not in snapshot.folders
    assert ".git" not in snapshot.folders
    assert snapshot.inside["src"] == frozenset({"main.js", "role/harvester.js"})
    assert snapshot.contents["package.json"].startswith('{"scripts"')
    assert "README.md" not in snapshot.contents
    assert snapshot.sources["src/main.js"] == "module.exports.loop = () => {};"


def test_a_folder_that_cannot_be_listed_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot be listed"):
        snapshot_of(tmp_path / "missing")


def test_the_manifest_is_written_when_it_reads_back_as_meant(tmp_path: Path) -> None:
    path = tmp_path / "gitops.yaml"
    text = yaml.safe_dump(MANIFEST, sort_keys=False)
    write_new_manifest(path, text, MANIFEST)
    assert path.read_text(encoding="utf-8") == text
    assert os.listdir(tmp_path) == ["gitops.yaml"]  # no temporary file left


def test_a_manifest_that_does_not_read_back_as_meant_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "gitops.yaml"
    with pytest.raises(ManifestError):
        write_new_manifest(path, "version: 1\nservers: {}\n", MANIFEST)
    assert os.listdir(tmp_path) == []


def test_an_existing_file_or_broken_link_is_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "gitops.yaml"
    path.symlink_to(tmp_path / "nowhere")
    with pytest.raises(UsageError, match="already exists; gitops init writes a new manifest and never overwrites"):
        refuse_existing(path)
    with pytest.raises(UsageError):
        write_new_manifest(path, yaml.safe_dump(MANIFEST), MANIFEST)
    assert not (tmp_path / "nowhere").exists()


def test_the_credentials_file_is_added_to_gitignore_once(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {".gitignore": "node_modules/"})
    changed = ignore_credentials_file(repo)
    assert changed == repo / ".gitignore"
    assert changed.read_text(encoding="utf-8") == (
        "node_modules/\n# the screepers credentials file holds tokens\n.screeps.yaml\n"
    )
    assert ignore_credentials_file(repo) is None  # ignored now
    assert ignore_credentials_file(tmp_path) is None  # not a Git work tree
