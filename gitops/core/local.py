"""The local code of each branch, as pure data: what a local read hands to planning.

These values travel: a forked local read pickles them back to the parent, which plans with them and must not pay
for what made them (the glob matching of :mod:`gitops.core.globs`, the requires check). So the building lives in
:mod:`gitops.core.branchbuild`, and this module keeps the data and the naming rules that both sides share
(:func:`module_name`, :func:`never_module`, :func:`printable`, :func:`in_git_folder`). The edges that list and read
files (the working tree, a Git ref) live in :mod:`gitops.edges.sources`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from gitops.config.manifest import Naming
from gitops.core.codeset import CodeSet
from gitops.core.modulekinds import Kind


@dataclass(frozen=True)
class SourceInfo:
    """Where the local code came from: the working tree, the blobs of a commit (``--ref``), a code set file that
    a build job wrote (``--codeset``; ``ref`` is then the file's path), or the code kept for an earlier deploy
    (``gitops rollback``; ``ref`` is then ``deploy #N`` and ``commit`` the commit that deploy came from, so that the
    rollback is recorded under the commit it restores, not the one checked out).

    ``commit`` is the full commit id (for the working tree: ``HEAD``, when the folder is in a Git repository);
    ``dirty`` says whether the working tree differs from ``HEAD`` under the branch roots or in the manifest
    (``None`` for a ref, or outside Git).
    """

    kind: Literal["worktree", "ref", "codeset", "rollback"]
    ref: str | None
    commit: str | None
    dirty: bool | None

    def describe(self) -> str:
        """``working tree (commit 1a2b3c4d5e6f, uncommitted changes)`` or ``ref main (commit 1a2b3c4d5e6f)``."""
        if self.kind == "ref":
            return f"ref {self.ref} (commit {(self.commit or '')[:12]})"
        if self.kind == "codeset":
            return f"code set {self.ref} (commit {(self.commit or '')[:12] or 'none'})"
        if self.kind == "rollback":
            return f"the code kept for {self.ref} (commit {(self.commit or '')[:12] or 'unknown'})"
        details = []
        if self.commit:
            details.append(f"commit {self.commit[:12]}")
        if self.dirty:
            details.append("uncommitted changes")
        return "working tree" + (f" ({', '.join(details)})" if details else "")


@dataclass(frozen=True)
class LocalBranch:
    """The code of one branch of the manifest. ``files`` maps module name to the file it came from (relative to
    the manifest's folder, ``/`` separators)."""

    server: str
    branch: str
    code: CodeSet
    files: dict[str, str]
    #: module name -> "javascript", "source map" or "binary"
    kinds: Mapping[str, Kind] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.server}/{self.branch}"

    @cached_property
    def server_length(self) -> int:
        """``JSON.stringify(modules).length``, as the server counts it against the 5 MB limit."""
        return self.code.server_length()


@dataclass(frozen=True)
class LocalCode:
    """The code of every branch of the manifest, in manifest order."""

    branches: list[LocalBranch]
    source: SourceInfo
    warnings: list[str]

    def get(self, server: str, branch: str) -> LocalBranch | None:
        return next((b for b in self.branches if b.server == server and b.branch == branch), None)


def module_name(path: str, *, binary: bool, naming: Naming) -> str:
    """The module name of a file at ``path`` (relative to the branch root, ``/`` separators).

    The name loses the longest of ``naming.strip_suffixes`` that ends the path, for text and binary modules alike
    (``binary`` is accepted for older callers and changes nothing): with the default ``[".js"]`` a ``.wasm`` file
    keeps its suffix, and listing ``.wasm`` there names ``pkg/mybot_bg.wasm`` ``pkg/mybot_bg``, as
    ``require('mybot_bg')`` in a cargo-screeps loader expects. Folder boundaries become ``naming.separator``:
    ``role/harvester.js`` is ``role/harvester`` or ``role.harvester``.
    """
    del binary  # binary modules are named like text modules since issue 13
    name = path
    for suffix in sorted(naming.strip_suffixes, key=len, reverse=True):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
            break
    if naming.separator != "/":
        name = name.replace("/", naming.separator)
    return name


#: Folders whose files are never modules, in the working tree and in a commit alike: dependencies and Git's own.
NEVER_MODULE_FOLDERS = frozenset({"node_modules", ".git"})


def never_module(path: str) -> bool:
    """Whether ``path`` lies in a folder that never holds modules (``node_modules/``, ``.git/``)."""
    return any(part in NEVER_MODULE_FOLDERS for part in path.split("/")[:-1])


def printable(path: str) -> str:
    """``path`` for a message: the bytes of a name that is not UTF-8 (``os.fsdecode`` made them lone surrogates)
    shown as ``\\xe9``, so that printing it cannot fail."""
    if path.isascii():
        return path
    try:
        raw = path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that no undecodable byte made
        return path.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


def in_git_folder(path: str) -> bool:
    """Whether ``path`` (``/`` separators, relative to the repository or the root) names ``.git`` or something in it.

    Git's own folder holds the history, hooks and config (remote URLs may carry tokens): never a module. A working
    tree skips ``.git`` folders when it walks; this catches a root, or a link's target, that names one.
    """
    # Case-insensitively, as Git itself protects the name (a case-insensitive file system opens .GIT as .git).
    return ".git" in posixpath.normpath(path).casefold().split("/")
