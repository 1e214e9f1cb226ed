"""The rehearsal's install checks (``gitops.edges.privateserver``): which folder is a usable install of the pinned
private server, and what a folder that is not one is told. No server runs here; ``node`` must be on PATH."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gitops.edges.privateserver import (
    MARKER,
    NEEDED,
    default_install_dir,
    find_install,
    install_problem,
    install_stamp,
    node_files,
)
from gitops.errors import ExitCode, RehearsalError

ROOT = Path(__file__).resolve().parents[1]


def _complete(folder: Path, stamp: str) -> Path:
    for name in NEEDED:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("")
    (folder / MARKER).write_text(stamp + "\n")
    return folder


def test_the_shipped_files_are_the_scripts_and_the_stamp_is_the_scripts_stamp() -> None:
    assert node_files() == ROOT / "scripts" / "private-server"
    stamp = install_stamp(node_files(), os.environ)
    assert len(stamp) == 64
    # The same digest as scripts/private-server.sh writes, so the script's install is the tool's too.
    marker = ROOT / ".private-server" / MARKER
    if marker.is_file():
        assert marker.read_text().strip() == stamp


def test_a_folder_is_a_usable_install_only_when_complete_and_current(tmp_path: Path) -> None:
    stamp = install_stamp(node_files(), os.environ)
    assert "no complete install" in (install_problem(tmp_path, stamp) or "")
    _complete(tmp_path, stamp)
    assert install_problem(tmp_path, stamp) is None
    (tmp_path / MARKER).write_text("0" * 64)
    assert "is stale" in (install_problem(tmp_path, stamp) or "")
    (tmp_path / MARKER).write_text(stamp)
    (tmp_path / NEEDED[2]).unlink()
    assert "is broken (node_modules/@screeps/driver/native/build/Release/native.node is missing)" in (
        install_problem(tmp_path, stamp) or ""
    )


def test_a_given_folder_that_is_no_install_is_one_message_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(RehearsalError) as caught:
        find_install(dict(os.environ), tmp_path / "nowhere")
    assert caught.value.exit_code == ExitCode.REHEARSAL_UNKNOWN
    assert "(--server-dir or $GITOPS_PRIVATE_SERVER)" in caught.value.message
    assert caught.value.hint is not None
    assert "bash scripts/private-server.sh install" in caught.value.hint


def test_a_complete_cached_install_is_reused_without_a_word(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GITOPS_CACHE_DIR": str(tmp_path / "cache")}
    folder = default_install_dir(env)
    assert folder == (tmp_path / "cache" / "private-server").resolve()
    folder.mkdir(parents=True)
    _complete(folder, install_stamp(node_files(), env))
    said: list[str] = []
    assert find_install(env, say=said.append) == folder
    assert said == []
    xdg = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert default_install_dir(xdg) == (tmp_path / "xdg" / "screeps-gitops" / "private-server").resolve()
