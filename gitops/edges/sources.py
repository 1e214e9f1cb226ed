"""The local code: what each branch of the manifest holds in this repository.

The pure core (:func:`gitops.core.branchbuild.build_branch`) turns a branch's configuration, a listing of the
files under its root and a way to read a file into a code set with problems and warnings. Two thin edges feed it: the
working tree (files on disk, except what Git ignores unless the root itself is ignored, as a build's ``dist/`` is;
``.git`` and ``node_modules`` skipped; links followed while they stay inside the root), and a Git ref (``--ref``:
the blobs of that commit, uncommitted changes ignored; the manifest itself is always read from disk).

Only the repository's files are deployed, as with ``--ref``: a root or a link that leads outside the Git work tree
holding the manifest, or into ``.git``, is refused, because Git stores the link and ``--ref`` would deploy something
else. Nothing under a root is left out silently, because a module left out is removed from the server by the next
upload (``remote_only: remove``): what an edge cannot list or read reaches the core, which refuses it where the
branch's globs reach it. :func:`read_local_code` raises one :class:`~gitops.errors.SourceError` listing every problem.
"""

from __future__ import annotations

import errno
import os
import posixpath
import shlex
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from gitops.config.manifest import LoadedManifest, Loc
from gitops.edges.gitref import NOT_FOUND_HINT, resolve_commit
from gitops.edges.ignored import IgnoredFiles
from gitops.errors import SourceError

if TYPE_CHECKING:
    import git

from gitops.core.branchbuild import BranchBuild, UnreadableFile, build_branch, build_inputs
from gitops.core.local import (
    NEVER_MODULE_FOLDERS,
    LocalBranch,
    LocalCode,
    SourceInfo,
    in_git_folder,
    module_name,
    printable,
)

_SYMLINK_MODE = 0o120000
_MAX_LINK_HOPS = 8


# --- the edges ---------------------------------------------------------------------------------------------------


@dataclass
class _Listing:
    """The files under one root: ``paths`` relative to it, and ``read(path)``."""

    paths: list[str]
    read: Callable[[str], bytes]
    origin: str = ""
    prefetch: Callable[[list[str]], None] | None = None
    unlisted: dict[str, str] = field(default_factory=dict)


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


_MISSING_ROOT_FIX = "; create the folder, or fix root"


class _WorkTree:
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

    def listing(self, prefix: str) -> _Listing | str:
        """The files under ``prefix`` (relative to the manifest's folder), or why there are none."""
        root = self.base_dir / prefix if prefix else self.base_dir
        if in_git_folder(prefix):
            return _ROOT_IN_GIT
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
            return f"resolves to {printable(root_real)}, inside .git, {_GIT_FOLDER}; name a folder of the working tree"
        try:
            is_folder = stat.S_ISDIR(os.stat(root).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return f"does not exist in {self.base_dir}{_MISSING_ROOT_FIX}"
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
        return _Listing(paths, read, unlisted=unreadable)


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


_GIT_FOLDER = "Git's own folder (history, hooks and config, never code to deploy)"
_ROOT_IN_GIT = f"is inside .git, {_GIT_FOLDER}; name a folder of the working tree"

#: Where a symbolic link leads when its files must not be deployed.
Leads = Literal["root", "outside", "git"]
_LEADS = {
    "root": "leads outside the root",
    "outside": "leads outside the repository",
    "git": "leads into .git, Git's own folder",
}


def _outside_note(link: str, *, through: bool, leads: Leads = "root") -> str:
    # Git stores a link, not the files it leads to: --ref would deploy something else, so both edges refuse; and
    # a link may not carry files of the machine (outside the repository) or of .git into an upload.
    if through:
        return (
            f"is reached through {link}, a symbolic link that {_LEADS[leads]}; copy the files into the root, "
            "or exclude them"
        )
    return f"is a symbolic link that {_LEADS[leads]}; copy the file into the root, or exclude it"


_BROKEN_LINK = "is a broken symbolic link; fix or remove it, or exclude it"
_ENDLESS_LINK = "is a chain of symbolic links that does not end; fix it, or exclude it"
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
                    notes[path] = _ENDLESS_LINK  # a chain of links has nothing under it
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
                    notes[path] = _outside_note(shown, through=via != path, leads=leads_to)
            else:
                paths.append(path)
                notes[path] = _BROKEN_LINK if link and not os.path.exists(entry.path) else _NOT_A_FILE
    return paths


class _GitTree:
    """The blobs of one commit: one ``git ls-tree -r`` per root, one pipelined ``git cat-file --batch`` for the
    contents; gitpython finds the repository, resolves the ref and follows symbolic links."""

    def __init__(self, repo: git.Repo, commit: git.Commit, ref: str, top_dir: str, prefix: str) -> None:
        self.repo = repo
        self.commit = commit
        self.ref = ref
        self.top_dir = top_dir  # the repository's working tree
        self.prefix = prefix  # the manifest's folder, relative to the repository's top ('' at the top)
        self.short = commit.hexsha[:12]
        self._contents: dict[str, bytes] = {}

    @classmethod
    def open(cls, base_dir: Path, ref: str) -> _GitTree:
        import git  # noqa: PLC0415 (boundary: gitpython)

        try:
            repo = git.Repo(base_dir, search_parent_directories=True)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise SourceError(
                f"--ref {ref}: {base_dir} (the manifest's folder) is not in a Git repository",
                hint="Drop --ref to read the working tree, or run gitops inside a clone of the repository.",
            ) from None
        try:
            commit = repo.commit(resolve_commit(Path(repo.working_tree_dir or base_dir), ref))
        except SourceError:
            repo.close()
            raise
        except (git.BadName, git.BadObject, ValueError, git.GitCommandError):  # pragma: no cover - git found it
            repo.close()
            raise SourceError(
                f"--ref {ref}: no such commit, branch or tag in {repo.working_tree_dir}", hint=NOT_FOUND_HINT
            ) from None
        top = Path(repo.working_tree_dir or base_dir).resolve()
        try:
            prefix = base_dir.resolve().relative_to(top).as_posix()
        except ValueError:  # pragma: no cover - search_parent_directories found it above base_dir
            prefix = ""
        return cls(repo, commit, ref, str(top), "" if prefix == "." else prefix)

    def close(self) -> None:
        """Stop gitpython's persistent ``git cat-file`` processes: none may outlive the read."""
        self.repo.close()

    def _git(self, *args: str, stdin: bytes | None = None) -> bytes:
        env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_LITERAL_PATHSPECS": "1"}
        done = subprocess.run(["git", *args], cwd=self.top_dir, env=env, input=stdin, capture_output=True, check=False)
        if done.returncode != 0:
            raise SourceError(f"git {args[0]} failed in {self.top_dir}: {done.stderr.decode(errors='replace').strip()}")
        return done.stdout

    def _entries(self, path: str, submodules: list[str] | None = None) -> dict[str, tuple[int, str]]:
        """Every blob under ``path`` (repository-relative) in the commit: path -> (mode, object id).

        ``submodules`` gets the paths of the submodules under ``path``: the commit holds no files of theirs.
        """
        out = self._git("ls-tree", "-r", "-z", "--full-tree", self.commit.hexsha, *(["--", path] if path else []))
        entries: dict[str, tuple[int, str]] = {}
        for record in out.split(b"\0"):
            meta, _, name = record.partition(b"\t")
            fields = meta.split(b" ")
            if len(fields) == 3 and fields[1] == b"blob":
                entries[name.decode("utf-8", "surrogateescape")] = (int(fields[0], 8), fields[2].decode("ascii"))
            elif len(fields) == 3 and fields[1] == b"commit" and submodules is not None:
                submodules.append(name.decode("utf-8", "surrogateescape"))
        return entries

    def _data(self, sha: str) -> bytes:
        data = self._contents.get(sha)
        if data is None:
            _, _, _, raw = self.repo.git.get_object_data(sha)
            data = bytes(raw)
        return data

    def _fetch(self, shas: list[str]) -> None:
        """Read many blobs through one ``git cat-file --batch``, requests written ahead of the answers."""
        wanted = [sha for sha in dict.fromkeys(shas) if sha not in self._contents]
        if not wanted:
            return
        out = self._git("cat-file", "--batch", stdin="".join(f"{sha}\n" for sha in wanted).encode("ascii"))
        pos = 0
        for sha in wanted:
            end = out.index(b"\n", pos)
            header = out[pos:end].split(b" ")
            if len(header) != 3:  # pragma: no cover - ls-tree named it, so the object exists
                raise SourceError(f"git cat-file cannot read object {sha} in {self.top_dir}")
            size = int(header[2])
            self._contents[sha] = out[end + 1 : end + 1 + size]
            pos = end + 1 + size + 1

    def _object(self, path: str) -> git.Blob | git.Tree | None:
        try:
            obj = self.commit.tree / path if path else self.commit.tree
        except KeyError:
            return None
        return obj if obj.type in ("blob", "tree") else None

    def listing(self, prefix: str) -> _Listing | str:
        top = posixpath.normpath(posixpath.join(self.prefix, prefix)) if (self.prefix or prefix) else ""
        top = "" if top == "." else top
        if top == ".." or top.startswith("../"):
            return "leads outside the Git repository; put the code inside it"
        if in_git_folder(top):
            return _ROOT_IN_GIT
        tree = self._object(top)
        if tree is None:
            return f"does not exist in commit {self.short} (--ref {self.ref}); commit the folder, or fix root"
        if tree.type != "tree":
            return f"is not a folder in commit {self.short}; name the folder that holds the code"
        blobs: dict[str, str] = {}
        notes: dict[str, str] = {}
        submodules: list[str] = []
        self._add(self._entries(top, submodules), top, top, prefix, "", blobs, notes, depth=0)
        # The working tree holds a submodule's files, a commit only the submodule's commit id: never drop them silently.
        unlisted = {
            folder: (
                f"is a Git submodule, and --ref reads only the files of commit {self.short}, so the modules in it "
                "would be left out, and an upload would remove them from the server; deploy from the working tree "
                f"(without --ref), or exclude it with '{printable(folder)}/**'"
            )
            for folder in (full[len(top) + 1 :] if top else full for full in submodules)
        }

        def read(path: str) -> bytes:
            note = notes.get(path)
            if note is not None:
                raise UnreadableFile(note)
            return self._data(blobs[path])

        def prefetch(paths: list[str]) -> None:
            self._fetch([blobs[p] for p in paths if p in blobs and p not in notes])

        return _Listing(sorted(blobs), read, f" in commit {self.short}", prefetch, unlisted)

    def _add(
        self,
        entries: dict[str, tuple[int, str]],
        base: str,
        top: str,
        prefix: str,
        rel: str,
        blobs: dict[str, str],
        notes: dict[str, str],
        depth: int,
    ) -> None:
        """``entries`` (under ``base``) as paths under the root, starting with ``rel``; links resolved."""
        for full, (mode, sha) in entries.items():
            path = rel + (full[len(base) + 1 :] if base else full)
            if mode & 0o170000 != _SYMLINK_MODE:
                blobs[path] = sha
                continue
            target, state = self._follow(full, top)
            if target is None:
                blobs[path] = sha
                if state in ("broken", "endless"):
                    notes[path] = _BROKEN_LINK if state == "broken" else _ENDLESS_LINK
                else:
                    notes[path] = _outside_note(path, through=False, leads=_leads(state))
            elif target.type == "blob":
                blobs[path] = target.hexsha
                if state == "root":
                    notes[path] = _outside_note(path, through=False)
            elif depth < _MAX_LINK_HOPS:
                inner: dict[str, str] = {}
                target_path = os.fspath(target.path)
                self._add(self._entries(target_path), target_path, top, prefix, f"{path}/", inner, notes, depth + 1)
                blobs.update(inner)
                if state == "root":
                    shown = posixpath.join(prefix, path) if prefix else path
                    notes.update(dict.fromkeys(inner, _outside_note(shown, through=True)))

    def _follow(
        self, link_path: str, top: str
    ) -> tuple[git.Blob | git.Tree | None, Literal["inside", "root", "outside", "git", "broken", "endless"]]:
        """What a link stored in the commit leads to (within the commit), and whether it stays inside the root
        (``root``: it leaves the root; ``outside``: the repository; ``git``: it leads into .git)."""
        inside = top + "/" if top else ""
        path = link_path
        for _ in range(_MAX_LINK_HOPS):
            obj = self._object(path)
            if obj is None:
                return None, "git" if in_git_folder(path) else "broken"
            if obj.type == "tree" or obj.mode & 0o170000 != _SYMLINK_MODE:
                return obj, "inside" if path.startswith(inside) else "root"
            target = self._data(obj.hexsha).decode("utf-8", "surrogateescape")
            path = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
            if target.startswith("/") or path == ".." or path.startswith("../"):
                return None, "outside"  # outside the repository, so outside the root
        return None, "endless"

    def manifest_warning(self, loaded: LoadedManifest) -> str | None:
        rel = posixpath.join(self.prefix, loaded.path.name) if self.prefix else loaded.path.name
        obj = self._object(rel)
        if obj is None or obj.type != "blob":
            return f"the manifest {loaded.display} is not in commit {self.short}; it was read from disk"
        try:
            on_disk = loaded.path.read_bytes()
        except OSError:  # pragma: no cover - load_manifest just read it
            return None
        if self._data(obj.hexsha) != on_disk:
            return (
                f"the manifest {loaded.display} differs from the one in commit {self.short}; the manifest is "
                "always read from disk, the code from the commit"
            )
        return None


def _leads(state: str) -> Leads:
    return "outside" if state == "outside" else "git" if state == "git" else "root"


class _WorktreeStatus:
    """``HEAD`` and whether the roots or the manifest have uncommitted changes (``None`` outside Git), asked of
    ``git status`` while the files are read: started first, its answer taken once the read is done (:meth:`info`).
    The status walks the same files as the read: beside it, not before it (issue 23)."""

    def __init__(self, loaded: LoadedManifest) -> None:
        # No index lock (status must not collide with a git command the user runs at the same time); roots are
        # paths, not pathspec patterns.
        env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_LITERAL_PATHSPECS": "1"}
        specs = sorted({loaded.path.name, *(_root_prefix(b.root) or "." for b in loaded.manifest.branches)})
        self._process: subprocess.Popen[bytes] | None
        try:
            # One process for both facts: porcelain v2's '--branch' header names HEAD's commit ('(initial)' before
            # the first commit); every other record is a change. No ahead/behind count: it walks the upstream's
            # history.
            self._process = subprocess.Popen(
                ["git", "status", "--porcelain=v2", "-z", "--branch", "--no-ahead-behind", "--", *specs],
                cwd=loaded.base_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except OSError:  # git is not installed: the working tree is still readable
            self._process = None
        self._info: SourceInfo | None = None

    def info(self) -> SourceInfo:
        """What the status said (waits for it, once)."""
        if self._info is None:
            self._info = self._answer()
        return self._info

    def _answer(self) -> SourceInfo:
        if self._process is None:
            return SourceInfo("worktree", None, None, None)
        with self._process as process:
            out, _ = process.communicate()
        commit: str | None = None
        dirty: bool | None = None
        if process.returncode == 0:
            records = [r for r in out.split(b"\0") if r]
            for record in records:
                if record.startswith(b"# branch.oid "):
                    oid = record[len(b"# branch.oid ") :].decode("ascii", "replace").strip()
                    commit = oid if oid and oid != "(initial)" else None
            dirty = any(not r.startswith(b"# ") for r in records)
        return SourceInfo("worktree", None, commit, dirty)

    def close(self) -> None:
        """Stop a status nobody waited for (the read failed or was interrupted), and collect it."""
        if self._info is None and self._process is not None:
            with self._process as process:
                process.kill()
            self._info = SourceInfo("worktree", None, None, None)


def _root_prefix(root: str) -> str:
    norm = posixpath.normpath(root)
    return "" if norm == "." else norm


def read_local_code(
    loaded: LoadedManifest, ref: str | None = None, *, seen: Callable[[int], None] | None = None
) -> LocalCode:
    """The code of every branch of the manifest, from the working tree or from commit ``ref``. From the working
    tree, ``seen`` is told each file's modification time (nanoseconds) as it is read.

    Raises :class:`~gitops.errors.SourceError` listing every problem of every branch.
    """
    if ref is None:
        status = _WorktreeStatus(loaded)
        try:
            return _read_branches(loaded, _WorkTree(loaded.base_dir, seen=seen), status.info, [])
        finally:
            status.close()
    gtree = _GitTree.open(loaded.base_dir, ref)
    try:
        note = gtree.manifest_warning(loaded)
        source = SourceInfo("ref", ref, gtree.commit.hexsha, None)
        return _read_branches(loaded, gtree, lambda: source, [note] if note else [])
    finally:
        gtree.close()


def _read_branches(
    loaded: LoadedManifest, tree: _WorkTree | _GitTree, source_of: Callable[[], SourceInfo], warnings: list[str]
) -> LocalCode:
    """Every branch's code from ``tree``; ``source_of()``, asked once the files are read, says where it came from."""
    problems: list[str] = []
    branches: list[LocalBranch] = []
    listings: dict[str, _Listing | str] = {}
    # One bot deployed to several servers (the official world, a season, a private server) is the same files with
    # the same rules: built once, the code shared (each file read once). Only a build without problems or warnings
    # is shared, since those name the branch's server and its place in the manifest.
    clean_builds: list[tuple[tuple[object, ...], BranchBuild]] = []
    for i, config in enumerate(loaded.manifest.branches):

        def where(loc: Loc, i: int = i) -> str:
            return loaded.where(("branches", i, *loc))

        prefix = _root_prefix(config.root)
        if prefix not in listings:
            listings[prefix] = tree.listing(prefix)
        listing = listings[prefix]
        if isinstance(listing, str):
            command = config.build if config.build is not None else loaded.manifest.build
            if command is not None and listing.endswith(_MISSING_ROOT_FIX):
                # A build output that is not there after the build: the build writes another folder (or has not run,
                # with GITOPS_SKIP_BUILD); creating the folder by hand is never the fix.
                shown = command if isinstance(command, str) else shlex.join(command)
                listing = (
                    listing.removesuffix(_MISSING_ROOT_FIX) + f", and the build ({shown}) did not write it; set root "
                    "to the folder the build writes (its configuration's output), or fix build"
                )
            problems.append(f"{where(('root',))}: {config.root!r} {listing}")
            continue
        inputs = build_inputs(config)
        build = next((done for key, done in clean_builds if key == inputs), None)
        if build is None:
            build = build_branch(
                config,
                listing.paths,
                listing.read,
                prefix=prefix,
                origin=listing.origin,
                where=where,
                prefetch=listing.prefetch,
                unlisted=listing.unlisted,
            )
            if not build.problems and not build.warnings:
                clean_builds.append((inputs, build))
        problems += build.problems
        warnings += build.warnings
        local = LocalBranch(config.server, config.branch, build.code, build.files, build.kinds)
        local.__dict__["server_length"] = build.server_length  # computed already; spare the cached property
        branches.append(local)

    source = source_of()
    if problems:
        count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
        raise SourceError(
            f"the local code from the {source.describe()} cannot be deployed ({count}):\n  - " + "\n  - ".join(problems)
        )
    return LocalCode(branches, source, warnings)


__all__ = [
    "BranchBuild",
    "LocalBranch",
    "LocalCode",
    "SourceInfo",
    "UnreadableFile",
    "build_branch",
    "module_name",
    "printable",
    "read_local_code",
]


# --- for gitops pull: the same boundary, seen from the writing side ----------------------------------------------


def worktree_files(base_dir: Path, root: str) -> list[str] | None:
    """The files under ``root`` (relative to it, ``/`` separators) as the working tree holds them, or ``None`` when
    the root does not exist yet. :class:`SourceError` when it resolves outside the repository or into ``.git``, or
    cannot be listed: what :func:`read_local_code` would refuse to read, ``gitops pull`` refuses to write."""
    prefix = _root_prefix(root)
    listing = _WorkTree(base_dir).listing(prefix)
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
