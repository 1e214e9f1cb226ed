"""``gitops init``'s edge: look at the repository, write the manifest the pure core wrote.

:func:`snapshot_of` lists the top of the repository, the files under a few folders (bounded: a ``target/`` folder
of a Rust build holds thousands) and reads ``package.json``; :func:`gitops.core.layout.detect_layout` decides;
:func:`gitops.config.scaffold.manifest_text` writes the text; :func:`write_new_manifest` puts it on disk, never
over an existing file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from gitops.core.layout import OUTPUT_FOLDERS, RepoSnapshot
from gitops.errors import SourceError, UsageError

#: At most this many names are listed under one folder (detection needs a few).
MAX_LISTED = 5000
#: ``package.json`` is read up to this size (a real one is a few kilobytes).
MAX_PACKAGE_JSON = 1024 * 1024
_SKIPPED = {".git", "node_modules"}


def _names(folder: Path, *, recursive: bool) -> frozenset[str]:
    found: list[str] = []
    stack = [(folder, "")]
    while stack and len(found) < MAX_LISTED:
        current, rel = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue  # detection is a guess: an unreadable folder is one the person fixes in the manifest
        for entry in entries:
            if entry.name in _SKIPPED:
                continue
            try:
                is_dir = entry.is_dir()
            except OSError:
                continue
            if is_dir:
                if recursive:
                    stack.append((Path(entry.path), f"{rel}{entry.name}/"))
            else:
                found.append(f"{rel}{entry.name}")
    return frozenset(found[:MAX_LISTED])


def snapshot_of(folder: Path) -> RepoSnapshot:
    """What :func:`gitops.core.layout.detect_layout` needs to know of the repository at ``folder``."""
    files: set[str] = set()
    folders: set[str] = set()
    try:
        entries = list(os.scandir(folder))
    except OSError as exc:
        raise UsageError(
            f"{folder} cannot be listed ({exc.strerror or exc}); run gitops init in your bot's folder"
        ) from None
    for entry in entries:
        if entry.name in _SKIPPED:
            continue
        try:
            (folders if entry.is_dir() else files).add(entry.name)
        except OSError:
            continue
    inside: dict[str, frozenset[str]] = {}
    if "src" in folders:
        inside["src"] = _names(folder / "src", recursive=True)
    for name in OUTPUT_FOLDERS:
        if name in folders:
            inside[name] = _names(folder / name, recursive=name != "target")
    contents: dict[str, str] = {}
    if "package.json" in files:
        try:
            with open(folder / "package.json", "rb") as fh:
                contents["package.json"] = fh.read(MAX_PACKAGE_JSON).decode("utf-8", "replace")
        except OSError:
            pass
    return RepoSnapshot(frozenset(files), frozenset(folders), inside, contents)


def write_new_manifest(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all, and never over an existing file (:class:`UsageError`)."""
    refuse_existing(path)
    try:
        fd, temp = tempfile.mkstemp(prefix=".gitops-init-", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise SourceError(
            f"{path} cannot be written ({exc.strerror or type(exc).__name__})",
            hint="Run gitops init in a folder you can write, or name another file with -m.",
        ) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            # A hard link fails when the name exists: no race can make init overwrite a manifest written meanwhile.
            os.link(temp, path)
        except FileExistsError:
            raise _exists(path) from None
        except OSError:  # a file system without hard links: the check above is the guard
            os.replace(temp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)


def refuse_existing(path: Path) -> None:
    """:class:`UsageError` when ``path`` exists (even as a broken link): init never overwrites a manifest."""
    if path.exists() or path.is_symlink():
        raise _exists(path)


def _exists(path: Path) -> UsageError:
    return UsageError(
        f"{path} already exists; gitops init writes a new manifest and never overwrites one",
        hint="Check it with 'gitops validate', bring the server's code in with 'gitops pull', or move the file "
        "away and run gitops init again.",
    )


def ignore_credentials_file(folder: Path) -> Path | None:
    """When the manifest names a credentials-file entry and ``folder`` (in a Git work tree) would hold that file
    as ``.screeps.yaml`` without Git ignoring it, add it to the folder's ``.gitignore`` (created when missing);
    the ``.gitignore`` changed, or ``None`` (already ignored, or not in a Git work tree)."""
    import subprocess

    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    try:
        inside = subprocess.run(
            ["git", "rev-parse", "--is-inside-work-tree"], cwd=folder, env=env, capture_output=True, check=False
        )
        if inside.returncode != 0:
            return None
        ignored = subprocess.run(
            ["git", "check-ignore", "-q", "--", ".screeps.yaml"], cwd=folder, env=env, capture_output=True, check=False
        )
    except OSError:
        return None
    if ignored.returncode == 0:
        return None
    gitignore = folder / ".gitignore"
    before = gitignore.read_text(encoding="utf-8") if gitignore.is_file() else ""
    gap = "" if not before or before.endswith("\n") else "\n"
    gitignore.write_text(
        f"{before}{gap}# the screepers credentials file holds tokens\n.screeps.yaml\n", encoding="utf-8"
    )
    return gitignore
