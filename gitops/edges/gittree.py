"""A Git ref (``--ref``): the blobs of one commit under a root, uncommitted changes ignored.

One ``git ls-tree -r`` per root and one pipelined ``git cat-file --batch`` for the contents; gitpython, imported only
here and only for ``--ref``, finds the repository, resolves the ref and follows symbolic links.
"""

from __future__ import annotations

import os
import posixpath
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from gitops.config.manifest import LoadedManifest
from gitops.core.branchbuild import UnreadableFile
from gitops.core.local import in_git_folder, printable
from gitops.edges.gitref import NOT_FOUND_HINT, resolve_commit
from gitops.edges.listing import BROKEN_LINK, ENDLESS_LINK, ROOT_IN_GIT, Leads, Listing, outside_note
from gitops.errors import SourceError

if TYPE_CHECKING:
    import git

_SYMLINK_MODE = 0o120000
_MAX_LINK_HOPS = 8


class GitTree:
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
    def open(cls, base_dir: Path, ref: str) -> GitTree:
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

    def listing(self, prefix: str) -> Listing | str:
        top = posixpath.normpath(posixpath.join(self.prefix, prefix)) if (self.prefix or prefix) else ""
        top = "" if top == "." else top
        if top == ".." or top.startswith("../"):
            return "leads outside the Git repository; put the code inside it"
        if in_git_folder(top):
            return ROOT_IN_GIT
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

        return Listing(sorted(blobs), read, f" in commit {self.short}", prefetch, unlisted)

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
                    notes[path] = BROKEN_LINK if state == "broken" else ENDLESS_LINK
                else:
                    notes[path] = outside_note(path, through=False, leads=_leads(state))
            elif target.type == "blob":
                blobs[path] = target.hexsha
                if state == "root":
                    notes[path] = outside_note(path, through=False)
            elif depth < _MAX_LINK_HOPS:
                inner: dict[str, str] = {}
                target_path = os.fspath(target.path)
                self._add(self._entries(target_path), target_path, top, prefix, f"{path}/", inner, notes, depth + 1)
                blobs.update(inner)
                if state == "root":
                    shown = posixpath.join(prefix, path) if prefix else path
                    notes.update(dict.fromkeys(inner, outside_note(shown, through=True)))

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
