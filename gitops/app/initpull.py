"""``gitops init --pull``: the server's code downloaded before the manifest exists, and the layout fitted to it.

Init writes a manifest from what the repository looks like; with ``--pull`` the server's code decides too: a
manifest is only right when a pull of that code writes every module where the manifest reads it back as itself
(source maps, binary modules, names with ``/``). The download goes through a session over the manifest text in
memory, with the budget gate every pull has. Only ``--pull`` needs this (and the session, planning and HTTP it
brings), so ``gitops init`` imports this module when asked to pull.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml

from gitops.app.budgetgates import check_download_budget
from gitops.app.options import Options
from gitops.app.session import open_session
from gitops.config.manifest import BranchConfig, LoadedManifest, manifest_from_data
from gitops.core.codeset import CodeSet
from gitops.core.layout import Layout
from gitops.core.pull import plan_branch_pull
from gitops.core.readback import widen_for


def download_branches(options: Options, manifest_text: str, path: Path) -> dict[tuple[str, str], CodeSet | None]:
    """``gitops init --pull``'s one download per branch, before the manifest exists on disk: a session over the
    manifest text in memory (its ledger, budget check and credentials as for any pull). Maps (server, branch) to
    the server's :class:`~gitops.core.codeset.CodeSet`, or ``None`` for a branch the server does not have."""
    manifest = manifest_from_data(yaml.safe_load(manifest_text))
    loaded = LoadedManifest(manifest, path.resolve(), path.resolve().parent, digest="", display=str(path))
    found: dict[tuple[str, str], CodeSet | None] = {}
    with open_session(options, loaded) as session:
        per_server: dict[str, list[str]] = {}
        for config in manifest.branches:
            per_server.setdefault(config.server, []).append(config.branch)
        for server, branches in per_server.items():
            check_download_budget(
                session, server, len(branches), doing="init --pull", instead="Run gitops init without --pull, wait"
            )
            reader = session.reader(server)
            for branch in branches:
                found[(server, branch)] = reader.get_code(branch)
            session.save()
    return found


def fit_to_server(
    layout: Layout, code: CodeSet, listing: list[str], render: Callable[[Layout], BranchConfig]
) -> Layout:
    """``layout`` widened until a pull of ``code`` writes every module where the manifest reads it back as itself
    (source maps, binary modules with or without a suffix, names with ``/``). ``render(layout)`` makes the branch's
    :class:`~gitops.config.manifest.BranchConfig` from a layout; ``listing`` is what the root holds now."""
    for _ in range(4):
        config = render(layout)
        pulled = plan_branch_pull(config, code, listing, lambda _path: None)
        written = {w.module for w in pulled.writes}
        left = [m for m in code if m.name not in written]
        if not left:
            break
        wider = widen_for(layout, [(m.name, m.is_binary, m.text) for m in left])
        if wider == layout:
            break
        layout = wider
    return layout
