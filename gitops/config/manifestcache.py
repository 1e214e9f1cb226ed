"""The validated-manifest cache: a manifest validated before is loaded without pydantic.

Validating a manifest (importing pydantic, building its models) costs a run more than anything else it does before
its first request, and the manifest rarely changes between runs. So a valid manifest is written to
``<cache>/manifests/<sha256 of the file's bytes>.json`` (:func:`default_cache_dir`), and the next load of the same
bytes builds the classes of :mod:`gitops.config.model` from that entry instead.

Why skipping the validation is safe: anything running as the player can write this folder, so an entry never
decides alone. The file is still parsed and every value of the entry compared with it (:mod:`gitops.config.cachecheck`);
an entry is used only for the same bytes, the same tool version, entry :data:`FORMAT` and rules (the stamp of the
modules in ``_RULES``); every value is type-checked and the digest recomputed as it is read; only valid manifests are
written, never a secret (a manifest names variables, not values); the folder must be the user's own and private.
Any failure reading or writing is a miss, silently: the cache can only make a run faster.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import stat
import tempfile
import time
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import gitops
from gitops.config import model
from gitops.config.folders import user_folder
from gitops.config.model import Manifest, manifest_digest
from gitops.config.reading import Loc

__all__ = ["CACHE_DIR_ENV", "FORMAT", "KEEP", "Cached", "default_cache_dir", "lookup", "store"]

CACHE_DIR_ENV = "GITOPS_CACHE_DIR"
#: The format of an entry; a change of layout raises it, and entries of another format are misses.
FORMAT = 1
#: How many entries the folder keeps (the most recently used); a manifest's entry is a few kilobytes.
KEEP = 64
#: A larger entry is not read (a manifest is at most 1 MB; its entry holds it once, plus a line per key path).
_MAX_ENTRY_BYTES = 4 * 1024 * 1024
#: The modules whose rules decide what is valid (under ``gitops/``): their size and time are part of what an entry
#: must match. ``core/endpoints.py`` is the limits table that ``budget.reserve`` keys are checked against.
_RULES = (
    "config/validation.py",
    "config/valuerules.py",
    "config/relations.py",
    "config/yamlload.py",
    "config/model.py",
    "config/reading.py",
    "core/endpoints.py",
)


def default_cache_dir(env: Mapping[str, str]) -> Path:
    """``$GITOPS_CACHE_DIR``, else ``$XDG_CACHE_HOME/screeps-gitops``, else ``~/.cache/screeps-gitops``."""
    return user_folder(env, CACHE_DIR_ENV, "XDG_CACHE_HOME", (".cache",))


@dataclass(frozen=True)
class Cached:
    """What a cache entry gives: the validated manifest, its digest, and the line of every key path."""

    manifest: Manifest
    digest: str
    locations: dict[Loc, int]


def lookup(raw: bytes, env: Mapping[str, str]) -> Cached | None:
    """The entry for a manifest file's bytes ``raw``, or ``None`` (no entry, or one that cannot be used)."""
    try:
        key = hashlib.sha256(raw).hexdigest()
        folder = default_cache_dir(env) / "manifests"
        if not _private(folder):
            return None
        entry_path = folder / f"{key}.json"
        with open(entry_path, "rb") as stream:
            text = stream.read(_MAX_ENTRY_BYTES + 1)
        if len(text) > _MAX_ENTRY_BYTES:
            return None
        cached = _from_entry(json.loads(text), key)
    except Exception:  # the cache only ever makes a run faster: any failure is a miss
        return None
    if cached is not None:
        with contextlib.suppress(OSError):
            os.utime(entry_path)  # the most recently used entries are the ones kept
    return cached


def store(raw: bytes, env: Mapping[str, str], manifest: Manifest, digest: str, locations: Mapping[Loc, int]) -> None:
    """Write the entry of a *validated* manifest (call it only after every rule passed); failures are ignored."""
    # A cache that cannot be written costs the next run time, nothing else.
    with contextlib.suppress(Exception):
        _store(raw, env, manifest, digest, locations)


def _store(raw: bytes, env: Mapping[str, str], manifest: Manifest, digest: str, locations: Mapping[Loc, int]) -> None:
    lines: list[list[Any]] = []
    for loc, line in locations.items():
        if not all(type(part) in (str, int) for part in loc) or type(line) is not int:
            return  # a key path JSON cannot carry exactly: validate such a file each time
        lines.append([list(loc), line])
    key = hashlib.sha256(raw).hexdigest()
    entry = {
        "format": FORMAT,
        "gitops": gitops.__version__,
        "rules": _rules_stamp(),
        "sha256": key,
        "digest": digest,
        "manifest": dataclasses.asdict(manifest),
        "locations": lines,
    }
    data = json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    base = default_cache_dir(env)
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder = base / "manifests"
    folder.mkdir(mode=0o700, exist_ok=True)
    if not _private(folder):
        return
    fd, temp = tempfile.mkstemp(dir=folder, prefix=".entry-", suffix=".tmp")  # mkstemp creates it 0600
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
        os.replace(temp, folder / f"{key}.json")
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    _prune(folder)


def _prune(folder: Path) -> None:
    """Keep the :data:`KEEP` most recently used entries; remove temporary files a crashed run left (an hour old)."""
    entries: list[tuple[float, Path]] = []
    for path in folder.iterdir():
        try:
            modified = path.lstat().st_mtime
            if path.name.endswith(".json"):
                entries.append((modified, path))
            elif path.name.endswith(".tmp") and modified < time.time() - 3600:
                path.unlink()
        except OSError:
            continue
    entries.sort(reverse=True)
    for _, path in entries[KEEP:]:
        try:
            path.unlink()
        except OSError:
            continue


def _private(folder: Path) -> bool:
    """Whether ``folder`` is a real folder of this user that nobody else may write to."""
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return False
    getuid = getattr(os, "getuid", None)
    return getuid is None or info.st_uid == getuid()


def _rules_stamp() -> str:
    here = Path(__file__).parent.parent
    parts = []
    for name in _RULES:
        info = os.stat(here / name)
        parts.append(f"{name}:{info.st_size}:{info.st_mtime_ns}")
    return ";".join(parts)


# --- reading an entry, checking every value ---------------------------------------------------------------------


class _Malformed(Exception):
    """An entry that does not hold what this version writes."""


def _from_entry(entry: Any, key: str) -> Cached | None:
    if not isinstance(entry, dict):
        return None
    if (
        type(entry.get("format")) is not int
        or entry["format"] != FORMAT
        or entry.get("gitops") != gitops.__version__
        or entry.get("sha256") != key
        or entry.get("rules") != _rules_stamp()
    ):
        return None
    manifest = _build(Manifest, entry.get("manifest"))
    digest = entry.get("digest")
    if not isinstance(digest, str) or manifest_digest(manifest) != digest:
        return None
    locations: dict[Loc, int] = {}
    listed = entry.get("locations")
    if not isinstance(listed, list):
        return None
    for item in listed:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], list) and type(item[1]) is int):
            return None
        if not all(type(part) in (str, int) for part in item[0]):
            return None
        locations[tuple(item[0])] = item[1]
    return Cached(manifest, digest, locations)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls, vars(model))
    return hints


def _build(hint: Any, value: Any) -> Any:
    """``value`` (from JSON) as ``hint``, a type of :mod:`gitops.config.model`; :class:`_Malformed` if it is not."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        hints = _hints(hint)
        if not isinstance(value, dict) or set(value) != set(hints):
            raise _Malformed(hint.__name__)
        return hint(**{name: _build(field_hint, value[name]) for name, field_hint in hints.items()})
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        for option in typing.get_args(hint):
            try:
                return _build(option, value)
            except _Malformed:
                continue
        raise _Malformed(str(hint))
    if origin is Literal:
        if any(type(value) is type(allowed) and value == allowed for allowed in typing.get_args(hint)):
            return value
        raise _Malformed(str(hint))
    if origin is list:
        if not isinstance(value, list):
            raise _Malformed(str(hint))
        (item,) = typing.get_args(hint)
        return [_build(item, v) for v in value]
    if origin is dict:
        if not isinstance(value, dict):
            raise _Malformed(str(hint))
        _, item = typing.get_args(hint)
        return {k: _build(item, v) for k, v in value.items()}  # JSON keys are strings
    if hint is type(None):
        if value is None:
            return None
    elif hint is float:
        if type(value) in (int, float):
            return value  # kept as it is: an int default stays an int, as the digest saw it
    elif hint in (str, int, bool) and type(value) is hint:
        return value
    raise _Malformed(str(hint))
