"""What an edge of the local code hands the core, and the words both edges say of a file they must not deploy.

The working tree (:mod:`gitops.edges.worktree`) and a Git ref (:mod:`gitops.edges.gittree`) each list a root's files
as a :class:`Listing`; :mod:`gitops.edges.sources` reads every branch through one of them. A symbolic link that
leaves the root, the repository or leads into ``.git`` is refused by both in the same words (:func:`outside_note`),
since Git stores the link and ``--ref`` would deploy something else.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal


@dataclass
class Listing:
    """The files under one root: ``paths`` relative to it, and ``read(path)``."""

    paths: list[str]
    read: Callable[[str], bytes]
    origin: str = ""
    prefetch: Callable[[list[str]], None] | None = None
    unlisted: dict[str, str] = field(default_factory=dict)


GIT_FOLDER = "Git's own folder (history, hooks and config, never code to deploy)"
ROOT_IN_GIT = f"is inside .git, {GIT_FOLDER}; name a folder of the working tree"

#: Where a symbolic link leads when its files must not be deployed.
Leads = Literal["root", "outside", "git"]
_LEADS = {
    "root": "leads outside the root",
    "outside": "leads outside the repository",
    "git": "leads into .git, Git's own folder",
}


def outside_note(link: str, *, through: bool, leads: Leads = "root") -> str:
    # Git stores a link, not the files it leads to: --ref would deploy something else, so both edges refuse; and
    # a link may not carry files of the machine (outside the repository) or of .git into an upload.
    if through:
        return (
            f"is reached through {link}, a symbolic link that {_LEADS[leads]}; copy the files into the root, "
            "or exclude them"
        )
    return f"is a symbolic link that {_LEADS[leads]}; copy the file into the root, or exclude it"


BROKEN_LINK = "is a broken symbolic link; fix or remove it, or exclude it"
ENDLESS_LINK = "is a chain of symbolic links that does not end; fix it, or exclude it"


def root_prefix(root: str) -> str:
    norm = posixpath.normpath(root)
    return "" if norm == "." else norm
