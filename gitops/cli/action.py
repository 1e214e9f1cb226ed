"""``gitops action``: the step that ``action.yml`` runs (inputs in the environment, never on the command line)."""

from __future__ import annotations

import os

import click

from gitops.cli.common import ci_context
from gitops.github.step import run_action


@click.command()
@click.pass_context
def action(ctx: click.Context) -> int:
    """Plan or apply as the GitHub Action's step, then write its outputs, job summary and pull request comment.

    Reads the Action's inputs from GITOPS_ACTION_COMMAND, GITOPS_MANIFEST, GITOPS_REF, GITOPS_REFRESH,
    GITOPS_ACTION_COMMENT, GITOPS_MAX_WAIT, GITOPS_SERVERS, GITOPS_BRANCHES, GITOPS_GITHUB_TOKEN and the
    credentials variables (gitops help github-action), and the runner's GITHUB_* variables. Exit code 0 when the step
    succeeded (a plan with changes included: the exit-code output says 2); other codes as for plan and apply.
    """
    return run_action(dict(os.environ), echo=click.echo, **ci_context(ctx))
