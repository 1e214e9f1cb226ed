"""Where the manifest is when none is named: ``gitops.yaml`` (or ``gitops.yml``) in the working folder or above it,
up to the top of the Git repository, as git finds its repository and Terraform its working folder (``-chdir``).

A run from ``src/role/`` of a bot's repository then finds the manifest at the top, and roots stay relative to the
manifest's own folder, so nothing else changes. The walk stops at the folder that holds ``.git`` (a manifest above a
repository belongs to another project) and at the file system's root.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The names a manifest is found by, in order: the documented one first.
MANIFEST_NAMES = ("gitops.yaml", "gitops.yml")


def find_manifest_in(folder: Path) -> Path | None:
    """``folder/gitops.yaml``, else ``folder/gitops.yml``, when it is a file."""
    for name in MANIFEST_NAMES:
        candidate = folder / name
        if candidate.is_file():
            return candidate
    return None


def discover_manifest(start: Path) -> Path | None:
    """The nearest manifest from ``start`` upwards (within its Git repository), as a path relative to ``start`` when
    it is above it (``../../gitops.yaml``), or ``None``."""
    here = start.absolute()
    for folder in (here, *here.parents):
        found = find_manifest_in(folder)
        if found is not None:
            return Path(os.path.relpath(found, here))
        if (folder / ".git").exists():
            return None
    return None
