"""The base branch's manifest of a pull request, for the comparison that decides whether a deploy token may be used
(:func:`gitops.config.routes.route_changes`) and for the servers' urls in the plan comment.

Read from the checkout's own Git objects when the base commit is there (``fetch-depth: 0``,
:func:`gitops.app.ci.trust.read_base_manifest`), else through the GitHub contents API with the run's GitHub token
(``contents: read``, which every workflow token has for its own repository). Nothing here runs the repository's
code: ``git show`` and one GET.
"""

from __future__ import annotations

from gitops.app.ci.host import BaseManifest
from gitops.app.ci.trust import read_base_manifest as read_from
from gitops.config.manifest import LoadedManifest
from gitops.github.api import GitHubClient, GitHubError
from gitops.secrets import Secret


def read_base_manifest(
    loaded: LoadedManifest, base_sha: str, *, repository: str, api_url: str, github_token: str
) -> BaseManifest:
    """The manifest file at ``loaded``'s path in commit ``base_sha``, validated as any manifest."""

    def fetch(in_repo: str, sha: str) -> bytes | BaseManifest | None:
        try:
            with GitHubClient(Secret(github_token), repository, api_url=api_url) as gh:
                return gh.file_at(in_repo, sha)
        except GitHubError as exc:
            return BaseManifest(None, f"it could not be read from GitHub ({exc.message})")

    return read_from(
        loaded,
        base_sha,
        unreachable="is not in the checkout and no github-token was given",
        fetch=fetch if github_token and repository else None,
    )
