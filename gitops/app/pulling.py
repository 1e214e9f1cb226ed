"""The pull use case: download the branches, decide the files (pure, :mod:`gitops.core.pull`), write them.

The order, so that a refusal writes nothing: pick the branches (``--server``/``--branch``); check every root lies in
the repository; check the downloads fit the budget (the planning layer's own gate); download; decide every file
of every branch; refuse hostile module names and the paths a pull must never write (:mod:`gitops.core.protected`:
the manifest, a build's configuration, dot-files, names Git refuses, names that collide on a case-insensitive file
system), files with uncommitted changes (``git status``; ``--force`` overrides) and paths that a symbolic link
would carry out of the root; only then write, each file atomically and relative to folders opened without
following links (:mod:`gitops.edges.safewrite`), so that a link swapped in meanwhile cannot redirect it. A write
that fails part-way stops with the list of what was written and what was not. It never prints.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gitops.app.budgetgates import check_download_budget
from gitops.app.session import Session
from gitops.config.manifest import BranchConfig, LoadedManifest
from gitops.core.codeset import CodeSet
from gitops.core.pull import BranchPull, plan_branch_pull
from gitops.edges.gitout import git_text
from gitops.edges.safewrite import write_under
from gitops.edges.worktree import outside_reason, worktree_files
from gitops.errors import ServiceError, SourceError

#: Paths per ``git status`` call (far below any command-line limit).
_STATUS_CHUNK = 200


@dataclass
class PullResult:
    """What a pull did (or, with ``dry_run``, would do): each branch's files, and the branches the server lacks."""

    branches: list[BranchPull] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    dry_run: bool = False


def _root_dir(loaded: LoadedManifest, config: BranchConfig) -> Path:
    return loaded.base_dir / config.root


def _shown(config: BranchConfig, path: str) -> str:
    root = config.root.strip("/")
    return path if root in ("", ".") else f"{root}/{path}"


def pull(
    session: Session,
    configs: list[BranchConfig],
    *,
    force: bool = False,
    dry_run: bool = False,
    prefetched: Mapping[tuple[str, str], CodeSet | None] | None = None,
) -> PullResult:
    """Bring the server's code of each branch in ``configs`` into its root (see the module's docstring).
    ``prefetched`` holds code already downloaded in this run (``gitops init --pull``), which is not asked again."""
    prefetched = prefetched or {}
    loaded = session.loaded
    listings: dict[tuple[str, str], list[str]] = {}
    for config in configs:
        listings[(config.server, config.branch)] = worktree_files(loaded.base_dir, config.root) or []

    per_server: dict[str, list[BranchConfig]] = {}
    for config in configs:
        per_server.setdefault(config.server, []).append(config)
    for server, branches in per_server.items():
        needed = sum(1 for c in branches if (c.server, c.branch) not in prefetched)
        if needed:
            check_download_budget(
                session, server, needed, doing="the pull", instead="Pull fewer branches (--branch NAME), wait"
            )

    result = PullResult(dry_run=dry_run)
    for server, branches in per_server.items():
        reader = session.reader(server)
        for config in branches:
            key = (config.server, config.branch)
            code = prefetched[key] if key in prefetched else reader.get_code(config.branch)
            if code is None:
                result.missing.append(f"{server}/{config.branch}")
                continue
            root = _root_dir(loaded, config)
            listing = listings[(config.server, config.branch)]

            def current(path: str, root: Path = root, listed: frozenset[str] = frozenset(listing)) -> bytes | None:
                if path not in listed:
                    return None
                try:
                    with open(root / path, "rb") as fh:
                        return fh.read()
                except OSError:
                    return None  # unreadable: it counts as different, and the write says why it fails

            result.branches.append(
                plan_branch_pull(
                    config, code, listing, current, manifest_names=_manifest_names(loaded), builds=_builds(loaded)
                )
            )
        session.save()

    refused = [f"{b.label}: {line}" for b in result.branches for line in b.refused]
    if refused:
        raise ServiceError(
            "the server's code holds module names that cannot be files under the root; nothing was written:\n"
            + "\n".join(f"  - {line}" for line in refused),
            hint="Rename or delete those modules on the server (in the game's editor), then pull again.",
        )
    configs_by_label = {f"{c.server}/{c.branch}": c for c in configs}
    problems = _escapes(loaded, configs_by_label, result.branches)
    if not force:
        problems += _uncommitted(loaded, configs_by_label, result.branches)
    if problems:
        raise SourceError(
            "the pull would overwrite files it must not; nothing was written:\n"
            + "\n".join(f"  - {line}" for line in problems),
            hint="Commit or stash your changes first (git stash), or pass --force to overwrite them.",
        )
    if not dry_run:
        write_files(loaded, configs_by_label, result.branches)
    return result


def _manifest_names(loaded: LoadedManifest) -> frozenset[str]:
    """The manifest's own file name (whatever it is called), which no module may overwrite."""
    return frozenset({loaded.path.name.casefold()})


def _builds(loaded: LoadedManifest) -> bool:
    """Whether something in the repository may run a ``build.js``: a ``package.json`` beside the manifest, or a
    branch's ``build:`` command. Without either (a flat bot adopted by ``gitops init --pull``), nothing does."""
    return (loaded.base_dir / "package.json").exists() or any(b.build for b in loaded.manifest.branches)


def _escapes(loaded: LoadedManifest, configs: dict[str, BranchConfig], pulls: list[BranchPull]) -> list[str]:
    """Paths that a symbolic link would carry out of the root (or the repository), and links pull would replace."""
    problems: list[str] = []
    for branch in pulls:
        config = configs[branch.label]
        root = _root_dir(loaded, config)
        root_real = os.path.realpath(root)
        for write in branch.changes:
            shown = _shown(config, write.path)
            try:
                problem = _escape(loaded, root, root_real, write.path, shown)
            except OSError as exc:  # a path the system will not take (too long): refused before any write
                problem = f"{shown} cannot be written there ({exc.strerror or type(exc).__name__})"
            if problem is not None:
                problems.append(problem)
    return problems


def _escape(loaded: LoadedManifest, root: Path, root_real: str, path: str, shown: str) -> str | None:
    """Why writing ``path`` under the root is refused (a link in the way, or a folder leading out), or ``None``."""
    target = root / path
    if target.is_symlink():
        return f"{shown} is a symbolic link; pull writes files, not through links: remove it"
    # The deepest folder that exists on the way must resolve inside the root.
    folder = target.parent
    while not folder.exists() and folder != root:
        folder = folder.parent
    real = os.path.realpath(folder)
    outside = outside_reason(loaded.base_dir, real)
    if outside is not None or not (real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)):
        why = outside or "leads outside the root"
        return f"{shown}: its folder {why} (through a symbolic link); pull writes only under the root"
    return None


def _uncommitted(loaded: LoadedManifest, configs: dict[str, BranchConfig], pulls: list[BranchPull]) -> list[str]:
    """The files pull would change that hold uncommitted work (``git status``: modified, staged, untracked or
    deleted). Ignored files are build output and are overwritten. Outside Git every existing file counts."""
    targets: dict[str, str] = {}
    for branch in pulls:
        config = configs[branch.label]
        for write in branch.changes:
            relative = os.path.relpath(_root_dir(loaded, config) / write.path, loaded.base_dir)
            targets[relative.replace(os.sep, "/")] = _shown(config, write.path)
    if not targets:
        return []
    dirty: set[str] = set()
    paths = sorted(targets)
    top = _git_prefix(loaded.base_dir)
    for start in range(0, len(paths), _STATUS_CHUNK):
        chunk = paths[start : start + _STATUS_CHUNK]
        try:
            done = subprocess.run(
                ["git", "--literal-pathspecs", "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", *chunk],
                cwd=loaded.base_dir,
                env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
                capture_output=True,
                check=False,
            )
        except OSError:
            done = None
        if done is None or done.returncode != 0:
            # Not a Git repository (or no git): whether a file holds unsaved work cannot be told.
            return [
                f"{targets[p]} exists and {loaded.base_dir} is not in a Git repository, so pull cannot tell whether "
                "it holds work of yours"
                for p in paths
                if (loaded.base_dir / p).exists()
            ]
        entries = iter(os.fsdecode(done.stdout).split("\0"))
        for entry in entries:
            if len(entry) < 4:
                continue
            # Paths are named from the top of the work tree; a rename or copy is followed by its source path.
            path = entry[3:]
            dirty.add(path[len(top) :] if top and path.startswith(top) else path)
            if entry[0] in "RC":
                next(entries, None)
    return [f"{targets[p]} has uncommitted changes" for p in paths if p in dirty]


def _git_prefix(base_dir: Path) -> str:
    """The manifest folder's path inside the work tree (``git status`` names files from the top), e.g. ``bot/``."""
    return git_text(["rev-parse", "--show-prefix"], base_dir) or ""


def write_files(loaded: LoadedManifest, configs: dict[str, BranchConfig], pulls: list[BranchPull]) -> None:
    """Write every changed file of ``pulls``, each atomically, in order; :class:`SourceError` at the first that
    fails, listing what was written and what was not."""
    written: list[str] = []
    pending = [(configs[b.label], w) for b in pulls for w in b.changes]
    for k, (config, write) in enumerate(pending):
        try:
            write_under(_root_dir(loaded, config), write.path, write.data)
        except OSError as exc:
            rest = [_shown(c, w.path) for c, w in pending[k + 1 :]]
            raise SourceError(
                f"writing {_shown(config, write.path)} failed ({exc.strerror or type(exc).__name__}); the pull "
                f"stopped part-way:\n  written: {', '.join(written) or 'nothing'}\n  not written: "
                + ", ".join([_shown(config, write.path), *rest]),
                hint="Fix the cause (space, permissions), then pull again: it writes only what still differs.",
            ) from None
        written.append(_shown(config, write.path))
