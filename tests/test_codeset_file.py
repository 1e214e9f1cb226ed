"""The build job / deploy job boundary: ``gitops build --out`` writes a code set file, ``--codeset`` deploys it
without running or reading the repository's code, and a file from another manifest or commit is refused."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from gitops.cli import run
from gitops.errors import ExitCode
from gitops.standin.testing import ALICE, StandIn
from tests.factories import git
from tests.project import Project, Result


def build(project: Project, out: Path) -> Result:
    """``gitops build --out`` in the project, as the build job runs it (no state folder: it contacts no server)."""
    project.capsys.readouterr()
    code = run(["build", "--out", str(out), "-m", str(project.root / "gitops.yaml")])
    captured = project.capsys.readouterr()
    return Result(code, captured.out, captured.err)


@pytest.fixture
def project(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    """A bot whose build writes dist/ (the build appends a line, so the deployed code is the build's, not src's)."""
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write(
        {
            "src/main.js": "module.exports.loop = () => {};\n",
            "src/lib/util.js": "module.exports.x = 1;\n",
            "build.sh": "mkdir -p dist/lib && sed 's/$/ \\/\\/ built/' src/main.js > dist/main.js"
            " && cp src/lib/util.js dist/lib/util.js && printf '\\000\\001\\002' > dist/lib/blob.wasm\n",
            ".gitignore": "dist/\n",
        }
    )
    p.manifest([{"branch": "main", "root": "dist", "build": "sh build.sh", "include": ["**/*.js", "**/*.wasm"]}])
    p.commit()
    return p


def test_a_code_set_built_in_one_place_deploys_from_another_without_its_build(project: Project, tmp_path: Path) -> None:
    out = tmp_path / "codeset.json"
    built = build(project, out)
    assert built.code == 0, built.err
    data = json.loads(out.read_text("ascii"))
    assert data["commit"] == git(project.root, "rev-parse", "HEAD").strip()
    names = {m["name"]: m for m in data["branches"][0]["modules"]}
    assert set(names) == {"main", "lib/util", "lib/blob.wasm"}
    assert names["lib/blob.wasm"]["kind"] == "binary"
    assert names["lib/blob.wasm"]["size"] == 3

    # The deploying checkout has the manifest and the commit, but neither the build's output nor its script:
    # the code comes from the file alone, and no build runs (it would fail: build.sh is gone).
    (project.root / "build.sh").unlink()
    for path in sorted((project.root / "dist").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    (project.root / "dist").rmdir()
    applied = project.apply("--yes", "--codeset", str(out))
    assert applied.code == 0, applied.err
    modules = project.service.branch_modules(ALICE, "main")
    assert modules is not None
    assert modules["main"] == "module.exports.loop = () => {}; // built\n"
    assert modules["lib/blob.wasm"] == {"binary": "AAEC"}
    again = project.plan("--codeset", str(out))
    assert again.code == 0, again.out + again.err
    assert "code set" in again.out


def test_a_code_set_of_another_manifest_is_refused_before_any_request(project: Project, tmp_path: Path) -> None:
    out = tmp_path / "codeset.json"
    assert build(project, out).code == 0
    # The deploy's own manifest decides where the token goes: a code set built beside another manifest (here one
    # byte more) is not taken, whatever it holds.
    manifest = project.root / "gitops.yaml"
    manifest.write_text(manifest.read_text("utf-8") + "# changed\n", "utf-8")
    project.commit()
    result = project.apply("--yes", "--codeset", str(out))
    assert result.code == ExitCode.LOCAL_CODE
    assert "built from another manifest" in result.err
    assert "Traceback" not in result.err
    assert project.service.branch_modules(ALICE, "main") is None


def test_a_code_set_of_another_commit_is_refused(project: Project, tmp_path: Path) -> None:
    out = tmp_path / "codeset.json"
    assert build(project, out).code == 0
    project.write({"README.md": "later\n"})
    project.commit()
    result = project.apply("--yes", "--codeset", str(out))
    assert result.code == ExitCode.LOCAL_CODE
    assert "but this checkout is at commit" in result.err
    assert project.service.branch_modules(ALICE, "main") is None


@pytest.mark.parametrize(
    "tamper",
    [
        lambda m: m.__setitem__("text", m["text"] + "evil();"),
        lambda m: m.__setitem__("size", m["size"] + 1),
        lambda m: m.__setitem__("kind", "shell"),
        lambda m: m.pop("sha256"),
    ],
    ids=["content", "size", "kind", "no-digest"],
)
def test_a_code_set_changed_after_its_build_is_refused(project: Project, tmp_path: Path, tamper: object) -> None:
    out = tmp_path / "codeset.json"
    assert build(project, out).code == 0
    data = json.loads(out.read_text("ascii"))
    module = next(m for m in data["branches"][0]["modules"] if m["name"] == "main")
    tamper(module)  # type: ignore[operator]
    out.write_text(json.dumps(data), "ascii")
    result = project.apply("--yes", "--codeset", str(out))
    assert result.code == ExitCode.LOCAL_CODE, result.err
    assert "code set file" in result.err
    assert "Traceback" not in result.err
    assert project.service.branch_modules(ALICE, "main") is None


def test_a_code_set_lacking_a_branch_or_not_json_is_refused(project: Project, tmp_path: Path) -> None:
    out = tmp_path / "codeset.json"
    out.write_text("{not json", "ascii")
    assert "is not JSON" in project.plan("--codeset", str(out)).err
    assert build(project, out).code == 0
    data = json.loads(out.read_text("ascii"))
    data["branches"] = []
    out.write_text(json.dumps(data), "ascii")
    result = project.plan("--codeset", str(out))
    assert result.code == ExitCode.LOCAL_CODE
    assert "holds no code for local/main" in result.err


def test_codeset_and_ref_exclude_each_other(project: Project, tmp_path: Path) -> None:
    out = tmp_path / "codeset.json"
    assert build(project, out).code == 0
    result = project.plan("--codeset", str(out), "--ref", "HEAD")
    assert result.code == ExitCode.USAGE
    assert "give one" in result.err


def test_build_out_never_replaces_a_link_or_a_fifo(project: Project, tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.write_text("keep me", "utf-8")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    result = build(project, link)
    assert result.code == ExitCode.USAGE
    assert "symbolic link" in result.err
    assert target.read_text("utf-8") == "keep me"
    assert link.is_symlink()
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    result = build(project, fifo)
    assert result.code == ExitCode.USAGE
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
