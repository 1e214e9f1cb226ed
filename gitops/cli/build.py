"""``gitops build``: run the manifest's build commands, and nothing else (no server, no credential)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from gitops.cli.common import manifest_option, target_options


@click.command("build")
@manifest_option
@target_options
def build(manifest: Path, servers: tuple[str, ...], branches: tuple[str, ...]) -> None:
    """Run the build commands of the manifest's branches in the working tree, as plan and apply would.

    The build sees no credential: every variable a server of the manifest names, the Action's inputs and the usual
    token variables are left out of its environment, and this process's own environment is sealed from it first.
    The GitHub Action runs this in a step of its own, whose environment holds no secret, then plans or applies with
    GITOPS_SKIP_BUILD=1 (the code as this left it). Exit 6 when a build fails; 0 (and nothing printed) when the
    manifest names no build.
    """
    from gitops.app.localcode import run_builds
    from gitops.app.targets import Targets, select
    from gitops.config.manifest import load_manifest

    loaded = select(load_manifest(manifest), Targets.of(servers, branches))
    ran = run_builds(loaded, os.environ)
    if ran:
        click.echo(f"build: {ran} command{'s' if ran != 1 else ''} done", err=True)
