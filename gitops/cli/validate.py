"""``gitops validate`` (the manifest and the local code, without the network) and ``gitops schema``.

validate is the check a person or a CI job runs before any server is contacted: the manifest, the build, each
branch's modules and size as the server counts them, and every JavaScript module's syntax (which plan and apply do
not parse, to stay fast). It needs no credential. ``gitops schema`` prints the manifest's JSON Schema for editors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from gitops.app.localcode import check_syntax, read_code
from gitops.cli.common import echo_json, manifest_option, rebuild_option, run_environment
from gitops.config.manifest import load_manifest
from gitops.core.endpoints import MAX_CODE_LENGTH
from gitops.render.plan import size

_KIND_LABELS = {"javascript": "text", "source map": "source map", "binary": "binary"}


@click.command("validate")
@manifest_option
@click.option(
    "--ref",
    envvar="GITOPS_REF",
    default=None,
    metavar="REF",
    help="Read the code from this Git ref (commit, branch, tag) instead of the working tree; uncommitted changes "
    "are ignored. The manifest is always read from disk. [env: GITOPS_REF]",
)
@click.option(
    "--list",
    "list_modules",
    is_flag=True,
    help="Also print each branch's modules: name, kind (text, source map, binary), size and the file it comes from.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON document on stdout: each branch with its module count, size and share of the 5 MB limit, "
    "and with --list its modules.",
)
@rebuild_option
@click.pass_context
def validate(ctx: click.Context, manifest: Path, ref: str | None, list_modules: bool, as_json: bool) -> None:
    """Check the manifest and the local code, without the network (a branch's build command runs first).

    Prints each branch's modules and size as the server counts it against its 5 MB limit, and any warnings.
    Every JavaScript module is parsed: a syntax error is named by module, file, line and column.
    Exits 5 for an invalid manifest, 6 for local code that cannot be deployed (or a build that fails).
    """
    loaded = load_manifest(manifest)
    local = read_code(loaded, ref, run_environment(ctx))
    check_syntax(local)
    if as_json:
        _print_json(loaded, local, list_modules)
        return
    servers, branches = len(loaded.manifest.servers), len(local.branches)
    click.echo(
        f"manifest {loaded.display} is valid: {servers} server{'s' if servers != 1 else ''}, "
        f"{branches} branch{'es' if branches != 1 else ''}; code from the {local.source.describe()}"
    )
    configs = {(b.server, b.branch): b for b in loaded.manifest.branches}
    for branch in local.branches:
        binary = sum(1 for m in branch.code if m.is_binary)
        count = len(branch.code)
        kinds = f"{count} module{'s' if count != 1 else ''}" + (f" ({binary} binary)" if binary else "")
        share = 100 * branch.server_length / MAX_CODE_LENGTH
        activate = configs[(branch.server, branch.branch)].activate
        click.echo(
            f"  {branch.label}: {kinds}, {size(branch.code.total_size)}; {branch.server_length:,} of "
            f"{MAX_CODE_LENGTH:,} characters ({share:.1f}% of the 5 MB limit)"
            + (f"; activates {', '.join(activate)}" if activate else "")
        )
        if list_modules:
            rows = [
                (m.name, _KIND_LABELS.get(branch.kinds.get(m.name, ""), "binary" if m.is_binary else "text"), m)
                for m in sorted(branch.code, key=lambda m: m.name)
            ]
            width = max((len(name) for name, _, _ in rows), default=0)
            for name, kind, module in rows:
                click.echo(f"    {name:<{width}}  {kind:<10}  {size(module.size):>9}  {branch.files.get(name, '')}")
    for warning in local.warnings:
        click.echo(f"warning: {warning}", err=True)


def _print_json(loaded: Any, local: Any, list_modules: bool) -> None:
    """``gitops validate --json``: ``{"format_version": 1, "manifest", "source", "branches": [...], "warnings"}``."""

    branches = []
    for branch in local.branches:
        entry: dict[str, Any] = {
            "server": branch.server,
            "branch": branch.branch,
            "modules": len(branch.code),
            "binary_modules": sum(1 for m in branch.code if m.is_binary),
            "bytes": branch.code.total_size,
            "server_length": branch.server_length,
        }
        if list_modules:
            entry["module_list"] = [
                {
                    "name": m.name,
                    "kind": _KIND_LABELS.get(branch.kinds.get(m.name, ""), "binary" if m.is_binary else "text"),
                    "bytes": m.size,
                    "file": branch.files.get(m.name),
                }
                for m in sorted(branch.code, key=lambda m: m.name)
            ]
        branches.append(entry)
    document = {
        "format_version": 1,
        "manifest": loaded.display,
        "source": local.source.describe(),
        "branches": branches,
        "warnings": list(local.warnings),
    }
    echo_json(json.dumps(document, indent=2) + "\n")
