"""pydantic's errors about a manifest, in the manifest's words: the place, what is wrong, and how to fix it.

A missing key says what to add, a type error names the kind of value found (never the value: it could be a
secret), an unknown key suggests the close one, says where a key of another level goes, or refuses a literal
secret. The models are walked from the root the caller gives (:mod:`gitops.config.validation`'s ``Manifest``).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel

from gitops.config.reading import Loc
from gitops.config.relations import LITERAL_USER_KEYS, SECRET_KEYS, close_matches

__all__ = ["pydantic_problem"]

_MISSING_HINTS = {
    "version": "add 'version: 1' at the top",
    "servers": "add a 'servers:' mapping, e.g. local: {url: http://127.0.0.1:21025, token_env: SCREEPS_TOKEN}",
    "branches": "add a 'branches:' list, e.g. - {server: local, branch: main}",
    "url": "add the server's base URL, e.g. url: https://screeps.com",
    "server": "name a key under servers, e.g. server: local",
    "branch": "name the branch, e.g. branch: main",
}


def _kind(value: object) -> str:
    if value is None:
        return "empty (null)"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def pydantic_problem(err: Mapping[str, Any], root: type[BaseModel]) -> tuple[Loc, str]:
    """One of pydantic's errors for a manifest validated against the model ``root``, as its place and our words."""
    loc: Loc = tuple(err["loc"])
    kind, value, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    if loc and loc[-1] == "[key]":
        return loc[:-1], f"the key must be a string, not {_kind(loc[-2] if len(loc) > 1 else None)}"
    name = loc[-1] if loc else ""
    if kind == "gitops":
        return loc, str(ctx.get("message", err["msg"]))
    if kind == "missing":
        hint = _MISSING_HINTS.get(str(name), "add it")
        return loc, f"is required but missing; {hint}"
    if kind == "extra_forbidden":
        return loc, _unknown_key_text(loc, root)
    if kind == "string_type":
        return loc, f"must be a string, not {_kind(value)}; put the value in quotes"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return loc, f"must be a whole number, not {_kind(value)}"
    if kind == "list_type":
        return loc, f"must be a list, not {_kind(value)}; write [a, b] or one '- item' per line"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return loc, f"must be a mapping (key: value lines), not {_kind(value)}"
    if kind == "literal_error":
        shown = repr(value) if isinstance(value, str | int) and not isinstance(value, bool) else _kind(value)
        if loc == ("version",):
            return loc, f"{shown} is not a manifest version this screeps-gitops reads; write 'version: 1'"
        return loc, f"must be {ctx.get('expected', 'one of the allowed values')}, not {shown}"
    if kind == "greater_than_equal":
        return loc, f"must be {ctx.get('ge')} or more"
    msg = str(err["msg"])
    return loc, msg[0].lower() + msg[1:] if msg else kind


def _unknown_key_text(loc: Loc, root: type[BaseModel]) -> str:
    key = str(loc[-1])
    secret = SECRET_KEYS.get(key.lower())
    if secret is not None:
        return f"literal secrets are refused; put the {secret} in an environment variable and name it with {secret}_env"
    if key.lower() in LITERAL_USER_KEYS:
        return "user names are not written here; put it in an environment variable and name it with username_env"
    allowed = _keys_at(loc[:-1], root)
    home = _home_of(key, root)
    if home is not None and home[:-1] != _shape(loc[:-1], root):
        # A key of another level (a branch's verify: written at the top) is misplaced, not misspelt.
        return f"'{key}' is not a key here; it is a key of {_place_text(home[:-1])} ({_dotted(home)}): move it there"
    close = close_matches(key, allowed)
    if close:
        return f"unknown key; did you mean '{close[0]}'?"
    if allowed:
        return f"unknown key; the keys here are: {', '.join(allowed)}"
    return "unknown key; remove it"


def _shape(loc: Loc, root: type[BaseModel]) -> tuple[str, ...]:
    """``loc`` as :func:`_home_of` spells places: list indexes ``[]``, a mapping's own keys ``NAME``."""
    out: list[str] = []
    current: Any = root
    for part in loc:
        current = _unwrap(current)
        origin = typing.get_origin(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            info = current.model_fields.get(str(part))
            out.append(str(part))
            current = None if info is None else info.annotation
        elif origin in (list, dict):
            out.append("[]" if origin is list else "NAME")
            current = typing.get_args(current)[-1]
        else:
            out.append(str(part))
    return tuple(out)


def _home_of(key: str, root: type[BaseModel]) -> tuple[str, ...] | None:
    """Where the manifest has a key named ``key`` (the shallowest place; ``[]`` for a list's entries, ``NAME`` for
    a mapping's own keys): ``('branches', '[]', 'verify')``; ``None`` when no model has it."""
    queue: list[tuple[Any, tuple[str, ...]]] = [(root, ())]
    seen: set[type] = set()
    while queue:
        cls, path = queue.pop(0)
        if cls in seen:
            continue
        seen.add(cls)
        for name, info in cls.model_fields.items():
            if name == key:
                return (*path, name)
            inner, where = _unwrap(info.annotation), (*path, name)
            while typing.get_origin(inner) in (list, dict):
                where = (*where, "[]" if typing.get_origin(inner) is list else "NAME")
                inner = _unwrap(typing.get_args(inner)[-1])
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                queue.append((inner, where))
    return None


def _place_text(place: tuple[str, ...]) -> str:
    """``each entry of 'branches:'``, ``a server under 'servers:'``, ``'budget:'``: where a key goes, in words."""
    if place == ("branches", "[]"):
        return "each entry of 'branches:'"
    if place == ("servers", "NAME"):
        return "a server under 'servers:'"
    if not place:
        return "the top of the manifest"
    return f"'{_dotted(place)}:'"


def _dotted(place: tuple[str, ...]) -> str:
    """``branches[].verify.ticks``, ``servers.NAME.url``."""
    return ".".join(place).replace(".[]", "[]")


def _keys_at(loc: Loc, root: type[BaseModel]) -> list[str]:
    """The field names of the model found at ``loc`` (an empty list where there is no model)."""
    current: Any = root
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            info = current.model_fields.get(str(part))
            if info is None:
                return []
            current = info.annotation
        elif typing.get_origin(current) in (list, dict):
            current = typing.get_args(current)[-1]
        else:
            return []
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _unwrap(annotation: Any) -> Any:
    """``X`` from ``X | None`` and ``Annotated[X, ...]``."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation
