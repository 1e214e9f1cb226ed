"""The shell completion of ``--server`` and ``--branch``: the names the manifest gives.

Imported only when a shell asks (``eval "$(_GITOPS_COMPLETE=bash_source gitops)"``), by the option's type in
:mod:`gitops.cli.common`: ``gitops --help`` imports that module and never pays for click's completion items or the
manifest's reader (the boundary "the lazy group" of ``docs/architecture.md``).
"""

from __future__ import annotations

import os
from pathlib import Path

import click
from click.shell_completion import CompletionItem

from gitops.config.manifest import load_manifest
from gitops.errors import GitopsError


def target_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The manifest's server names for ``--server``, its branch names (and ``server/branch``) for ``--branch``, that
    begin with ``incomplete``; nothing when the manifest does not load."""
    path = ctx.params.get("manifest") or os.environ.get("GITOPS_MANIFEST") or "gitops.yaml"
    try:
        manifest = load_manifest(Path(path)).manifest
    except (GitopsError, OSError):
        return []
    if param.name == "servers":
        names = sorted(manifest.servers)
    else:
        names = sorted({b.branch for b in manifest.branches} | {f"{b.server}/{b.branch}" for b in manifest.branches})
    return [CompletionItem(name) for name in names if name.startswith(incomplete)]
