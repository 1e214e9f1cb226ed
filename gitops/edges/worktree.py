"""The working tree: the files on disk under a root, only those of the Git repository holding the manifest.

Except what Git ignores (unless the root itself is ignored, as a build's ``dist/`` is); ``.git`` and ``node_modules``
skipped; links followed while they stay inside the root. ``gitops pull`` asks the same boundary from the writing side
(:func:`worktree_files`, :func:`outside_reason`).
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gitops.core.branchbuild import UnreadableFile
from gitops.core.local import NEVER_MODULE_FOLDERS, in_git_folder, printable
from gitops.edges.ignored import IgnoredFiles
from gitops.edges.listing import (
    BROKEN_LINK,
    ENDLESS_LINK,
    GIT_FOLDER,
    ROOT_IN_GIT,
    Leads,
    Listing,
    outside_note,
    root_prefix,
)
from gitops.errors import SourceError


@dataclass(frozen=True)
class _Repository:
    """The folder whose files may be deployed: the Git work tree holding the manifest (or, outside Git, the
    manifest's folder), and Git's own folder, which never may. Paths are real (links resolved)."""

    top: str
    git_dir: str | None

    @classmethod
    def of(cls, base_dir: Path) -> _Repository:
        env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
        try:
            found = subprocess.run(
                ["git", "rev-parse", "--show-toplevel", "--absolute-git-dir"],
                cwd=base_dir,
                env=env,
                capture_output=True,
                check=False,
            )
        except OSError:  # git is not installed: the manifest's folder is the boundary
            found = None
        if found is not None and found.returncode == 0:
            lines = os.fsdecode(found.stdout).splitlines()
            if len(lines) == 2 and lines[0] and lines[1]:
                return cls(os.path.realpath(lines[0]), os.path.realpath(lines[1]))
        return cls(os.path.realpath(base_dir), None)

    def why_not(self, real: str) -> Literal["outside", "git"] | None:
        """Why the file or folder at ``real`` (a resolved path) must not be deployed, or ``None`` when it may."""
        if not _under(real, self.top):
            return "outside"
        if (self.git_dir is not None and _under(real, self.git_dir)) or in_git_folder(
            os.path.relpath(real, self.top).replace(os.sep, "/")
        ):
            return "git"
        return None


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


MISSING_ROOT_FIX = "; create the folder, or fix root"


class WorkTree:
    """Files on disk under the manifest's folder, and only those of the repository that holds it."""

    def __init__(
        self, base_dir: Path, repository: _Repository | None = None, seen: Callable[[int], None] | None = None
    ) -> None:
        self.base_dir = base_dir
        self.repository = repository or _Repository.of(base_dir)
        self._ignored: IgnoredFiles | None = None
        self._seen = seen  # told each file's modification time as it is read (read_whole)

    def _skip(self, prefix: str) -> Callable[[str], bool] | None:
        """What Git ignores under the root ``prefix``: nothing when the root itself is ignored (a build output)."""
        if self._ignored is None:
            self._ignored = IgnoredFiles.ask_git(self.base_dir)
        ignored = self._ignored
        if not (ignored.files or ignored.folders) or ignored.covers(prefix or "."):
            return None
        return lambda rel: ignored.covers(posixpath.join(prefix, rel) if prefix else rel)

    def listing(self, prefix: str) -> Listing | str:
        """The files under ``prefix`` (relative to the manifest's folder), or why there are none."""
        root = self.base_dir / prefix if prefix else self.base_dir
        if in_git_folder(prefix):
            return ROOT_IN_GIT
        # The same boundary as --ref, where a commit holds only the repository's files: a root that resolves
        # outside the repository (through '..' or a link) or into .git would deploy files of the machine.
        root_real = os.path.realpath(root)
        why = self.repository.why_not(root_real)
        if why == "outside":
            return (
                f"resolves to {printable(root_real)}, outside the repository {printable(self.repository.top)}, and "
                "only the repository's files are deployed; put the code inside the repository, or fix root"
            )
        if why == "git":
            return f"resolves to {printable(root_real)}, inside .git, {GIT_FOLDER}; name a folder of the working tree"
        try:
            is_folder = stat.S_ISDIR(os.stat(root).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return f"does not exist in {self.base_dir}{MISSING_ROOT_FIX}"
        except OSError as exc:  # a name too long, a chain of links without end, no permission
            return f"cannot be read ({exc.strerror or type(exc).__name__}); make the folder readable, or fix root"
        if not is_folder:
            return f"is not a folder in {self.base_dir}; name the folder that holds the code"
        notes: dict[str, str] = {}
        unlisted: dict[str, str] = {}
        paths = _walk(str(root), root_real, self.repository, notes, prefix, unlisted, self._skip(prefix))
        if "" in unlisted:
            return f"cannot be read ({unlisted['']}); make the folder readable, or fix root"
        # Reading happens only for selected files; a link leaving the root is refused when (and only when) used.
        base = os.path.join(root, "")  # ends with the separator: a path under it is base + path
        seen = self._seen

        def read(path: str) -> bytes:
            note = notes.get(path)
            if note is not None:
                raise UnreadableFile(note)
            try:
                return read_whole(base + path, seen)
            except OSError as exc:
                raise UnreadableFile(f"cannot be read ({exc.strerror}); check its permissions") from None

        unreadable = {
            folder: (
                f"cannot be read ({reason}), so the modules in it would be left out, and an upload would remove them "
                f"from the server; make the folder readable, or exclude it with '{printable(folder)}/**'"
            )
            for folder, reason in unlisted.items()
        }
        return Listing(paths, read, unlisted=unreadable)


#: How a module's file is opened: read only, not inherited by a build's processes, no newline translation (Windows).
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def read_whole(path: str, seen: Callable[[int], None] | None = None) -> bytes:
    """A file's bytes, read with the system's calls: the size first, then one read (another until the end when the
    file grew meanwhile). Quicker than ``open(path, "rb").read()`` for a bot's many small files, whose Python file
    objects cost more than the reading (issue 23). ``seen`` is told the file's modification time
    (nanoseconds), which the size's call gave."""
    fd = os.open(path, _READ_FLAGS)
    try:
        facts = os.fstat(fd)
        if seen is not None:
            seen(facts.st_mtime_ns)
        size = facts.st_size
        data = os.read(fd, size + 1)
        if len(data) <= size:
            return data
        parts = [data]
        while chunk := os.read(fd, 1 << 20):
            parts.append(chunk)
        return b"".join(parts)
    finally:
        os.close(fd)


_NOT_A_FILE = "is not a regular file (a named pipe, socket or device); remove it, or exclude it"


def _walk(
    root: str,
    root_real: str,
    repository: _Repository,
    notes: dict[str, str],
    prefix: str,
    unlisted: dict[str, str],
    skip: Callable[[str], bool] | None = None,
) -> list[str]:
    """Relative paths of the files under ``root``; links are followed (once each), ``.git`` and ``node_modules``
    are skipped, and so is each path for which ``skip(path)`` holds (what Git ignores).

    ``notes`` gets the files that must not become modules: broken and endless links, files reached through a link
    that leaves the root (or the repository, or leads into .git), and what is not a regular file. ``unlisted`` gets
    the folders whose entries could not be listed (``""`` for the root itself), with the system's reason: nothing
    under the root is left out silently.
    """
    paths: list[str] = []
    seen: set[str] = {root_real}
    stack: list[tuple[str, str, tuple[str, Leads] | None]] = [(root, "", None)]
    while stack:
        folder, rel, outside = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            unlisted[rel[:-1]] = exc.strerror or type(exc).__name__
            continue
        for entry in entries:
            if entry.name in NEVER_MODULE_FOLDERS:
                continue
            path = f"{rel}{entry.name}"
            if skip is not None and skip(path):
                continue
            try:
                link = entry.is_symlink()
                is_dir = entry.is_dir()
                is_file = entry.is_file()
            except OSError as exc:
                # What the entry is cannot be told: as a file it is refused when included, as a folder when
                # include could reach into it.
                paths.append(path)
                if exc.errno == errno.ELOOP:
                    notes[path] = ENDLESS_LINK  # a chain of links has nothing under it
                else:
                    reason = exc.strerror or type(exc).__name__
                    notes[path] = f"cannot be read ({reason}); check its permissions"
                    unlisted[path] = reason
                continue
            escapes = outside
            if link:
                real = os.path.realpath(entry.path)
                if escapes is None and (is_dir or is_file):
                    leads: Leads | None = repository.why_not(real)
                    if leads is None and not _under(real, root_real):
                        leads = "root"
                    if leads is not None:
                        escapes = (path, leads)
                if is_dir:
                    if real in seen:
                        continue
                    seen.add(real)
            if is_dir:
                stack.append((entry.path, f"{path}/", escapes))
            elif is_file:
                paths.append(path)
                if escapes is not None:
                    via, leads_to = escapes
                    shown = posixpath.join(prefix, via) if prefix else via
                    notes[path] = outside_note(shown, through=via != path, leads=leads_to)
            else:
                paths.append(path)
                notes[path] = BROKEN_LINK if link and not os.path.exists(entry.path) else _NOT_A_FILE
    return paths


def worktree_files(base_dir: Path, root: str) -> list[str] | None:
    """The files under ``root`` (relative to it, ``/`` separators) as the working tree holds them, or ``None`` when
    the root does not exist yet. :class:`SourceError` when it resolves outside the repository or into ``.git``, or
    cannot be listed: what :func:`read_local_code` would refuse to read, ``gitops pull`` refuses to write."""
    prefix = root_prefix(root)
    listing = WorkTree(base_dir).listing(prefix)
    if isinstance(listing, str):
        if listing.startswith("does not exist"):
            return None
        raise SourceError(f"root {prefix or '.'} {listing}")
    return listing.paths


def outside_reason(base_dir: Path, real: str) -> str | None:
    """Why the resolved path ``real`` is not a place of the repository holding ``base_dir`` (outside it, or in
    ``.git``), or ``None`` when it is."""
    why = _Repository.of(base_dir).why_not(real)
    if why == "outside":
        return "leads outside the repository"
    if why == "git":
        return "leads into .git, Git's own folder"
    return None
