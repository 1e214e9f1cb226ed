"""The base branch's manifest of a pull request, for the comparison that decides whether a deploy token may be used
(:func:`gitops.config.routes.route_changes`) and for the servers' urls in the plan comment.

Read from the checkout's own Git objects when the base commit is there (``fetch-depth: 0``), else through the
GitHub contents API with the run's GitHub token (``contents: read``, which every workflow token has for its own
repository). Nothing here runs the repository's code: ``git show`` and one GET.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from gitops.config.manifest import LoadedManifest, load_manifest
from gitops.config.model import Manifest
from gitops.edges.gitout import git_output, git_text
from gitops.errors import GitopsError
from gitops.github.api import GitHubClient, GitHubError
from gitops.secrets import Secret


@dataclass(frozen=True)
class BaseManifest:
    """The base commit's manifest, or why there is none (``manifest`` is then ``None``)."""

    manifest: Manifest | None
    why: str = ""


def read_base_manifest(
    loaded: LoadedManifest, base_sha: str, *, repository: str, api_url: str, github_token: str
) -> BaseManifest:
    """The manifest file at ``loaded``'s path in commit ``base_sha``, validated as any manifest."""
    if not base_sha:
        return BaseManifest(None, "the event names no base commit")
    prefix = git_text(["rev-parse", "--show-prefix"], loaded.path.parent)
    in_repo = (prefix or "") + loaded.path.name
    raw = git_output(["show", f"{base_sha}:{in_repo}"], loaded.path.parent)
    if raw is None and github_token and repository:
        try:
            with GitHubClient(Secret(github_token), repository, api_url=api_url) as gh:
                raw = gh.file_at(in_repo, base_sha)
        except GitHubError as exc:
            return BaseManifest(None, f"it could not be read from GitHub ({exc.message})")
        if raw is None:
            return BaseManifest(None, f"the base commit {base_sha[:12]} has no {in_repo}")
    if raw is None:
        return BaseManifest(None, f"commit {base_sha[:12]} is not in the checkout and no github-token was given")
    with tempfile.TemporaryDirectory(prefix="gitops-base-") as folder:
        path = Path(folder) / loaded.path.name
        path.write_bytes(raw)
        try:
            return BaseManifest(load_manifest(path).manifest)
        except GitopsError:
            return BaseManifest(None, f"the base commit's {in_repo} is not a valid manifest")
