"""``gitops init``'s edge: look at the repository, write the manifest the pure core wrote.

:func:`snapshot_of` lists the top of the repository, the files under a few folders (bounded: a ``target/`` folder
of a Rust build holds thousands) and reads ``package.json``; :func:`gitops.core.layoutdetect.detect_layout` decides;
:func:`gitops.app.scaffold.manifest_text` writes the text; :func:`write_new_manifest` puts it on disk, never
over an existing file.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gitops.app.scaffold import check_reads_back
from gitops.core.layout import READ_FILES, RepoSnapshot
from gitops.errors import SourceError, UsageError

#: At most this many names are listed under one folder (detection needs a few).
MAX_LISTED = 5000
#: ``package.json`` is read up to this size (a real one is a few kilobytes).
MAX_PACKAGE_JSON = 1024 * 1024
_SKIPPED = {".git", "node_modules"}
#: At most this many JavaScript files are read to learn the separator their requires use ...
MAX_SOURCES = 400
#: ... each up to this size (a bundle far larger is not a module the requires name).
MAX_SOURCE_BYTES = 256 * 1024
#: At most this many Python files are read to tell a Transcrypt bot.
MAX_PYTHON = 20


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
    """What :func:`gitops.core.layoutdetect.detect_layout` needs to know of the repository at ``folder`` (bounded: at
    most :data:`MAX_LISTED` names a folder, :data:`MAX_SOURCES` JavaScript files of :data:`MAX_SOURCE_BYTES`)."""
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
    for name in sorted(folders):
        # src and the output folders whole (target/ of a Rust build holds thousands: its top only); others one
        # level deep, enough to see the game client's folder-per-branch layout.
        inside[name] = _names(folder / name, recursive=name in ("src", "dist", "pkg"))
    contents: dict[str, str] = {}
    for name in READ_FILES:
        if name in files:
            text = _read_text(folder / name, MAX_PACKAGE_JSON)
            if text is not None:
                contents[name] = text
    # Python at the top and in src/: a bot compiled by Transcrypt says so in its sources.
    python = [n for n in sorted(files) if n.endswith(".py")] + [f"src/{p}" for p in sorted(inside.get("src", ()))]
    for path in [p for p in python if p.endswith(".py")][:MAX_PYTHON]:
        text = _read_text(folder / path, MAX_SOURCE_BYTES)
        if text is not None:
            contents[path] = text
    sources: dict[str, str] = {}
    candidates = [n for n in sorted(files) if n.endswith(".js")]
    candidates += [f"{name}/{p}" for name in sorted(folders) if name != "dist" for p in sorted(inside[name])]
    for path in candidates:
        if len(sources) >= MAX_SOURCES:
            break
        if path.endswith(".js"):
            text = _read_text(folder / path, MAX_SOURCE_BYTES)
            if text is not None:
                sources[path] = text
    return RepoSnapshot(frozenset(files), frozenset(folders), inside, contents, sources)


def _read_text(path: Path, limit: int) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def write_new_manifest(path: Path, text: str, meant: Mapping[str, Any]) -> None:
    """Write ``text`` to ``path`` whole or not at all, and never over an existing file (:class:`UsageError`).

    The file is written under a temporary name, read back and parsed, and linked into place only when it parses as
    ``meant`` (:func:`gitops.app.scaffold.check_reads_back`; else :class:`ManifestError` and nothing is left).
    It is created as any file the person makes (``0666`` less the umask): a manifest names variables, never holds
    a secret, and is committed.
    """
    refuse_existing(path)
    temp = path.parent / f".gitops-init-{os.urandom(8).hex()}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
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
        check_reads_back(temp.read_text(encoding="utf-8"), meant, where=str(path))
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
    try:
        exists = path.exists() or path.is_symlink()
    except OSError as exc:  # a name too long for the system (ENAMETOOLONG), a loop of links
        shown = str(path) if len(str(path)) <= 200 else f"{str(path)[:100]}…{str(path)[-100:]}"
        raise UsageError(
            f"{shown} cannot be the manifest's path ({exc.strerror or type(exc).__name__})",
            hint="Name the manifest with a shorter path with -m/--manifest.",
        ) from None
    if exists:
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
