"""The files Git ignores in the working tree, asked of Git once.

In working-tree mode a file that Git ignores (``.gitignore``, ``.git/info/exclude``, the global excludes file) is
not a module: it is not part of the bot's source (editor backups, logs, a ``.env``), and ``--ref`` would not see it
either. The exception is a branch root that is itself ignored, a build output folder such as ``dist/``: everything
under it is read. One ``git ls-files --others --ignored --exclude-standard --directory`` lists them all (a wholly
ignored folder as one ``folder/`` entry, so ``node_modules/`` costs one line); outside a Git repository, or without
git, nothing is ignored.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class IgnoredFiles:
    """Paths relative to the manifest's folder (``/`` separators): ignored files, and wholly ignored folders."""

    files: frozenset[str] = frozenset()
    folders: frozenset[str] = frozenset()

    def covers(self, path: str) -> bool:
        """Whether Git ignores ``path`` (a file or a folder), or a folder it lies in."""
        if path in self.files or path in self.folders:
            return True
        parts = path.split("/")
        return any("/".join(parts[:k]) in self.folders for k in range(1, len(parts)))

    @classmethod
    def ask_git(cls, base_dir: Path) -> IgnoredFiles:
        """What Git ignores under ``base_dir`` (nothing outside a repository)."""
        env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
        try:
            done = subprocess.run(
                ["git", "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"],
                cwd=base_dir,
                env=env,
                capture_output=True,
                check=False,
            )
        except OSError:  # git is not installed: the working tree is still readable
            return cls()
        if done.returncode != 0:  # not a repository
            return cls()
        files: set[str] = set()
        folders: set[str] = set()
        for raw in done.stdout.split(b"\0"):
            if not raw:
                continue
            path = os.fsdecode(raw)
            if path.endswith("/"):
                folders.add(path.rstrip("/"))
            else:
                files.add(path)
        return cls(frozenset(files), frozenset(folders))
