"""The rehearsal's install checks (``gitops.edges.serverinstall``): which folder is a usable install of the pinned
private server, and what a folder that is not one is told. No server runs here; ``node`` must be on PATH."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import pytest

from gitops.edges.serverinstall import (
    ABI_CACHE,
    MARKER,
    NEEDED,
    clean_env,
    default_install_dir,
    find_install,
    folders_on_disk,
    install_problem,
    install_stamp,
    node_abi,
    node_files,
    ready_install,
)
from gitops.errors import ExitCode, RehearsalError

ROOT = Path(__file__).resolve().parents[2]


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


def test_the_shipped_folder_is_found_in_a_namespace_package_spread_over_two_path_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As pip installs gitops/_privateserver/ (no __init__.py): files() is then a MultiplexedPath, whose str() once
    # became the "folder" and made every installed 'gitops rehearse' exit 14.
    first, second = tmp_path / "a", tmp_path / "b"
    (first / "shipns_probe" / "files").mkdir(parents=True)
    (second / "shipns_probe" / "files").mkdir(parents=True)
    (first / "shipns_probe" / "files" / "other.txt").write_text("x")
    (second / "shipns_probe" / "files" / "package-lock.json").write_text("{}")
    monkeypatch.syspath_prepend(str(second))
    monkeypatch.syspath_prepend(str(first))
    root = resources.files("shipns_probe.files")
    assert not Path(str(root)).is_dir()  # the old reading: no folder at all
    assert folders_on_disk(root, "package-lock.json") == [second / "shipns_probe" / "files"]
    assert folders_on_disk(root, "absent.json") == []
    # A regular package's files() is a plain Path: the same answer.
    assert folders_on_disk(second / "shipns_probe" / "files", "package-lock.json") == [
        second / "shipns_probe" / "files"
    ]


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


def test_a_ready_install_is_found_without_installing_and_anything_else_is_none_without_a_word(tmp_path: Path) -> None:
    """What a rehearsal launches its world from before it reads the code: an install that is there and current, and
    nothing else (no install begun, no error: find_install says why, after the code's checks)."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GITOPS_CACHE_DIR": str(tmp_path / "cache")}
    assert ready_install(env) is None
    assert not (tmp_path / "cache" / "private-server").exists()  # nothing was installed, not even a folder made
    assert ready_install(env, tmp_path / "nowhere") is None  # find_install raises for it: here it is only no
    given = tmp_path / "given"
    given.mkdir()
    _complete(given, install_stamp(node_files(), env))
    assert ready_install(env, given) == given.resolve()
    assert ready_install({**env, "GITOPS_PRIVATE_SERVER": str(given)}) == given.resolve()
    (given / MARKER).write_text("0" * 64)  # stale: the pinned versions or node changed
    assert ready_install(env, given) is None
    assert ready_install({"HOME": str(tmp_path), "PATH": str(tmp_path / "no-node")}, given) is None  # no node


def test_nodes_abi_is_asked_once_per_binary_and_again_when_the_binary_changes(tmp_path: Path) -> None:
    """A node start costs up to a quarter of a second on a loaded machine: the ABI of the same binary (path, size,
    modification time) comes from the cache folder; a changed binary, or a damaged cache, is asked again."""
    asked = tmp_path / "asked"
    node = tmp_path / "bin" / "node"
    node.parent.mkdir()
    node.write_text(f'#!/bin/sh\necho x >> "{asked}"\necho linux-x64-abi115\n')
    node.chmod(0o755)
    env = {"PATH": str(node.parent), "HOME": str(tmp_path), "GITOPS_CACHE_DIR": str(tmp_path / "cache")}

    def times() -> int:
        return len(asked.read_text().splitlines()) if asked.exists() else 0

    assert node_abi(str(node), env) == "linux-x64-abi115"
    assert node_abi(str(node), env) == "linux-x64-abi115"
    assert times() == 1
    assert (tmp_path / "cache" / ABI_CACHE).is_file()
    node.write_text(node.read_text().replace("abi115", "abi127"))  # another node: another size
    assert node_abi(str(node), env) == "linux-x64-abi127"
    assert times() == 2
    (tmp_path / "cache" / ABI_CACHE).write_text("{not json")
    assert node_abi(str(node), env) == "linux-x64-abi127"
    assert times() == 3
    assert list((tmp_path / "cache").iterdir()) == [tmp_path / "cache" / ABI_CACHE]  # no partial file left


def test_node_and_npm_get_what_they_need_of_the_environment_and_no_credential() -> None:
    kept = {"PATH": "/usr/bin", "HOME": "/home/player", "npm_config_registry": "https://registry.npmjs.org/"}
    secret = {"GITOPS_TOKEN": "canary-token-not-for-node", "GITHUB_TOKEN": "canary-github-token"}
    assert clean_env({**kept, **secret, "LANG": ""}) == kept  # an empty value is left out too
