"""``gitops gitlab``: a GitLab CI job's step (its variables in the environment, never on the command line)."""

from __future__ import annotations

import os

import click

from gitops.cli.common import ci_context
from gitops.gitlab.host import run_gitlab


@click.command()
@click.pass_context
def gitlab(ctx: click.Context) -> int:
    """Plan, apply or check drift as a GitLab CI job, then write the merge request's note and the job's files.

    Reads the GITOPS_* and CI_* variables (gitops help gitlab-ci). Exit code 0 when the job succeeded (a plan with
    changes too: GITOPS_EXIT_CODE=2 in the output file); else as plan and apply."""
    return run_gitlab(dict(os.environ), echo=click.echo, **ci_context(ctx))
