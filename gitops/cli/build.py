"""``gitops build``: run the manifest's build commands (no server, no credential), and with ``--out`` write the
code set file that a deploy job takes instead of building (:mod:`gitops.core.artifact`).

A build runs the repository's own code (package scripts, bundler plugins): it must not find the token. This command
lets a CI job without secrets build and hand over only the built code, so that the job that holds the token never
runs any of the repository's code. Without ``--out`` it builds (or reuses the last build's output) as plan and
apply would, for a person checking that the build works.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from gitops.app.localcode import check_syntax, read_code, run_builds
from gitops.app.targets import Targets, select
from gitops.cli.common import manifest_option, rebuild_option, run_environment, target_options
from gitops.config.manifest import load_manifest
from gitops.edges.codesetfile import CODESET_VARIABLE, OUT_WHAT, write_codeset
from gitops.edges.outfile import check_out_path
from gitops.errors import UsageError


@click.command("build")
@manifest_option
@target_options
@click.option(
    "--out",
    "out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    envvar="GITOPS_BUILD_OUT",
    help="Also read every branch's code, as plan would, and write it to this code set file (the commit, the "
    "manifest's digest, and per module its name, kind, size and SHA-256). [env: GITOPS_BUILD_OUT]",
)
@click.option(
    "--ref",
    default=None,
    metavar="REF",
    help="With --out: build this commit's code in a temporary checkout (as plan --ref does), with this manifest, "
    "e.g. a pull request's base for `gitops rehearse --base-codeset`.",
)
@rebuild_option
@click.pass_context
def build(
    ctx: click.Context,
    manifest: Path,
    servers: tuple[str, ...],
    branches: tuple[str, ...],
    out: Path | None,
    ref: str | None,
) -> None:
    """Run the build commands of the manifest's branches in the working tree, as plan and apply would.

    The build sees no credential: every variable a server of the manifest names, the Action's inputs and the usual
    token variables are left out of its environment, and this process's own environment is sealed from it first.

    With --out, the built code is written to a code set file: a job without secrets builds, and a job that holds
    the token deploys that file (`gitops apply --codeset FILE`) without running any of the repository's code. The
    GitHub Action's `command: build` does this, and always builds.

    Without --out, the output of the last build is reused when the build's inputs (the repository's files, the
    lockfiles, the command, the tools) and its output are unchanged since; --rebuild forces the build. Exit 6 when
    a build fails; 0 (and nothing printed) when the manifest names no build and no --out is given.
    """
    if ref is not None and out is None:
        raise UsageError(
            f"--ref {ref} builds another commit only into a code set file: give --out FILE too",
            hint="`gitops build --ref BASE --out base.codeset.json` (for gitops rehearse --base-codeset).",
        )
    loaded = select(load_manifest(manifest), Targets.of(servers, branches))
    if out is None:
        ran = run_builds(loaded, run_environment(ctx))
        if ran:
            click.echo(f"build: {ran} command{'s' if ran != 1 else ''} done", err=True)
        return
    check_out_path(out, what=OUT_WHAT)  # before the build: a wrong path is known at once
    # A code set file for a deploy job is made by the build itself, never from an earlier build's output.
    env = {key: value for key, value in os.environ.items() if key != CODESET_VARIABLE}
    env["GITOPS_REBUILD"] = "1"
    local = read_code(loaded, ref, env)
    check_syntax(local)  # the deploy job sends what this writes: a module that cannot parse stops here
    write_codeset(out, local, loaded)
    modules = sum(len(branch.code) for branch in local.branches)
    click.echo(
        f"build: code set of {len(local.branches)} branch(es), {modules} module(s) written to {out} "
        f"({local.source.describe()})",
        err=True,
    )
