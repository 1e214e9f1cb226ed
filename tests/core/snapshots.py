"""Repository snapshots for the layout tests (``gitops init``'s detection): what a listing shows, as values."""

from __future__ import annotations

import json

from gitops.core.layout import RepoSnapshot

PACKAGE_WITH_BUILD = json.dumps({"name": "bot", "scripts": {"build": "rollup -c"}})


def snap(
    files: set[str] | None = None,
    folders: set[str] | None = None,
    inside: dict[str, set[str]] | None = None,
    contents: dict[str, str] | None = None,
    sources: dict[str, str] | None = None,
) -> RepoSnapshot:
    return RepoSnapshot(
        frozenset(files or ()),
        frozenset(folders or ()),
        {k: frozenset(v) for k, v in (inside or {}).items()},
        contents or {},
        sources or {},
    )


def package(scripts: dict[str, str]) -> str:
    return json.dumps({"name": "bot", "scripts": scripts})
