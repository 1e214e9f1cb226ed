"""Which commit a ``--ref`` names, asked of git itself, with the messages a person can act on.

Two readers need it: the ``--ref`` read of the local code (:mod:`gitops.edges.sources`) and the temporary checkout a
``--ref`` build runs in (:mod:`gitops.edges.build`). It lives apart from both so that the build, which every plan
imports for its environment's rules, can use it without importing the sources' glob library, which only the local
read's worker needs.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gitops.errors import SourceError

#: The hint of every "no such commit" refusal: shallow clones are the usual cause in CI.
NOT_FOUND_HINT = (
    "Check the name with 'git log' or 'git branch -a'; in a shallow CI checkout, fetch it first "
    "(actions/checkout with fetch-depth: 0)."
)
_KINDS = {"tree": "a tree (a folder)", "blob": "a blob (a file)"}


def resolve_commit(top: Path, ref: str) -> str:
    """The commit id ``ref`` names, asked of git itself: gitpython resolves ``HEAD~1`` from the parent line of
    HEAD's commit without checking that the parent is there, which a shallow clone's is not (its ValueError came
    later, as a crash). ``--end-of-options`` keeps a ref that starts with ``-`` from being read as an option."""
    if not ref.strip():
        raise SourceError(
            "--ref is empty",
            hint="Name a commit (a branch, a tag or a commit id), or drop --ref to read the working tree.",
        )

    def rev_parse(*args: str) -> str | None:
        done = subprocess.run(
            ["git", "rev-parse", *args],
            cwd=top,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
            capture_output=True,
            check=False,
        )
        return done.stdout.decode("ascii", "replace").strip() if done.returncode == 0 else None

    sha = rev_parse("--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if sha:
        return sha
    other = rev_parse("--verify", "--quiet", "--end-of-options", ref)
    if other:
        done = subprocess.run(["git", "cat-file", "-t", other], cwd=top, capture_output=True, check=False)
        kind = done.stdout.decode("ascii", "replace").strip()
        if kind in _KINDS:
            raise SourceError(
                f"--ref {ref}: names {_KINDS[kind]} in {top}, not a commit",
                hint="Name a commit: a branch, a tag or a commit id (git log shows them).",
            )
    if rev_parse("--verify", "--quiet", "HEAD") is None:
        raise SourceError(
            f"--ref {ref}: no such commit in {top} (the repository has no commit yet)", hint=NOT_FOUND_HINT
        )
    if rev_parse("--is-shallow-repository") == "true":
        raise SourceError(
            f"--ref {ref}: no such commit in {top} (a shallow clone: older commits are not fetched)",
            hint=NOT_FOUND_HINT,
        )
    raise SourceError(f"--ref {ref}: no such commit, branch or tag in {top}", hint=NOT_FOUND_HINT)
