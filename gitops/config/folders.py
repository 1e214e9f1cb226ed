"""The tool's per-user folders, after the XDG base directories: a variable of the tool's own names the folder, else
the XDG variable's folder gets a ``screeps-gitops`` folder, else the XDG default under the home folder."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

APP_FOLDER = "screeps-gitops"


def user_folder(env: Mapping[str, str], own: str, xdg: str, default: tuple[str, ...]) -> Path:
    """``$own``, else ``$xdg/screeps-gitops``, else ``~/<default...>/screeps-gitops`` (``HOME`` from ``env``)."""
    if env.get(own):
        return Path(env[own]).expanduser()
    if env.get(xdg):
        return Path(env[xdg]) / APP_FOLDER
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    return home.joinpath(*default, APP_FOLDER)


#: Environment variable that overrides the state folder (the CLI's ``--state-dir``).
STATE_DIR_ENV = "GITOPS_STATE_DIR"


def default_state_dir(env: Mapping[str, str]) -> Path:
    """``$GITOPS_STATE_DIR``, else ``$XDG_STATE_HOME/screeps-gitops``, else ``~/.local/state/screeps-gitops``."""
    return user_folder(env, STATE_DIR_ENV, "XDG_STATE_HOME", (".local", "state"))
