"""``gitops pull`` against a hostile server (issue 18, item 1): module names that would plant files that run, or
that collide on a case-insensitive file system, make the pull write nothing; a folder swapped for a link between
the check and the write does not redirect it."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import httpx
import pytest

from gitops.standin.testing import FULL_TOKEN, StandIn
from tests.project import Project


def put(standin: StandIn, modules: dict[str, object]) -> None:
    with httpx.Client(base_url=standin.url, headers={"X-Token": FULL_TOKEN}) as http:
        answer = http.post("/api/user/code", json={"branch": "default", "modules": modules})
        assert answer.json().get("ok") == 1, answer.text


def binary(text: str) -> dict[str, str]:
    return {"binary": base64.b64encode(text.encode()).decode()}


@pytest.fixture
def flat(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    """A flat bot at the top of its repository (root '.'), as init writes it for the tutorial's layout."""
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"main.js": "module.exports.loop = () => {};\n", "package.json": '{"scripts": {}}\n'})
    p.manifest([{"branch": "default", "root": ".", "include": ["**/*.js", "**/*"], "binary": ["**/*"], "exclude": []}])
    p.commit("bot")
    return p


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("gitops.yaml", False),
        ("package.json", False),
        ("Gruntfile", True),  # Gruntfile.js
        ("rollup.config", True),  # rollup.config.js
        ("webpack.config", True),  # webpack.config.js
        ("GIT~1/config", False),
        ("x/.github/workflows/deploy.yml", False),
        ("x/.git./config", False),
        ("x/.git /config", False),
        ("x/.g\u200cit/config", False),
        ("x/\u200c.git/hooks/pre-commit", False),
        ("x/.envrc", False),
        ("x/.vscode/tasks.json", False),
        ("x/.gitignore", False),
        ("CON", True),
        ("run.sh", False),
    ],
)
def test_a_module_that_would_plant_a_file_is_refused_and_nothing_is_written(
    flat: Project, standin: StandIn, name: str, text: bool
) -> None:
    before = _snapshot(flat.root)
    planted: object = "console.log('pwned');\n" if text else binary("echo pwned\n")
    put(standin, {"main": "module.exports.loop = () => 1;\n", "lib": binary("ok"), name: planted})
    result = flat.gitops("pull")
    assert result.code == 1, result.out + result.err
    assert "nothing was written" in result.err
    assert repr(name) in result.err
    assert "Traceback" not in result.err
    assert _snapshot(flat.root) == before  # not even main.js or lib, which were fine


def test_names_that_collide_on_a_case_insensitive_file_system_are_refused(flat: Project, standin: StandIn) -> None:
    before = _snapshot(flat.root)
    put(standin, {"main": "module.exports.loop = () => 1;\n", "Role": "module.exports = 1;\n", "role": "2;\n"})
    result = flat.gitops("pull")
    assert result.code == 1
    assert "Role.js and role.js are one file on a case-insensitive or Unicode-normalising file system" in result.err
    assert _snapshot(flat.root) == before


def test_a_name_that_collides_with_a_file_already_there_is_refused(flat: Project, standin: StandIn) -> None:
    flat.write({"Role.js": "module.exports = 'mine';\n"})
    flat.commit("role")
    before = _snapshot(flat.root)
    put(standin, {"main": "module.exports.loop = () => {};\n", "Role": "module.exports = 'mine';\n", "role": "2;\n"})
    result = flat.gitops("pull")
    assert result.code == 1
    assert "Role.js and role.js are one file" in result.err
    assert _snapshot(flat.root) == before


def test_a_module_the_manifest_would_not_read_back_is_not_written(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"main.js": "module.exports.loop = () => {};\n"})
    p.manifest([{"branch": "default", "root": ".", "include": ["*.js"], "exclude": ["tools.js"]}])
    p.commit("bot")
    put(standin, {"main": "module.exports.loop = () => 2;\n", "tools": "require('child_process');\n"})
    result = p.gitops("pull")
    assert result.code == 0, result.err
    assert not (p.root / "tools.js").exists()
    assert "module 'tools' is not written to tools.js: exclude leaves it out" in result.err
    assert (p.root / "main.js").read_text(encoding="utf-8") == "module.exports.loop = () => 2;\n"


def test_a_folder_swapped_for_a_link_after_the_check_does_not_receive_the_file(tmp_path: Path) -> None:
    # The write itself, after pull's checks passed: the folder 'role' is replaced by a link to a folder outside the
    # repository between the check and the write (what a racing process could do).
    from gitops.app.pulling import write_files
    from gitops.config.manifest import load_manifest
    from gitops.core.pull import BranchPull, FileWrite
    from gitops.errors import SourceError
    from tests.factories import write_manifest

    loaded = load_manifest(write_manifest(tmp_path / "bot"))
    config = loaded.manifest.branches[0]
    root = loaded.base_dir / config.root
    (root / "role").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "role").rmdir()
    os.symlink(outside, root / "role")
    writes = [FileWrite("role/harvester.js", "role/harvester", b"planted\n", "create")]
    with pytest.raises(SourceError) as caught:
        write_files(loaded, {"local/main": config}, [BranchPull("local", "main", config.root, writes)])
    assert "role is a symbolic link" in str(caught.value)
    assert list(outside.iterdir()) == []
