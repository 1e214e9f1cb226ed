"""``gitops pull``: the server's code as files under each branch's root.

For a bot that already lives on a server: its modules become files that the manifest reads back as the same
modules, so that the next plan shows no changes. The use case (:mod:`gitops.app.pulling`) checks the downloads
against the token's budget, refuses before writing anything (uncommitted changes without ``--force``, names that
could leave the root) and writes atomically; ``gitops init --pull`` calls :func:`run_pull` with the code it has
downloaded already.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from gitops.app.pulling import pull as pull_code
from gitops.app.session import open_session
from gitops.cli.common import (
    echo_json,
    manifest_option,
    max_wait_option,
    options_from,
    state_dir_option,
    target_options,
)
from gitops.inert import inert


@click.command("pull")
@manifest_option
@target_options
@click.option("--force", is_flag=True, help="Overwrite files that have uncommitted changes.")
@click.option("--dry-run", is_flag=True, help="List what would be written; write nothing (downloads still count).")
@state_dir_option
@max_wait_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON document on stdout: per branch the files written, the notes.",
)
@click.pass_context
def pull(
    ctx: click.Context,
    manifest: Path,
    servers: tuple[str, ...],
    branches: tuple[str, ...],
    force: bool,
    dry_run: bool,
    state_dir: Path | None,
    max_wait: float,
    as_json: bool,
) -> int:
    """Bring the server's code into the repository: each branch's modules as files under its root.

    One download per branch, checked against the token's budget first (exit 3). Files with uncommitted changes
    are not overwritten without --force (exit 6); module names that could leave the root are refused (exit 1).
    Nothing is written when anything is refused.
    """
    return run_pull(
        ctx,
        manifest=manifest,
        servers=servers,
        branches=branches,
        force=force,
        dry_run=dry_run,
        state_dir=state_dir,
        max_wait=max_wait,
        as_json=as_json,
    )


def run_pull(
    ctx: click.Context,
    *,
    manifest: Path,
    servers: tuple[str, ...],
    branches: tuple[str, ...],
    force: bool,
    dry_run: bool,
    state_dir: Path | None,
    max_wait: float,
    as_json: bool = False,
    prefetched: Any = None,
) -> int:
    """Pull and print what was written (``gitops pull`` and ``gitops init --pull``, which passes the code it
    downloaded already as ``prefetched``)."""
    options = options_from(
        ctx,
        manifest=manifest,
        ref=None,
        refresh="always",
        max_wait=max_wait,
        state_dir=state_dir,
        servers=servers,
        branches=branches,
    )
    # The session is narrowed to the targets (gitops.app.targets): its manifest holds the chosen branches only.
    with open_session(options) as session:
        result = pull_code(
            session, list(session.loaded.manifest.branches), force=force, dry_run=dry_run, prefetched=prefetched
        )
        warnings = session.warnings()
    if as_json:
        _print_json(result, warnings)
        return 0
    verb = {"create": "would create" if dry_run else "created", "update": "would update" if dry_run else "updated"}
    for branch in result.branches:
        root = branch.root.strip("/")
        prefix = "" if root in ("", ".") else root + "/"
        counts = {a: sum(1 for w in branch.writes if w.action == a) for a in ("create", "update", "same")}
        click.echo(
            f"{branch.label} -> {prefix or './'}: {counts['create']} {verb['create']}, {counts['update']} "
            f"{verb['update']}, {counts['same']} unchanged"
        )
        for write in branch.changes:
            click.echo(inert(f"  {'+' if write.action == 'create' else '~'} {prefix}{write.path}", one_line=True))
        for note in branch.notes:
            click.echo(inert(f"warning: {branch.label}: {note}"), err=True)  # module names of the server
    for label in result.missing:
        click.echo(f"warning: {label}: the server has no such branch; nothing was pulled for it", err=True)
    for warning in warnings:
        click.echo(inert(f"warning: {warning}"), err=True)
    if dry_run:
        click.echo("Dry run: nothing was written.")
    elif result.branches and not result.missing and not any(b.notes for b in result.branches):
        click.echo("Next: gitops plan --refresh=always   # should say: No changes")
    elif result.branches:
        click.echo("Next: gitops plan --refresh=always   # it shows what the warnings above left out")
    return 0


def _print_json(result: Any, warnings: list[str]) -> None:
    """``gitops pull --json``."""
    document = {
        "format_version": 1,
        "dry_run": result.dry_run,
        "branches": [
            {
                "server": b.server,
                "branch": b.branch,
                "root": b.root,
                "files": [{"path": w.path, "module": w.module, "action": w.action} for w in b.writes],
                "notes": list(b.notes),
            }
            for b in result.branches
        ],
        "missing": list(result.missing),
        "warnings": list(warnings),
    }
    echo_json(json.dumps(document, indent=2) + "\n")
