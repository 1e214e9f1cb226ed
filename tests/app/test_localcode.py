"""``gitops/app/localcode.py``: build then read: the code of every branch from a real repository (the working tree, a
commit, or a code set file), refused when it does not parse or holds one of the run's credentials."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitops.app.localcode import check_syntax, read_code
from gitops.config.manifest import LoadedManifest, load_manifest
from gitops.core.artifact import artifact_data
from gitops.core.codeset import CodeSet, Module
from gitops.core.local import LocalBranch
from gitops.errors import ExitCode, SourceError, UsageError
from gitops.standin.testing import FULL_TOKEN
from tests.factories import commit_all, git, make_repo, write_manifest


def _repo(tmp_path: Path, main: str = "module.exports.loop = () => 1;\n") -> tuple[Path, LoadedManifest]:
    repo = make_repo(tmp_path / "bot", {"src/main.js": main, "src/role/harvester.js": "module.exports = {};\n"})
    write_manifest(repo)
    commit_all(repo, "manifest")
    return repo, load_manifest(repo / "gitops.yaml", {})


def _modules(branch: LocalBranch) -> dict[str, str | None]:
    return {m.name: m.text for m in branch.code}


def test_the_working_tree_is_read_as_the_manifest_names_it(tmp_path: Path) -> None:
    repo, loaded = _repo(tmp_path)
    (repo / "src" / "main.js").write_text("module.exports.loop = () => 2;\n", encoding="utf-8")  # not committed
    local = read_code(loaded, None, {})
    [branch] = local.branches
    assert _modules(branch) == {"main": "module.exports.loop = () => 2;\n", "role/harvester": "module.exports = {};\n"}
    assert branch.files == {"main": "src/main.js", "role/harvester": "src/role/harvester.js"}
    assert (local.source.kind, local.source.dirty) == ("worktree", True)


def test_a_ref_reads_that_commits_files_not_the_working_tree(tmp_path: Path) -> None:
    repo, loaded = _repo(tmp_path)
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "src" / "main.js").write_text("module.exports.loop = () => 3;\n", encoding="utf-8")
    commit_all(repo, "three")
    local = read_code(loaded, first, {})
    assert _modules(local.branches[0])["main"] == "module.exports.loop = () => 1;\n"
    assert (local.source.kind, local.source.commit) == ("ref", first)


def test_a_ref_and_a_code_set_together_are_a_usage_error(tmp_path: Path) -> None:
    _, loaded = _repo(tmp_path)
    with pytest.raises(UsageError, match=r"--ref main and --codeset .* both say where the code comes from"):
        read_code(loaded, "main", {"GITOPS_CODESET": str(tmp_path / "code.json")})


def test_a_code_set_that_holds_a_credential_is_refused(tmp_path: Path) -> None:
    repo, loaded = _repo(tmp_path)
    leaked = LocalBranch("local", "main", CodeSet.of([Module("main", text=f"const t = '{FULL_TOKEN}';")]), {})
    data = artifact_data(
        [leaked],
        commit=git(repo, "rev-parse", "HEAD").strip(),
        manifest_raw=(repo / "gitops.yaml").read_bytes(),
        manifest_name="gitops.yaml",
        warnings=[],
    )
    codeset = tmp_path / "code.json"
    codeset.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(SourceError) as refused:
        read_code(loaded, None, {"GITOPS_CODESET": str(codeset), "SCREEPS_TOKEN": FULL_TOKEN})
    assert refused.value.message.startswith("local/main: module 'main' holds a credential")
    assert FULL_TOKEN not in str(refused.value)
    codeset.unlink()  # the canary guard reads every file the suite leaves


def test_javascript_that_does_not_parse_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    _, loaded = _repo(tmp_path, main="module.exports.loop = () => {\n")
    local = read_code(loaded, None, {})
    with pytest.raises(SourceError) as refused:
        check_syntax(local)
    assert refused.value.exit_code == ExitCode.LOCAL_CODE
    assert "has JavaScript that does not parse (1 module)" in refused.value.message
    check_syntax(local, {"local/main": ["role/harvester"]})  # only the modules asked for
