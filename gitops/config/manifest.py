"""The manifest (``gitops.yaml``): loading it, and the classes the rest of the tool uses.

Importing this module imports neither pydantic nor pyyaml: many modules import it for the classes alone (the
frozen dataclasses of :mod:`gitops.config.model`, re-exported here). So the two heavy parts are imported in one
function each, when needed: the YAML reader (:mod:`gitops.config.yamlload`) when a file is loaded, and the
validator (:mod:`gitops.config.validation`, pydantic) only when the validated-manifest cache
(:mod:`gitops.config.manifestcache`, keyed by the file's exact bytes) has no usable entry.

The file is parsed on every load, a cache hit too: anything running as the player can write the cache, so an entry
is used only when every value it holds is what the file says (:mod:`gitops.config.cachecheck`). A manifest that is
validated gets every problem reported at once, each as ``gitops.yaml:12: branches[0].include[1]: <what is wrong>;
<how to fix>``, and a valid one is cached.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    manifest_digest,
)
from gitops.config.reading import MAX_FILE_BYTES, Loc, Unreadable, counted, format_loc, read_capped
from gitops.errors import ManifestError

if TYPE_CHECKING:
    from gitops.config.yamlload import Document, Found

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
]

#: The largest manifest read (a manifest needs a few kilobytes); a larger one is refused before it is parsed.
MAX_MANIFEST_BYTES = MAX_FILE_BYTES


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
    document = _parse(raw, display)
    if cached is not None and entry_matches_file(cached.manifest, document.data):
        # The entry saves the validation; the file itself still says every value (config/cachecheck.py).
        return _loaded(path, display, cached.manifest, cached.digest, cached.locations)
    # Not validated before, or the entry says something the file does not: validate.
    if document.data is None:
        raise _invalid(
            display, [f"{display}:1: the manifest is empty; start it with 'version: 1' (see gitops help manifest)"]
        )
    manifest = _validate(document.data, display, document.locations, document.problems)
    digest = manifest_digest(manifest)
    manifestcache.store(raw, cache_env, manifest, digest, document.locations)
    return _loaded(path, display, manifest, digest, document.locations)


def _parse(raw: bytes, display: str) -> Document:
    """The file's YAML, with the line of each key path (every load parses it, a cache hit too)."""
    # pyyaml is imported when a file is loaded, not when a module imports this one for the classes.
    from gitops.config import yamlload  # noqa: PLC0415 (boundary: PyYAML)

    try:
        return yamlload.parse(yamlload.decode(raw, display), display, what="a manifest")
    except Unreadable as exc:
        raise _invalid(display, exc.problems) from None


def _validate(
    data: Any, display: str | None, locations: Mapping[Loc, int] | None = None, found: Iterable[Found] = ()
) -> Manifest:
    """The validated manifest, or :class:`~gitops.errors.ManifestError` listing every problem."""
    # pydantic is imported only when the cache has no usable entry (or for data not read from a file).
    from gitops.config import validation  # noqa: PLC0415 (boundary: the validator)

    manifest, problems = validation.check(data, display, locations or {}, found)
    if manifest is None:
        raise _invalid("data" if display is None else display, problems)
    return manifest


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
        all_branches=tuple(manifest.branches),
    )


def manifest_from_data(data: Any) -> Manifest:
    """Validate manifest data that was not read from a file (every rule :func:`load_manifest` checks).

    Raises :class:`~gitops.errors.ManifestError` listing every problem as ``key: problem``.
    """
    return _validate(data, None)


def _invalid(display: str, problems: list[str]) -> ManifestError:
    return ManifestError(
        f"manifest {display} is invalid ({counted(problems)}):",
        problems,
        hint="The manifest reference: gitops help manifest; 'gitops schema' prints its JSON Schema.",
    )
