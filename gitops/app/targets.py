"""Targets: the servers and branches one run is restricted to (``--server``/``--branch``, the Action's inputs).

The one place that narrows work to a selection. :func:`select` narrows a loaded manifest before anything reads it,
so that every use case (plan, apply, watch, and any later command) sees only the chosen branches: the local code of
the others is neither read nor built, and their servers are never contacted (no credentials read, no ledger opened,
no request). It is pure; :func:`gitops.core.plan.narrow_plan` does the same to a saved plan.

A branch is named by its name (``main``), which selects that branch on every chosen server, or by its label
(``server/branch``). Servers and branches combine as an intersection: ``--server a --branch main`` is ``a/main``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gitops.errors import UsageError

if TYPE_CHECKING:  # the options (and so every command's start) import this module: keep it light
    from gitops.config.manifest import BranchConfig, LoadedManifest


@dataclass(frozen=True)
class Targets:
    """The chosen servers and branches; empty means everything the manifest names."""

    servers: tuple[str, ...] = ()
    branches: tuple[str, ...] = ()

    @classmethod
    def of(cls, servers: Iterable[str] = (), branches: Iterable[str] = ()) -> Targets:
        """Targets from repeated values, each of which may itself be a comma-separated list (``a,b``)."""
        return cls(_split(servers), _split(branches))

    def __bool__(self) -> bool:
        return bool(self.servers or self.branches)

    def describe(self) -> str:
        """``--server a --branch main`` (for messages)."""
        return " ".join([*(f"--server {s}" for s in self.servers), *(f"--branch {b}" for b in self.branches)])


def _split(values: Iterable[str]) -> tuple[str, ...]:
    out: list[str] = []
    for value in values:
        for part in (p.strip() for p in value.split(",")):
            if part and part not in out:
                out.append(part)
    return tuple(out)


def _label(server: str, branch: str) -> str:
    return f"{server}/{branch}"


def _matches(config: BranchConfig, names: tuple[str, ...]) -> bool:
    return config.branch in names or _label(config.server, config.branch) in names


def chosen_branches(loaded: LoadedManifest, targets: Targets) -> list[BranchConfig]:
    """The manifest's branches the targets choose, in manifest order.

    Raises :class:`UsageError` (exit 4) for a name the manifest does not have, listing the valid ones, and when the
    servers and branches chosen have no branch in common.
    """
    manifest = loaded.manifest
    branches = list(manifest.branches)
    if not targets:
        return branches
    known_servers = sorted({b.server for b in branches})
    unknown = [s for s in targets.servers if s not in known_servers]
    if unknown:
        raise UsageError(
            f"--server {', '.join(unknown)}: the manifest {loaded.display} has no branch on "
            f"{'that server' if len(unknown) == 1 else 'those servers'}",
            hint=f"Valid servers: {', '.join(known_servers)} (set GITOPS_SERVERS or --server to one of them).",
        )
    known_names = sorted({b.branch for b in branches} | {_label(b.server, b.branch) for b in branches})
    unknown = [b for b in targets.branches if b not in known_names]
    if unknown:
        raise UsageError(
            f"--branch {', '.join(unknown)}: the manifest {loaded.display} has no such branch",
            hint=f"Valid branches: {', '.join(known_names)} (a name, or server/branch).",
        )
    chosen = [
        b
        for b in branches
        if (not targets.servers or b.server in targets.servers)
        and (not targets.branches or _matches(b, targets.branches))
    ]
    if not chosen:
        raise UsageError(
            f"{targets.describe()}: no branch of the manifest {loaded.display} is on the chosen servers and named "
            "by the chosen branches",
            hint="Valid branches: " + ", ".join(_label(b.server, b.branch) for b in branches) + ".",
        )
    return chosen


def select(loaded: LoadedManifest, targets: Targets) -> LoadedManifest:
    """The manifest narrowed to the targets' branches and their servers (unchanged without targets).

    The digest stays the whole manifest's: a saved plan is checked against the file, not against the selection.
    Raises :class:`UsageError` as :func:`chosen_branches`.
    """
    if not targets:
        return loaded
    chosen = chosen_branches(loaded, targets)
    servers = {b.server for b in chosen}
    manifest = dataclasses.replace(
        loaded.manifest,
        branches=chosen,
        servers={name: config for name, config in loaded.manifest.servers.items() if name in servers},
    )
    return dataclasses.replace(loaded, manifest=manifest)
