"""The manifest (``gitops.yaml``): loading it, and the classes the rest of the tool uses.

Importing this module imports neither pydantic nor pyyaml, so that every ``from gitops.config.manifest import ...``
stays cheap. The classes are the frozen dataclasses of :mod:`gitops.config.model` (re-exported here); the rules, the
messages and the JSON Schema are :mod:`gitops.config.schema`'s pydantic models, imported only to validate.

:func:`load_manifest` reads the file's bytes and looks them up in the validated-manifest cache
(:mod:`gitops.config.manifestcache`, keyed by the SHA-256 of the exact bytes and by the tool's version): a manifest
validated before is built from the cache entry without importing pydantic. The YAML is parsed on every load (with
line numbers, :mod:`gitops.config.yamlload`), a hit too: the entry is used only when every value it holds is what the
file says (:mod:`gitops.config.cachecheck`), since anything running as the player can write the cache. Otherwise it
validates, reports every problem at once, each as
``gitops.yaml:12: branches[0].include[1]: <what is wrong>; <how to fix>``, and caches a valid manifest.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gitops.config import manifestcache
from gitops.config.cachecheck import entry_matches_file
from gitops.config.discovery import find_manifest_in
from gitops.config.model import (
    DEFAULT_MANIFEST,
    ActiveName,
    BranchConfig,
    BudgetConfig,
    BuildCommand,
    LoadedManifest,
    Manifest,
    Naming,
    RequiresConfig,
    ServerConfig,
    VerifyConfig,
    deployed_names,
)
from gitops.config.reading import MAX_FILE_BYTES, Loc, Unreadable, counted, format_loc, read_capped
from gitops.errors import ManifestError

__all__ = [  # Loc and format_loc are re-exported: key paths are the manifest's vocabulary too
    "DEFAULT_MANIFEST",
    "MAX_MANIFEST_BYTES",
    "ActiveName",
    "BranchConfig",
    "BudgetConfig",
    "BuildCommand",
    "LoadedManifest",
    "Loc",
    "Manifest",
    "Naming",
    "RequiresConfig",
    "ServerConfig",
    "VerifyConfig",
    "deployed_names",
    "format_loc",
    "load_manifest",
    "manifest_digest",
    "manifest_from_data",
    "manifest_json_schema",
]

#: The largest manifest read (a manifest needs a few kilobytes); a larger one is refused before it is parsed.
MAX_MANIFEST_BYTES = MAX_FILE_BYTES


def manifest_digest(manifest: Manifest) -> str:
    """SHA-256 of the canonical JSON of a validated manifest (the same JSON pydantic's ``model_dump(mode="json")``
    gives of the validated model: every value is a string, number, boolean, null, list or mapping)."""
    canonical = json.dumps(dataclasses.asdict(manifest), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def load_manifest(path: Path, env: Mapping[str, str] | None = None) -> LoadedManifest:
    """Read and validate a manifest (a folder means its ``gitops.yaml``).

    Raises :class:`~gitops.errors.ManifestError` listing every problem, each with file, line and key. A file over
    :data:`MAX_MANIFEST_BYTES` is refused before it is parsed. ``env`` (default: the process environment) locates
    the validated-manifest cache (:func:`gitops.config.manifestcache.default_cache_dir`).
    """
    display = str(path)
    try:
        is_dir = path.is_dir()
    except OSError as exc:  # a name too long for the system (ENAMETOOLONG), a loop of links: not a bug
        raise ManifestError(
            f"manifest {_short(display)} cannot be read: {exc.strerror or exc}",
            hint="Name the manifest with a shorter path with -m/--manifest or GITOPS_MANIFEST.",
        ) from None
    if is_dir:
        path = find_manifest_in(path) or path / DEFAULT_MANIFEST
        display = str(path)
    try:
        raw = read_capped(path, display, limit=MAX_MANIFEST_BYTES, what="a manifest")
    except FileNotFoundError:
        raise ManifestError(
            f"manifest {display} not found",
            hint="Without -m, gitops looks for gitops.yaml or gitops.yml here and in the folders above, up to the "
            "top of the Git repository. Create one with 'gitops init' (it writes a commented one for the layout it "
            "finds), or name another file with -m/--manifest or GITOPS_MANIFEST.",
        ) from None
    except OSError as exc:
        raise ManifestError(
            f"manifest {_short(display)} cannot be read: {exc.strerror or exc}",
            hint="Name a readable manifest file with -m/--manifest or GITOPS_MANIFEST.",
        ) from None
    except Unreadable as exc:
        raise _invalid(display, exc.problems) from None
    cache_env = os.environ if env is None else env
    cached = manifestcache.lookup(raw, cache_env)
    from gitops.config.yamlload import decode, parse  # pyyaml: every load parses the file, a cache hit too

    try:
        document = parse(decode(raw, display), display, what="a manifest")
    except Unreadable as exc:
        raise _invalid(display, exc.problems) from None
    if cached is not None and entry_matches_file(cached.manifest, document.data):
        # The entry saves the validation; the file itself still says every value (config/cachecheck.py).
        return _loaded(path, display, cached.manifest, cached.digest, cached.locations)
    # Not validated before, or the entry says something the file does not: validate (pydantic is imported here).
    from gitops.config.schema import validate
    from gitops.config.yamlload import Problems

    if document.data is None:
        raise _invalid(
            display, [f"{display}:1: the manifest is empty; start it with 'version: 1' (see gitops help manifest)"]
        )
    problems = Problems(display, document.locations)
    problems.cover(document.problems)
    manifest = validate(document.data, problems)
    if problems or manifest is None:
        raise _invalid(display, problems.texts())
    digest = manifest_digest(manifest)
    manifestcache.store(raw, cache_env, manifest, digest, document.locations)
    return _loaded(path, display, manifest, digest, document.locations)


def _short(display: str, limit: int = 200) -> str:
    """A path for a message: whole up to ``limit`` characters, else its start and end around an ellipsis."""
    return display if len(display) <= limit else f"{display[: limit // 2]}…{display[-limit // 2 :]}"


def _loaded(path: Path, display: str, manifest: Manifest, digest: str, locations: Mapping[Loc, int]) -> LoadedManifest:
    resolved = path.resolve()
    return LoadedManifest(
        manifest=manifest,
        path=resolved,
        base_dir=resolved.parent,
        digest=digest,
        display=display,
        locations=locations,
        all_servers=dict(manifest.servers),
    )


def manifest_from_data(data: Any) -> Manifest:
    """Validate manifest data that was not read from a file (every rule :func:`load_manifest` checks).

    Raises :class:`~gitops.errors.ManifestError` listing every problem as ``key: problem``.
    """
    from gitops.config.schema import validate
    from gitops.config.yamlload import Problems

    problems = Problems(None, {})
    manifest = validate(data, problems)
    if problems or manifest is None:
        raise _invalid("data", problems.texts())
    return manifest


def manifest_json_schema() -> dict[str, Any]:
    """The manifest's JSON Schema, as ``schemas/gitops.schema.json`` holds it (``gitops schema`` prints it)."""
    from gitops.config.schema import manifest_json_schema as generated

    return generated()


def _invalid(display: str, problems: list[str]) -> ManifestError:
    return ManifestError(
        f"manifest {display} is invalid ({counted(problems)}):",
        problems,
        hint="The manifest reference: gitops help manifest; 'gitops schema' prints its JSON Schema.",
    )
