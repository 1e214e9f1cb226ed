"""What ``gitops pull`` writes for one branch: pure, from the server's code set and a listing of the root.

:func:`plan_branch_pull` decides, module by module, the file it goes to (an existing file that already maps to the
module, else :func:`gitops.core.naming.module_path`), the bytes it holds (text as UTF-8, binary as the bytes the
base64 carried), and whether that changes anything; and it says what will not round-trip: modules the manifest's
globs would not read back as themselves (the next apply would remove them from the server), names no file maps to,
and local files the server does not have (the next apply uploads them). Hostile names (see
:func:`gitops.core.naming.unsafe_name_reason`) are ``refused``: the caller writes nothing at all then.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from gitops.config.manifest import BranchConfig
from gitops.core.codeset import CodeSet, Module
from gitops.core.local import GLOB_FLAGS, module_name
from gitops.core.naming import Unmappable, candidate_paths

Action = Literal["create", "update", "same"]


@dataclass(frozen=True)
class FileWrite:
    """One file of a pull: ``path`` relative to the root, the module it holds, its bytes, and what changes."""

    path: str
    module: str
    data: bytes
    action: Action


@dataclass(frozen=True)
class BranchPull:
    """What a pull does to one branch's root. ``refused`` are hostile names (nothing is written when any is);
    ``notes`` are what will not round-trip, one line each, for the person."""

    server: str
    branch: str
    root: str
    writes: list[FileWrite] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.server}/{self.branch}"

    @property
    def changes(self) -> list[FileWrite]:
        return [w for w in self.writes if w.action != "same"]


def module_bytes(module: Module) -> bytes:
    """The bytes of the file that holds ``module``: text as UTF-8, binary as it is. ``UnicodeEncodeError`` for a
    text with a lone surrogate (JSON can carry one; no UTF-8 file can)."""
    if module.binary is not None:
        return module.binary
    assert module.text is not None
    return module.text.encode("utf-8")


def _matcher(patterns: Iterable[str]) -> Callable[[str], bool]:
    from wcmatch import glob as wcglob

    patterns = list(patterns)
    if not patterns:
        return lambda _path: False
    compiled = wcglob.compile(patterns, flags=GLOB_FLAGS)
    return lambda path: bool(compiled.match(path))


def existing_modules(config: BranchConfig, paths: Iterable[str]) -> dict[str, str]:
    """Module name -> the file under the root that the manifest reads as it today (only names one file gives)."""
    included, excluded, binary = _matcher(config.include), _matcher(config.exclude), _matcher(config.binary)
    found: dict[str, list[str]] = {}
    for path in sorted(paths):
        if included(path) and not excluded(path):
            found.setdefault(module_name(path, binary=binary(path), naming=config.naming), []).append(path)
    return {name: files[0] for name, files in found.items() if len(files) == 1}


def plan_branch_pull(
    config: BranchConfig,
    code: CodeSet,
    paths: Iterable[str],
    current: Callable[[str], bytes | None],
) -> BranchPull:
    """The files a pull of ``code`` writes under the root of ``config``.

    ``paths`` lists the files under the root now (relative, ``/`` separators); ``current(path)`` returns a file's
    bytes, or ``None`` when there is none. No other I/O happens here.
    """
    listed = sorted(paths)
    listed_set = set(listed)
    included, excluded, binary_glob = _matcher(config.include), _matcher(config.exclude), _matcher(config.binary)
    existing = existing_modules(config, listed)

    def reads_back(path: str, binary: bool) -> bool:
        return included(path) and not excluded(path) and binary_glob(path) == binary

    result = BranchPull(config.server, config.branch, config.root)
    targets: dict[str, list[str]] = {}
    chosen: dict[str, str] = {}
    for module in code:
        try:
            candidates = candidate_paths(module.name, binary=module.is_binary, naming=config.naming)
        except Unmappable as exc:
            result.notes.append(f"module {module.name!r} {exc}; not written (the next apply would remove it)")
            continue
        except ValueError as exc:
            result.refused.append(f"module {module.name!r} {exc}")
            continue
        # The file the manifest reads as the module today; else the first path the manifest would read back as
        # this module (include, exclude and binary agreeing); else the naming rule's first choice.
        path = existing.get(module.name) or next(
            (p for p in candidates if reads_back(p, module.is_binary)), candidates[0]
        )
        chosen[module.name] = path
        targets.setdefault(path, []).append(module.name)

    planned = set(targets)
    for module in code:
        if module.name not in chosen:
            continue
        path = chosen[module.name]
        if len(targets[path]) > 1:
            result.notes.append(
                f"modules {', '.join(repr(n) for n in targets[path])} would all be written to {path}; none is "
                "written (the next apply would remove them)"
            )
            continue
        parents = [path[:i] for i in range(len(path)) if path[i] == "/"]
        blocked = next((p for p in parents if p in listed_set or p in planned), None)
        if blocked is not None or any(other.startswith(path + "/") for other in listed_set | planned):
            what = f"{blocked} is a file" if blocked is not None else f"{path} is a folder"
            result.notes.append(f"module {module.name!r} goes to {path}, but {what}; not written")
            continue
        try:
            data = module_bytes(module)
        except UnicodeEncodeError:
            result.notes.append(
                f"module {module.name!r} holds a lone surrogate (\\ud800-\\udfff), which no UTF-8 file can hold; "
                "not written (the next apply would remove it)"
            )
            continue
        before = current(path)
        action: Action = "create" if before is None else "same" if before == data else "update"
        result.writes.append(FileWrite(path, module.name, data, action))
        round_trips = (
            included(path)
            and not excluded(path)
            and binary_glob(path) == module.is_binary
            and module_name(path, binary=module.is_binary, naming=config.naming) == module.name
        )
        if not round_trips:
            why = (
                "include does not match it"
                if not included(path)
                else "exclude leaves it out"
                if excluded(path)
                else f"binary {'does not match' if module.is_binary else 'matches'} it"
                if binary_glob(path) != module.is_binary
                else "its name reads back differently"
            )
            result.notes.append(
                f"module {module.name!r} is written to {path}, but {why}, so the next apply would remove it from "
                "the server; fix include, exclude or binary"
            )
    for name, path in sorted(existing.items()):
        if name not in code:
            result.notes.append(f"{path} (module {name!r}) is not on the server; the next apply uploads it")
    return result
