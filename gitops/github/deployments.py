"""GitHub Deployments: one deployment per branch an apply changed, in the environment ``screeps/<server>/<branch>``.

A deployment record is a courtesy to the repository's readers, never part of the deploy: a refusal (no
``deployments: write``) or any other failure of the API is one warning and leaves the deploy's result as it was.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from gitops.github.api import GitHubClient, GitHubError, GitHubPermissionError
from gitops.github.runner import Echo, Runner, annotation
from gitops.secrets import Secret


def deployment_environment(server: str, branch: str) -> str:
    """The GitHub environment of one server's branch: ``screeps/<server>/<branch>`` (characters GitHub does not
    take in an environment's name become ``-``; at most 255 characters)."""
    return re.sub(r"[^A-Za-z0-9._/-]", "-", f"screeps/{server}/{branch}")[:255]


def record_deployments(
    runner: Runner, deployed: Mapping[tuple[str, str], bool], *, echo: Echo, github_token: str
) -> None:
    """One GitHub deployment per branch the apply changed (ref: the commit; status success or failure, the run
    as its log); after a success, the environment's earlier deployments are marked inactive. A refusal (no
    ``deployments: write``) or any other failure of the API is one warning and ends the recording: it never
    changes the deploy's result."""
    if not github_token or not runner.sha:
        return
    gh: GitHubClient | None = None
    try:
        with GitHubClient(Secret(github_token), runner.repository, api_url=runner.api_url) as gh:
            for (server, branch), ok in deployed.items():
                environment = deployment_environment(server, branch)
                state = "success" if ok else "failure"
                deployment = gh.create_deployment(
                    runner.sha,
                    environment,
                    description=f"screeps-gitops apply of {server}/{branch}",
                    payload={"server": server, "branch": branch},
                )
                gh.create_deployment_status(
                    deployment, state, log_url=runner.run_url, description=f"screeps-gitops apply: {state}"
                )
                marked = gh.deactivate_earlier(environment, deployment) if ok else 0
                earlier = f"; {marked} earlier marked inactive" if marked else ""
                echo(f"Deployment recorded: {environment} at {runner.sha[:7]}, {state}{earlier}")
    except GitHubPermissionError as exc:
        echo(annotation("warning", f"the deployments were not recorded: {exc}"))
    except GitHubError as exc:
        echo(annotation("warning", f"the deployments were not recorded, or not all of them: {exc}"))
    finally:
        for warning in gh.warnings if gh is not None else []:
            echo(annotation("warning", warning))
