"""``gitops validate`` (the manifest and the local code, without the network) and ``gitops schema``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from gitops.cli.common import manifest_option


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
def validate(manifest: Path, ref: str | None) -> None:
    """Check the manifest and the local code, without the network.

    Prints each branch's modules and size as the server counts it against its 5 MB limit, and any warnings.
    Exits 5 for an invalid manifest, 6 for local code that cannot be deployed.
    """
    from gitops.config.manifest import load_manifest
    from gitops.core.endpoints import MAX_CODE_LENGTH
    from gitops.edges.sources import read_local_code
    from gitops.render.plan import size

    loaded = load_manifest(manifest)
    local = read_local_code(loaded, ref)
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
    for warning in local.warnings:
        click.echo(f"warning: {warning}", err=True)


@click.command("schema")
def schema() -> None:
    """Print the manifest's JSON Schema (the content of schemas/gitops.schema.json).

    Regenerate the committed file with: gitops schema > schemas/gitops.schema.json
    """
    from gitops.config.manifest import manifest_json_schema

    click.echo(json.dumps(manifest_json_schema(), indent=2, ensure_ascii=False))
