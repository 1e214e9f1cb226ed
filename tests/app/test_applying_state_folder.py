"""A state folder that cannot be written (issue 46, point 4): full or read-only, ``apply`` finds it before the upload
and refuses (exit 1, its own message), instead of deploying without recording the deploy or dropping the code kept
for ``gitops rollback``. Real file systems: a 64 KiB tmpfs filled to the last byte, and a read-only bind mount
(root ignores permission bits; a user who is not root gets the folder's write bits taken away instead). The real
CLI against the real stand-in on loopback."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitops.standin.testing import ALICE, StandIn
from tests.project import Project

UPLOAD = "POST /api/user/code"
V1 = "module.exports.loop = () => { console.log('v1'); };\n"
V2 = "module.exports.loop = () => { console.log('v2'); };\n// " + "x" * 2000 + "\n"


def _mount(*args: str) -> bool:
    if os.name != "posix" or shutil.which("mount") is None:
        return False
    done = subprocess.run(["mount", *args], capture_output=True, check=False)
    return done.returncode == 0


def _umount(path: Path) -> None:
    subprocess.run(["umount", str(path)], capture_output=True, check=False)


@contextlib.contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[None]:
    path.mkdir(parents=True, exist_ok=True)
    if not _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)):
        pytest.skip("mounting a small tmpfs needs root (CAP_SYS_ADMIN) and mount(8)")
    try:
        yield
    finally:
        _umount(path)


@contextlib.contextmanager
def _read_only(path: Path) -> Iterator[None]:
    """``path`` read-only for this process: a read-only bind mount as root (which ignores permission bits), else the
    write bits taken away."""
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in [path, *path.rglob("*")] if p.is_dir()}
        for p in modes:
            p.chmod(0o555)
        try:
            yield
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    if not (_mount("--bind", str(path), str(path)) and _mount("-o", "remount,ro,bind", str(path))):
        _umount(path)
        pytest.skip("a read-only bind mount needs mount(8) and CAP_SYS_ADMIN")
    try:
        yield
    finally:
        _umount(path)


def _fill(folder: Path) -> Path:
    """Fill the file system of ``folder`` to its last byte (the filler file's path)."""
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as handle:
        for size in (1024, 1):  # whole kibibytes, then the last bytes one by one
            with contextlib.suppress(OSError):
                while handle.write(b"\0" * size):
                    pass
    with pytest.raises(OSError, match="No space left") as full:
        (folder / "one-more").write_bytes(b"\0" * 1024)
    assert full.value.errno == errno.ENOSPC
    return filler


@pytest.fixture
def project(tmp_path: Path, standin: StandIn, capsys: Any, monkeypatch: Any) -> Project:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": V1})
    p.manifest([{"branch": "main", "root": "src", "activate": ["world"]}])
    p.commit("v1")
    return p


def _history(p: Project) -> list[dict[str, Any]]:
    result = p.gitops("history", "--json")
    assert result.code == 0, result.err
    servers: dict[str, list[dict[str, Any]]] = json.loads(result.out)["servers"]
    return servers["local"]


def test_a_full_state_folder_is_found_before_the_upload_and_apply_refuses(project: Project, standin: StandIn) -> None:
    with _tmpfs(project.state_dir, "64k"):
        assert project.apply("--yes").code == 0
        project.write({"src/main.js": V2})
        project.commit("v2")
        filler = _fill(project.state_dir)
        uploads = standin.count(UPLOAD)

        refused = project.apply("--yes")
        assert refused.code == 1, refused.out + refused.err
        assert "Error: the state folder cannot be written" in refused.err
        assert "No space left on device" in refused.err
        assert "nothing was sent" in refused.err
        assert "Traceback" not in refused.err
        assert standin.count(UPLOAD) == uploads
        assert standin.branch_modules(ALICE, "main") == {"main": V1}

        filler.unlink()  # room again: the same apply deploys, recorded, its code kept
        done = project.apply("--yes")
        assert done.code == 0, done.out + done.err
        assert standin.branch_modules(ALICE, "main") == {"main": V2}
        assert [(d["n"], d["code_kept"]) for d in _history(project)] == [(2, True), (1, True)]


def test_a_read_only_state_folder_refuses_the_apply_with_nothing_sent(project: Project, standin: StandIn) -> None:
    assert project.apply("--yes").code == 0
    project.write({"src/main.js": V2})
    project.commit("v2")
    uploads = standin.count(UPLOAD)
    with _read_only(project.state_dir):
        with pytest.raises(OSError, match=r"Read-only|Permission"):
            (project.state_dir / "probe").write_text("x")  # the setting really refuses writes
        refused = project.apply("--yes")
    assert refused.code == 1, refused.out + refused.err
    assert "Error: the state folder cannot be written" in refused.err
    assert "nothing was sent" in refused.err
    assert standin.count(UPLOAD) == uploads
    assert standin.branch_modules(ALICE, "main") == {"main": V1}
    assert [d["n"] for d in _history(project)] == [1]
