"""What ``gitops pull`` writes for one branch: pure, from the server's code set and a listing of the root.

:func:`plan_branch_pull` decides, module by module, the file it goes to (an existing file that already maps to the
module, else :func:`gitops.core.naming.module_path`), the bytes it holds (text as UTF-8, binary as the bytes the
base64 carried), and whether that changes anything; and it says what will not round-trip: modules the manifest's
globs would not read back as themselves (the next apply would remove them from the server), names no file maps to,
and local files the server does not have (the next apply uploads them). Hostile names (see
:func:`gitops.core.naming.unsafe_name_reason`) are ``refused``: the caller writes nothing at all then.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from gitops.config.manifest import BranchConfig
from gitops.core.codeset import CodeSet, Module
from gitops.core.globs import matcher
from gitops.core.local import module_name, never_module
from gitops.core.modulekinds import SOURCE_MAP_SUFFIX, Kind, kind_of, unwrap_source_map, wrap_source_map
from gitops.core.naming import Unmappable, candidate_paths
from gitops.core.protected import RUN_BY_NAME, collisions, refusal

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


class _Reading:
    """How the manifest reads a file under the root (as :func:`gitops.core.branchbuild.build_branch` does, without the
    file's content): whether it is a module, and of which name and kind."""

    def __init__(self, config: BranchConfig) -> None:
        self.config = config
        self.included = matcher(config.include)
        self.excluded = matcher(config.exclude)
        self.binary = matcher(config.binary)

    def why_not(self, path: str, binary: bool) -> str | None:
        """Why the file at ``path`` would not be read as a module of that kind, or ``None`` when it would."""
        if never_module(path):
            return "it is in a folder that never holds modules (node_modules)"
        if not self.included(path):
            return "include does not match it"
        if self.excluded(path):
            return "exclude leaves it out"
        if self.binary(path) != binary:
            return f"binary {'does not match' if binary else 'matches'} it"
        kind = self.kind(path)
        if kind == "other":
            return "it is not JavaScript, a source map nor binary by its name"
        if kind == "source map" and self.config.source_maps == "omit":
            return "source_maps: omit leaves it out"
        return None

    def kind(self, path: str) -> Kind:
        return kind_of(
            path,
            binary=bool(self.binary(path)),
            module_suffixes=tuple(self.config.naming.strip_suffixes),
        )

    def name(self, path: str) -> str:
        naming = self.config.naming
        if self.kind(path) == "source map":  # NAME.js.map, whatever strip_suffixes says
            naming = dataclasses.replace(naming, strip_suffixes=[])
        return module_name(path, binary=bool(self.binary(path)), naming=naming)


def existing_modules(config: BranchConfig, paths: Iterable[str]) -> dict[str, str]:
    """Module name -> the file under the root that the manifest reads as it today (only names one file gives)."""
    reading = _Reading(config)
    found: dict[str, list[str]] = {}
    for path in sorted(paths):
        if reading.why_not(path, bool(reading.binary(path))) is None:
            found.setdefault(reading.name(path), []).append(path)
    return {name: files[0] for name, files in found.items() if len(files) == 1}


def _file_of(module: Module, config: BranchConfig, candidates: list[str]) -> tuple[list[str], bytes]:
    """The paths (best first) and bytes of the file that holds ``module``: a wrapped source map
    (``module.exports = <map>;`` in module ``NAME.js.map``) goes back to ``NAME.js.map`` when the branch wraps
    source maps: the map itself when wrapping it again gives the server's module byte for byte, else the wrapper
    as the server holds it (which the wrap takes as it is), so that it always reads back exactly. Anything else is
    its content in the first path the naming rule reads back."""
    if (
        module.text is not None
        and module.name.endswith(SOURCE_MAP_SUFFIX)
        and config.source_maps == "wrap"
        and (inner := unwrap_source_map(module.text)) is not None
        and module.name in candidates_as_map(module.name, config)
    ):
        exact = wrap_source_map(inner) == module.text
        return [module.name], (inner if exact else module.text).encode("utf-8")
    return candidates, module_bytes(module)


def candidates_as_map(name: str, config: BranchConfig) -> list[str]:
    """The paths that the source-map rule reads as module ``name`` (``NAME.js.map`` itself, with no suffix
    stripped); empty when none does."""
    naming = dataclasses.replace(config.naming, strip_suffixes=[])
    try:
        return candidate_paths(name, binary=False, naming=naming)
    except ValueError:
        return []


def plan_branch_pull(
    config: BranchConfig,
    code: CodeSet,
    paths: Iterable[str],
    current: Callable[[str], bytes | None],
    *,
    manifest_names: frozenset[str] = frozenset(),
    builds: bool = True,
) -> BranchPull:
    """The files a pull of ``code`` writes under the root of ``config``.

    ``paths`` lists the files under the root now (relative, ``/`` separators); ``current(path)`` returns a file's
    bytes, or ``None`` when there is none. No other I/O happens here.

    A module is written only to a path that the manifest reads back as that very module; a module whose path
    :func:`gitops.core.protected.refusal` refuses (the manifest, a build's configuration, a dot-file, a name Git
    would refuse), or that two names would share on a case-insensitive or normalising file system, is ``refused``
    (and then nothing at all is written). ``manifest_names`` are the manifest's own file names, protected too.
    ``builds`` says that something in the repository may run a ``build.js`` (a ``package.json``, a ``build:``): when
    nothing does, a module named ``build`` is written like any other.
    """
    listed = sorted(paths)
    reading = _Reading(config)
    existing = existing_modules(config, listed)
    result = BranchPull(config.server, config.branch, config.root)
    run_by_name = RUN_BY_NAME if builds else RUN_BY_NAME - {"build"}
    chosen = _choose_files(code, config, reading, existing, manifest_names, run_by_name, result)
    targets: dict[str, list[str]] = {}
    for name, (path, _) in chosen.items():
        targets.setdefault(path, []).append(name)
    _refuse_collisions(targets, listed, result)
    _plan_writes(code, chosen, targets, set(listed), reading, current, result)
    _closing_notes(config, code, existing, result)
    return result


def _choose_files(
    code: CodeSet,
    config: BranchConfig,
    reading: _Reading,
    existing: Mapping[str, str],
    manifest_names: frozenset[str],
    run_by_name: frozenset[str],
    result: BranchPull,
) -> dict[str, tuple[str, bytes]]:
    """Phase 1: module name -> the file it goes to and its bytes, in the code's order; a module with no path the
    naming rule can give, no UTF-8 form, or a refused path gets a note or a refusal in ``result`` instead."""
    chosen: dict[str, tuple[str, bytes]] = {}
    for module in code:
        try:
            candidates = candidate_paths(module.name, binary=module.is_binary, naming=config.naming)
        except Unmappable as exc:
            result.notes.append(f"module {module.name!r} {exc}; not written (the next apply would remove it)")
            continue
        except ValueError as exc:
            result.refused.append(f"module {module.name!r} {exc}")
            continue
        try:
            paths_, data = _file_of(module, config, candidates)
        except UnicodeEncodeError:
            result.notes.append(
                f"module {module.name!r} holds a lone surrogate (\\ud800-\\udfff), which no UTF-8 file can hold; "
                "not written (the next apply would remove it)"
            )
            continue
        # The file the manifest reads as the module today; else the first path the manifest would read back as
        # this module; else the naming rule's first choice.
        path = existing.get(module.name) or next(
            (p for p in paths_ if reading.why_not(p, module.is_binary) is None and reading.name(p) == module.name),
            paths_[0],
        )
        why_refused = refusal(path, binary=module.is_binary, manifest_names=manifest_names, run_by_name=run_by_name)
        if why_refused is not None:
            result.refused.append(f"module {module.name!r} would be written to {path}, but {why_refused}")
            continue
        chosen[module.name] = (path, data)
    return chosen


def _refuse_collisions(targets: Mapping[str, list[str]], listed: list[str], result: BranchPull) -> None:
    """Phase 2: refuse two paths (chosen, or already there) that one case-insensitive or normalising file system
    would take for one file."""
    for first, second in collisions(targets, [p for p in listed if p not in targets]):
        names = [n for p in (first, second) for n in targets.get(p, [])]
        result.refused.append(
            f"{first} and {second} are one file on a case-insensitive or Unicode-normalising file system (macOS, "
            f"Windows){' (modules ' + ', '.join(repr(n) for n in names) + ')' if names else ''}; the two would "
            "overwrite each other"
        )


def _plan_writes(
    code: CodeSet,
    chosen: Mapping[str, tuple[str, bytes]],
    targets: Mapping[str, list[str]],
    listed_set: set[str],
    reading: _Reading,
    current: Callable[[str], bytes | None],
    result: BranchPull,
) -> None:
    """Phase 3: the write of each chosen module, unless modules share its path, a file or folder is in the way, or
    the manifest would not read the file back as that module (then a note says why)."""
    planned = set(targets)
    for module in code:
        if module.name not in chosen:
            continue
        path, data = chosen[module.name]
        if len(targets[path]) > 1:
            if targets[path][0] == module.name:
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
        why = reading.why_not(path, module.is_binary)
        if why is None and reading.name(path) != module.name:
            why = f"it would be read back as module {reading.name(path)!r}"
        if why is not None:
            # Never a file the manifest does not read as this module: it could be anything (a config, a script).
            result.notes.append(
                f"module {module.name!r} is not written to {path}: {why}, so the next apply would remove it from "
                "the server; fix include, exclude or binary in the manifest, then pull again"
            )
            continue
        before = current(path)
        action: Action = "create" if before is None else "same" if before == data else "update"
        result.writes.append(FileWrite(path, module.name, data, action))


def _closing_notes(config: BranchConfig, code: CodeSet, existing: Mapping[str, str], result: BranchPull) -> None:
    """Phase 4: what the pull means for a branch with a build, and the modules of the repository the server lacks."""
    if config.build is not None and result.changes:
        result.notes.append(
            f"the branch has a build, so {config.root}/ holds its output: the pulled files are the server's bundle, "
            "and the next build replaces them (the sources it was built from are not on the server)"
        )
    for name, path in sorted(existing.items()):
        if name not in code:
            result.notes.append(f"{path} (module {name!r}) is not on the server; the next apply uploads it")
