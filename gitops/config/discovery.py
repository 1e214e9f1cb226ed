"""Where the manifest is when none is named: ``gitops.yaml`` (or ``gitops.yml``) in the working folder or above it,
up to the top of the Git repository, as git finds its repository and Terraform its working folder (``-chdir``).

A run from ``src/role/`` of a bot's repository then finds the manifest at the top, and roots stay relative to the
manifest's own folder, so nothing else changes. The walk stops at the folder that holds ``.git`` (a manifest above a
repository belongs to another project) and at the file system's root.
"""

from __future__ import annotations

import os
from pathlib import Path

from gitops.errors import ManifestError

#: The names a manifest is found by, in order: the documented one first.
MANIFEST_NAMES = ("gitops.yaml", "gitops.yml")


def find_manifest_in(folder: Path) -> Path | None:
    """``folder/gitops.yaml`` or ``folder/gitops.yml``, when it is a file; :class:`ManifestError` (exit 5) when both
    are: taking one without a word would deploy what the other does not say (``-m`` names one and is obeyed)."""
    found = [folder / name for name in MANIFEST_NAMES if (folder / name).is_file()]
    if len(found) > 1:
        raise ManifestError(
            f"two manifests in {folder}: {' and '.join(p.name for p in found)}; the tool will not guess which one "
            "you mean",
            hint="Keep one (gitops.yaml is the documented name) and delete or rename the other, or name one with "
            "-m/--manifest (GITOPS_MANIFEST).",
        )
    return found[0] if found else None


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
