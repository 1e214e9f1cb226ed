"""The build job / deploy job boundary: ``gitops build --out`` writes a code set file, ``--codeset`` deploys it
without running or reading the repository's code, and a file from another manifest or commit is refused."""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
from pathlib import Path

import pytest

from gitops.cli import run
from gitops.core.artifact import artifact_data, max_file_bytes
from gitops.core.codeset import CodeSet, Module, code_length, refused_name_reason
from gitops.core.endpoints import MAX_CODE_LENGTH
from gitops.core.local import LocalBranch
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


def test_the_text_plan_of_a_code_set_says_it_is_planned_from_that_file(project: Project, tmp_path: Path) -> None:
    out = tmp_path / "codeset.json"
    assert build(project, out).code == 0
    result = project.plan("--codeset", str(out))
    assert result.code == ExitCode.CHANGES, result.err  # a plan with changes
    commit = git(project.root, "rev-parse", "HEAD").strip()
    assert result.out.startswith(f"Plan from code set {out} ({commit[:12]}), manifest "), result.out
    assert "working tree" not in result.out.splitlines()[0]


def test_a_deeply_nested_code_set_is_refused_with_exit_6(project: Project, tmp_path: Path) -> None:
    out = tmp_path / "codeset.json"
    # Deep enough for the standard library's parser to run out of stack (RecursionError, once exit 70).
    out.write_text("[" * 200_000 + "]" * 200_000, "ascii")
    result = project.plan("--codeset", str(out))
    assert result.code == ExitCode.LOCAL_CODE, result.err
    assert f"Error: the code set file {out} is not a code set: its JSON is nested deeper than any code set" in (
        result.err
    )
    assert "Traceback" not in result.err


@pytest.mark.parametrize("name", ["$cache", ".hidden", "role$DOT$harvester", "lib/\udcff"])
def test_a_code_set_module_the_server_would_drop_or_rename_is_refused_as_the_build_refuses_it(
    project: Project, tmp_path: Path, name: str
) -> None:
    out = tmp_path / "codeset.json"
    assert build(project, out).code == 0
    data = json.loads(out.read_text("ascii"))
    module = next(m for m in data["branches"][0]["modules"] if m["name"] == "main")
    module["name"] = name  # its size and sha256 still match: only the name rule can refuse it
    out.write_text(json.dumps(data), "ascii")
    result = project.apply("--yes", "--codeset", str(out))
    assert result.code == ExitCode.LOCAL_CODE, result.err
    # The very reason the build gives for a file that would become this module.
    reason = refused_name_reason(name)
    assert reason is not None
    assert f"module {name!r} cannot be deployed: {reason}" in result.err
    assert project.service.branch_modules(ALICE, "main") is None


def test_a_code_set_larger_than_the_manifest_s_branches_can_hold_is_refused_unread(
    project: Project, tmp_path: Path
) -> None:
    out = tmp_path / "codeset.json"
    with out.open("wb") as sparse:  # no disk used: a hole of the size, which a parse would have to read whole
        sparse.truncate(max_file_bytes(1) + 1)
    result = project.plan("--codeset", str(out))
    assert result.code == ExitCode.LOCAL_CODE, result.err
    assert f"is {max_file_bytes(1) + 1:,} bytes, larger than any code set of this manifest's branches" in result.err
    assert "Traceback" not in result.err


#: Paths a test wants swapped for a FIFO at the moment they are opened (an audit hook cannot be removed, so there is
#: one, installed once, that acts only on what this holds).
_SWAP_AT_OPEN: set[str] = set()


def _swap_for_a_fifo(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and args and isinstance(args[0], str | Path) and str(args[0]) in _SWAP_AT_OPEN:
        _SWAP_AT_OPEN.discard(str(args[0]))
        os.unlink(args[0])
        os.mkfifo(args[0])


sys.addaudithook(_swap_for_a_fifo)


def _plan_in_a_thread(project: Project, path: Path) -> Result:
    """``plan --codeset PATH``, failing the test (not hanging it) when the read blocks on a FIFO without a writer."""
    done: list[Result] = []
    worker = threading.Thread(target=lambda: done.append(project.plan("--codeset", str(path))), daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive():  # release the blocked open, then fail
        with open(path, "wb"):
            pass
        worker.join(5)
        pytest.fail(f"reading {path} as the code set file hung")
    return done[0]


def test_a_fifo_in_place_of_the_code_set_is_refused_without_waiting_for_a_writer(
    project: Project, tmp_path: Path
) -> None:
    fifo = tmp_path / "codeset.json"
    os.mkfifo(fifo)
    result = _plan_in_a_thread(project, fifo)
    assert result.code == ExitCode.LOCAL_CODE
    assert f"the code set file {fifo} is not a regular file" in result.err


def test_a_fifo_swapped_in_after_any_check_by_name_is_refused_as_it_is_opened(project: Project, tmp_path: Path) -> None:
    out = tmp_path / "codeset.json"
    assert build(project, out).code == 0
    # A regular file while anything looks at the name; a FIFO from the moment it is opened: the one open is what
    # is checked (fstat), so the swap is seen, and O_NONBLOCK keeps the open from waiting for a writer.
    _SWAP_AT_OPEN.add(str(out))
    try:
        result = _plan_in_a_thread(project, out)
    finally:
        _SWAP_AT_OPEN.discard(str(out))
    assert stat.S_ISFIFO(os.lstat(out).st_mode)  # the swap happened
    assert result.code == ExitCode.LOCAL_CODE
    assert f"the code set file {out} is not a regular file" in result.err


def test_the_size_cap_holds_the_largest_branch_the_server_accepts() -> None:
    # The file's worst case: text the server counts at its limit, every unit a character the file escapes
    # (ensure_ascii: 'é' is 1 unit on the server, 6 bytes in the file).
    per = 100_000
    modules = [Module(f"role/m{i:03}", text="é" * per) for i in range(MAX_CODE_LENGTH // (per + 20))]
    code = CodeSet.of(modules)
    assert MAX_CODE_LENGTH * 0.98 < code_length(code.wire()) <= MAX_CODE_LENGTH
    files = {m.name: f"src/{m.name}.js" for m in modules}
    data = artifact_data(
        [LocalBranch("main", "default", code, files, {})],
        commit="a" * 40,
        manifest_raw=b"",
        manifest_name="gitops.yaml",
        warnings=[],
    )
    written = len(json.dumps(data, ensure_ascii=True, separators=(",", ":")))  # as write_codeset writes it
    assert written > 5 * MAX_CODE_LENGTH
    assert written <= max_file_bytes(1)
    assert max_file_bytes(1) < 40 * 1024 * 1024  # not the 512 MiB of old: one branch, one branch's worth
