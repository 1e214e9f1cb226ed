"""A validated-manifest cache entry, checked against the manifest file itself before a run uses it.

The cache (:mod:`gitops.config.manifestcache`) is keyed by the digest of the file's bytes, but the entry is a file
that anything running as the player can write: a pull request's build, run by a reviewer's ``gitops validate``,
could plant an entry under the digest of main's manifest that names another server url, and the next ``gitops
plan`` on main would send the token there. So an entry never decides anything on its own: on every hit the file is
parsed again (pyyaml; the validator and pydantic, the expensive part, are still skipped) and every value of
the entry's manifest must be the value the file writes, or the field's default where the file writes none. Any
difference is a miss, and the file is validated as if nothing were cached.

The comparison is deliberately strict: a value the validator normalises in a way not written here (other than a
url's trailing ``/``) is a miss too, which costs a validation and never trusts the entry.
"""

from __future__ import annotations

import dataclasses
from typing import Any


def entry_matches_file(manifest: Any, data: Any) -> bool:
    """Whether the cached, validated ``manifest`` (a :class:`gitops.config.model.Manifest`) holds exactly what the
    parsed file ``data`` says, field by field."""
    return _agrees(manifest, data, "")


def _agrees(value: Any, raw: Any, name: str) -> bool:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _dataclass_agrees(value, raw)
    if isinstance(value, dict):
        return (
            isinstance(raw, dict)
            and set(raw) == set(value)
            and all(_agrees(item, raw[key], "") for key, item in value.items())
        )
    if isinstance(value, list):
        return isinstance(raw, list) and len(raw) == len(value) and all(map(_agrees, value, raw, [""] * len(value)))
    if name == "url" and isinstance(raw, str):
        return bool(raw.rstrip("/") == value)
    if type(value) is not type(raw):
        # A float field written as an integer (error_share: 1) is the same number; a bool is never an int here.
        return type(value) is float and type(raw) is int and float(raw) == value
    return bool(value == raw)


def _dataclass_agrees(value: Any, raw: Any) -> bool:
    if not isinstance(raw, dict):
        return False
    fields = {field.name: field for field in dataclasses.fields(value)}
    if not set(raw) <= set(fields):
        return False
    for name, field in fields.items():
        current = getattr(value, name)
        if name in raw:
            if not _agrees(current, raw[name], name):
                return False
        elif field.default is not dataclasses.MISSING:
            if current != field.default:
                return False
        elif field.default_factory is not dataclasses.MISSING:
            if current != field.default_factory():
                return False
        else:
            return False  # a required field the file does not write
    return True
