"""What to tell a person whose build failed, read from its last lines: the file it could not find, the program or
package that is not installed, and where to put it right.

Every folder a hint names exists after the run: a build in a temporary checkout (``--ref``, ``--base``) is named
by the folder of the working tree it stands for, never by the checkout, which is removed before the hint is shown.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

from gitops.core.buildcheck import LOCKFILES, dependencies, install_argv

#: What a shell, npm or Node print when a build's program or package is not installed.
_MISSING_TOOL = re.compile(
    r"(: not found|command not found|is not recognized as an internal or external command|npx canceled due to "
    r"missing packages|Cannot find module|Cannot find package|ERR_MODULE_NOT_FOUND|could not determine executable)",
    re.IGNORECASE,
)
#: ``sh: 1: rollup: not found``, ``bash: rollup: command not found``: the program's name.
_PROGRAM_NOT_FOUND = re.compile(r"(?:^|:\s)([\w@./-]+): (?:command )?not found")
#: A file the build could not read, as Node, Grunt and Gulp say it: a relative or absolute path.
_MISSING_FILE = (
    re.compile(r"Cannot find module '((?:\.{1,2}|)/[^']+)'"),
    re.compile(r"ENOENT: no such file or directory, \w+ '([^']+)'"),
    re.compile(r'Unable to read "([^"]+)" file'),
    re.compile(r"Error: ENOENT, no such file or directory '([^']+)'"),
)


def tool_missing(code: int, tail: Iterable[str]) -> bool:
    """Whether a failed build failed because its program or packages are missing (exit 127, or what npm, npx,
    Node or the shell print then)."""
    return code == 127 or any(_MISSING_TOOL.search(line) for line in tail)


def missing_file(tail: Iterable[str], cwd: Path) -> str | None:
    """The file a failed build could not read (``./.screeps.json``), relative to ``cwd`` where it lies under it
    (so that a temporary checkout's path is never shown), or ``None``."""
    for line in tail:
        for pattern in _MISSING_FILE:
            found = pattern.search(line)
            if found is None:
                continue
            path = Path(found.group(1))
            if path.is_absolute():
                return _relative(path, cwd)
            return str(path).removeprefix("./")
    return None


def _relative(path: Path, cwd: Path) -> str:
    """``path`` relative to ``cwd`` when it lies in the repository that holds ``cwd`` (so that a temporary
    checkout's path is never shown); else as it is."""
    for parent in (cwd, *cwd.parents):
        if (parent / ".git").exists():
            return os.path.relpath(path, cwd) if path.is_relative_to(parent) else str(path)
    return os.path.relpath(path, cwd) if path.is_relative_to(cwd) else str(path)


def _ignored_here(shown_dir: Path, name: str) -> bool:
    """Whether ``name`` exists in ``shown_dir`` (the working tree) and Git ignores it there."""
    if not (shown_dir / name).exists():
        return False
    try:
        run = subprocess.run(
            ["git", "check-ignore", "-q", "--", name], cwd=shown_dir, capture_output=True, check=False, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return run.returncode == 0


def _lockfile(folder: Path) -> str | None:
    for parent in (folder, *folder.parents):
        for name in LOCKFILES:
            if (parent / name).is_file():
                return name if parent == folder else str((parent / name).relative_to(folder.parent))
        if (parent / ".git").exists():
            break
    return None


def _declared(folder: Path, program: str) -> bool | None:
    """Whether ``package.json`` in ``folder`` names ``program`` as a dependency (``None``: no package.json)."""
    try:
        package = json.loads((folder / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(package, dict):
        return None
    names = dependencies(package)
    return program in names or any(name.rsplit("/", 1)[-1] == program for name in names)


def failure_hint(code: int, tail: list[str], cwd: Path, shown_dir: Path, *, fresh: bool) -> str:
    """The hint of a build that exited ``code`` after printing ``tail``, run in ``cwd``; ``shown_dir`` is the
    folder to name (the working tree's, for a temporary checkout: ``fresh``)."""
    missing = missing_file(tail, cwd)
    package = missing is not None and (missing.startswith("node_modules/") or "/node_modules/" in missing)
    if missing is not None and not package and not (tool_missing(code, tail) and not _looks_like_a_file(missing)):
        hint = f"The build reads {missing} (in {shown_dir}), which is not there: commit it, or make the build work "
        hint += "without it."
        if _ignored_here(shown_dir, missing):
            hint = (
                f"The build reads {missing}, which Git ignores: it is in {shown_dir}, but a checkout of a commit "
                "(--ref, --base, the GitHub Action's checkout) does not hold it. Make the build work without it, "
                "or write it in a step before gitops (never with a credential in it)."
            )
        return hint
    if tool_missing(code, tail):
        return _tool_hint(tail, cwd, shown_dir, fresh=fresh)
    return "Fix the build (run it by hand in the same folder to see all of its output), then try again."


def _looks_like_a_file(name: str) -> bool:
    return "/" in name or "." in Path(name).name


def _tool_hint(tail: list[str], cwd: Path, shown_dir: Path, *, fresh: bool) -> str:
    program = next((m.group(1) for line in tail if (m := _PROGRAM_NOT_FOUND.search(line))), None)
    if program is not None:
        program = program.rsplit("/", 1)[-1]
    declared = _declared(cwd, program) if program is not None else None
    if declared is None:
        what = f"{program} is" if program else "the build's program is"
        return (
            f"{what.capitalize()} not installed where the build runs and {shown_dir} has no package.json that "
            "installs it: install it there (in a GitHub workflow, a step before gitops), or fix build in the manifest."
        )
    lockfile = _lockfile(cwd)
    if program is not None and not declared:
        return (
            f"{program} is not among the dependencies of {shown_dir / 'package.json'}: add it (npm install "
            f"--save-dev {program}) and commit package.json and its lockfile, so that a fresh checkout installs it."
        )
    install = " ".join(install_argv(lockfile.rsplit("/", 1)[-1] if lockfile else None, yarn_berry=False)[:2])
    if lockfile is None:
        return (
            f"The packages of {shown_dir / 'package.json'} are not installed: run npm install there, and commit "
            "package-lock.json so that a fresh checkout installs the same ones (install: auto in the manifest)."
        )
    where = "the checkout" if fresh else str(shown_dir)
    return (
        f"The build's packages are not installed in {where}: {install} installs them from {lockfile} (the "
        "manifest's install: auto does it when node_modules is missing; is install set to 'never'?), or the "
        f"package the build needs is missing from {lockfile}: run npm install in {shown_dir} and commit it."
    )
