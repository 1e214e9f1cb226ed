"""The local code: what each branch of the manifest holds in this repository.

The pure core (:func:`gitops.core.branchbuild.build_branch`) turns a branch's configuration, a listing of the
files under its root and a way to read a file into a code set with problems and warnings. Two thin edges feed it
(each a :class:`~gitops.edges.listing.Listing` per root): the working tree (:mod:`gitops.edges.worktree`: files on
disk, except what Git ignores unless the root itself is ignored, as a build's ``dist/`` is; ``.git`` and
``node_modules`` skipped; links followed while they stay inside the root), and a Git ref (``--ref``,
:mod:`gitops.edges.gittree`: the blobs of that commit, uncommitted changes ignored; the manifest itself is always read
from disk). This module reads every branch of the manifest through one of them.

Only the repository's files are deployed, as with ``--ref``: a root or a link that leads outside the Git work tree
holding the manifest, or into ``.git``, is refused, because Git stores the link and ``--ref`` would deploy something
else. Nothing under a root is left out silently, because a module left out is removed from the server by the next
upload (``remote_only: remove``): what an edge cannot list or read reaches the core, which refuses it where the
branch's globs reach it. :func:`read_local_code` raises one :class:`~gitops.errors.SourceError` listing every problem.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Callable

from gitops.config.manifest import LoadedManifest, Loc
from gitops.core.branchbuild import BranchBuild, UnreadableFile, build_branch, build_inputs
from gitops.core.local import LocalBranch, LocalCode, SourceInfo, module_name, printable
from gitops.edges.gittree import GitTree
from gitops.edges.listing import Listing, root_prefix
from gitops.edges.worktree import MISSING_ROOT_FIX, WorkTree
from gitops.errors import SourceError


class _WorktreeStatus:
    """``HEAD`` and whether the roots or the manifest have uncommitted changes (``None`` outside Git), asked of
    ``git status`` while the files are read: started first, its answer taken once the read is done (:meth:`info`).
    The status walks the same files as the read: beside it, not before it (issue 23)."""

    def __init__(self, loaded: LoadedManifest) -> None:
        # No index lock (status must not collide with a git command the user runs at the same time); roots are
        # paths, not pathspec patterns.
        env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_LITERAL_PATHSPECS": "1"}
        specs = sorted({loaded.path.name, *(root_prefix(b.root) or "." for b in loaded.manifest.branches)})
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
            return _read_branches(loaded, WorkTree(loaded.base_dir, seen=seen), status.info, [])
        finally:
            status.close()
    gtree = GitTree.open(loaded.base_dir, ref)
    try:
        note = gtree.manifest_warning(loaded)
        source = SourceInfo("ref", ref, gtree.commit.hexsha, None)
        return _read_branches(loaded, gtree, lambda: source, [note] if note else [])
    finally:
        gtree.close()


def _read_branches(
    loaded: LoadedManifest, tree: WorkTree | GitTree, source_of: Callable[[], SourceInfo], warnings: list[str]
) -> LocalCode:
    """Every branch's code from ``tree``; ``source_of()``, asked once the files are read, says where it came from."""
    problems: list[str] = []
    branches: list[LocalBranch] = []
    listings: dict[str, Listing | str] = {}
    # One bot deployed to several servers (the official world, a season, a private server) is the same files with
    # the same rules: built once, the code shared (each file read once). Only a build without problems or warnings
    # is shared, since those name the branch's server and its place in the manifest.
    clean_builds: list[tuple[tuple[object, ...], BranchBuild]] = []
    for i, config in enumerate(loaded.manifest.branches):

        def where(loc: Loc, i: int = i) -> str:
            return loaded.where(("branches", i, *loc))

        prefix = root_prefix(config.root)
        if prefix not in listings:
            listings[prefix] = tree.listing(prefix)
        listing = listings[prefix]
        if isinstance(listing, str):
            command = config.build if config.build is not None else loaded.manifest.build
            if command is not None and listing.endswith(MISSING_ROOT_FIX):
                # A build output that is not there after the build: the build writes another folder (or has not run,
                # with GITOPS_SKIP_BUILD); creating the folder by hand is never the fix.
                shown = command if isinstance(command, str) else shlex.join(command)
                listing = (
                    listing.removesuffix(MISSING_ROOT_FIX) + f", and the build ({shown}) did not write it; set root "
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
