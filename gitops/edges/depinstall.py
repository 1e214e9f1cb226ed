"""The install before a build: a checkout without ``node_modules`` gets the packages its lockfile names.

A fresh checkout (``--ref``, ``--base``, the rehearsal's base, the GitHub Action's checkout) holds no
``node_modules``: a build such as ``npm run build`` would fail there with ``rollup: not found``. The rule
(``install`` in the manifest, documented under "Build" in docs/manifest.md):

* only when the manifest's folder has a ``package.json`` that names dependencies, a build command runs Node.js
  tooling (:func:`gitops.core.buildcheck.runs_node`; any, for an ``install`` command of the manifest's), none
  installs the packages itself (``npm ci && npm run build``), and the folder of the lockfile (the manifest's, or
  the nearest above it in the repository: a workspace) has no ``node_modules``;
* ``auto`` (the default) runs what the lockfile says (:func:`gitops.core.buildcheck.install_argv`: ``npm ci``,
  ``yarn install --frozen-lockfile``, ``pnpm install --frozen-lockfile``), in the lockfile's folder; without a
  lockfile ``npm install --no-package-lock`` with a warning (the newest versions package.json allows);
* ``never`` runs nothing; any other value is the command to run instead, in the manifest's folder.

The install is a build step like any other: the same environment without credentials, the same timeout, its
output shown the same way. Packages' install scripts run, as they would for the player: the build that follows
runs the same packages' code anyway.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gitops.core.buildcheck import LOCKFILES, dependencies, install_argv, installs_itself, runs_node
from gitops.edges.build import BuildCommand, run_build


@dataclass(frozen=True)
class Install:
    """An install to run before the builds: the command, the folder it runs in, the lockfile it follows."""

    command: BuildCommand
    folder: Path
    lockfile: str | None


def _lock_folder(folder: Path) -> tuple[Path, str | None]:
    """The folder whose lockfile the packages of ``folder`` come from (it, or the nearest above it within its
    repository) and the lockfile's name; ``(folder, None)`` without one."""
    for parent in (folder, *folder.parents):
        for name in LOCKFILES:
            if (parent / name).is_file():
                return parent, name
        if (parent / ".git").exists():
            break
    return folder, None


def needed(folder: Path, setting: BuildCommand, commands: Sequence[BuildCommand]) -> Install | None:
    """The install to run before ``commands`` in ``folder`` (the manifest's folder, in the working tree or a
    checkout), or ``None`` (see the module's rule)."""
    if setting == "never" or any(installs_itself(command) for command in commands):
        return None
    try:
        package = json.loads((folder / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # no package.json (not a Node.js project), or one npm would refuse too: the build says
    names = dependencies(package) if isinstance(package, dict) else set()
    if not names or (setting == "auto" and not any(runs_node(command, names) for command in commands)):
        return None  # nothing to install, or a build that runs no Node.js tooling (cargo build beside a package.json)
    lock_folder, lockfile = _lock_folder(folder)
    if (lock_folder / "node_modules").is_dir() or (folder / "node_modules").is_dir():
        return None
    if setting != "auto":
        return Install(setting, folder, lockfile)
    berry = (lock_folder / ".yarnrc.yml").is_file()
    return Install(install_argv(lockfile, yarn_berry=berry), lock_folder, lockfile)


def install_first(
    folder: Path,
    setting: BuildCommand,
    commands: Sequence[BuildCommand],
    *,
    env: Mapping[str, str],
    timeout: float,
    where: str = "",
    shown_dir: Path | None = None,
) -> bool:
    """Install the packages of ``folder`` when :func:`needed` says so, as a build step
    (:func:`gitops.edges.build.run_build`); whether it ran. ``shown_dir``: the folder messages name (the working
    tree's, for a temporary checkout)."""
    install = needed(folder, setting, commands)
    if install is None:
        return False
    shown = shown_dir or folder
    if install.lockfile is None and setting == "auto":
        print(
            f"install: warning: {shown / 'package.json'} has no lockfile beside it (package-lock.json, yarn.lock or "
            "pnpm-lock.yaml): installing the newest versions it allows, which may differ from one build to the "
            "next; commit a lockfile to build the same code every time",
            file=sys.stderr,
            flush=True,
        )
    source = f"from {install.lockfile}" if install.lockfile is not None else "from package.json"
    print(
        f"install: no node_modules{' there' if where else ' in ' + str(shown)}: the packages are installed first, "
        f"{source} (install: never in the manifest turns this off)",
        file=sys.stderr,
        flush=True,
    )
    run_build(install.command, install.folder, env=env, where=where, timeout=timeout, shown_dir=shown, kind="install")
    return True
