"""``gitops/config/folders.py``: the per-user folders after the XDG base directories, from the environment given."""

from __future__ import annotations

from pathlib import Path

from gitops.config.folders import STATE_DIR_ENV, default_state_dir, user_folder


def test_the_tools_own_variable_wins_and_its_home_is_expanded() -> None:
    env = {"GITOPS_X": "~/mine", "XDG_X": "/xdg", "HOME": "/home/p"}
    assert user_folder(env, "GITOPS_X", "XDG_X", (".x",)) == Path("~/mine").expanduser()


def test_the_xdg_variable_gets_a_folder_of_the_tools_name() -> None:
    assert user_folder({"XDG_X": "/xdg", "HOME": "/home/p"}, "GITOPS_X", "XDG_X", (".x",)) == Path(
        "/xdg/screeps-gitops"
    )


def test_else_the_xdg_default_under_the_home_of_the_environment() -> None:
    assert user_folder({"HOME": "/home/p", "GITOPS_X": ""}, "GITOPS_X", "XDG_X", (".local", "x")) == Path(
        "/home/p/.local/x/screeps-gitops"
    )


def test_the_state_folder() -> None:
    assert STATE_DIR_ENV == "GITOPS_STATE_DIR"
    assert default_state_dir({STATE_DIR_ENV: "/s"}) == Path("/s")
    assert default_state_dir({"XDG_STATE_HOME": "/state"}) == Path("/state/screeps-gitops")
    assert default_state_dir({"HOME": "/h"}) == Path("/h/.local/state/screeps-gitops")
