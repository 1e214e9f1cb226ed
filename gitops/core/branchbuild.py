"""Building one branch's code from the files under its root: the rules that turn files into modules.

:func:`build_branch` is pure: a branch's configuration, a listing of the files under its root and a way to read a
file's bytes become a :class:`~gitops.core.codeset.CodeSet` plus problems and warnings, with no I/O except through
the reader it is given. Its phases read in order: select the files the globs take, say what the globs get wrong,
name the modules, read them, check their requires, check their size.

Nothing under a root is left out silently, because a module left out is removed from the server by the next upload
(``remote_only: remove``): what an edge cannot list (a folder it cannot read, a submodule in a commit) reaches here
as ``unlisted``, and what it cannot read (an endless link, a named pipe) as a note on the file; either is refused
where the branch's globs reach it. The data it makes lives in :mod:`gitops.core.local`, apart, so that a plan's
parent process takes a forked read's code without importing the glob library or the requires check.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from gitops.config.manifest import BranchConfig, Loc, format_loc
from gitops.core.codeset import CodeSet, Module, refused_name_reason
from gitops.core.endpoints import MAX_BODY_BYTES, MAX_CODE_LENGTH
from gitops.core.globs import glob_reaches_into, matcher, may_hold_modules
from gitops.core.local import module_name, never_module, printable
from gitops.core.modulekinds import Kind, describe_kinds, kind_of, wrap_source_map
from gitops.core.requires import MissingRequire, check_requires, guarded_warnings, summarise


class UnreadableFile(Exception):
    """Raised by a reader: the file cannot be used as a module. The text completes "<file> ..."."""


@dataclass(frozen=True)
class BranchBuild:
    """What :func:`build_branch` made of one branch: the code (of the files that could be read) and what is wrong."""

    code: CodeSet
    files: dict[str, str]
    server_length: int
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: module name -> "javascript", "source map" or "binary" (for ``gitops validate --list``)
    kinds: dict[str, Kind] = field(default_factory=dict)


def _undecodable_part(path: str) -> str | None:
    """The leading part of ``path`` up to the first name that is not UTF-8, or ``None`` when it all is."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError as exc:
        end = path.find("/", exc.start)
        return path if end < 0 else path[:end]
    return None


def build_inputs(config: BranchConfig) -> tuple[object, ...]:
    """What :func:`build_branch` reads of ``config``, except the server (which only names the branch in its
    messages): two branches with equal inputs, read from the same listing, build the same code. Keep it in step
    with :func:`build_branch`."""
    return (
        config.root,
        config.branch,  # the upload body's size counts the branch's name
        config.include,
        config.exclude,
        config.binary,
        config.naming,
        config.source_maps,
        config.requires,
    )


def _left_out(
    paths: list[str],
    selected: set[str],
    config: BranchConfig,
    includes: list[Callable[[str], bool]],
    is_binary: Callable[[str], bool],
    shown: Callable[[str], str],
) -> dict[str, str]:
    """The modules that files under the root would make but include or exclude leave out, each with the hint a
    require of it gets: the file exists, and the glob to add to include (``**/*.wasm`` for a suffix) or that exclude
    drops it."""
    found: dict[str, str] = {}
    for path in paths:
        if path in selected or never_module(path):
            continue
        name = module_name(path, binary=is_binary(path), naming=config.naming)
        if name in found:
            continue
        if any(match(path) for match in includes):
            found[name] = f"{shown(path)} exists, but exclude leaves it out; change exclude"
            continue
        suffix = posixpath.splitext(path)[1]
        glob = f"**/*{suffix}" if suffix and suffix.isascii() and suffix[1:].isalnum() else path
        found[name] = f"{shown(path)} exists, but include does not match it; add {glob!r} to include"
    return found


@dataclass(frozen=True)
class _Selection:
    """The files the globs take: ``selected`` (included, not excluded), how many ``include`` matched in all, and
    how many each include glob matched."""

    selected: list[str]
    included: int
    hits: list[int]


def _select_files(
    ordered: list[str], includes: list[Callable[[str], bool]], is_excluded: Callable[[str], bool]
) -> _Selection:
    """Phase 1: the files that include takes and exclude leaves, counting each include glob's matches."""
    hits = [0] * len(includes)
    selected: list[str] = []
    included = 0
    for path in ordered:
        if never_module(path):
            continue
        matched = False
        for k, match in enumerate(includes):
            if match(path):
                hits[k] += 1
                matched = True
        if matched:
            included += 1
            if not is_excluded(path):
                selected.append(path)
    return _Selection(selected, included, hits)


def _glob_problems(
    config: BranchConfig,
    chosen: _Selection,
    unlisted: Mapping[str, str],
    *,
    label: str,
    root_shown: str,
    origin: str,
    where: Callable[[Loc], str],
    shown: Callable[[str], str],
) -> list[str]:
    """Phase 2: an include glob that matches nothing, an exclude that leaves no module, and each folder that could
    hold modules but could not be listed. A glob that reaches into such a folder is not said to match nothing."""
    blind = [folder for folder in sorted(unlisted) if may_hold_modules(folder, config)]
    problems: list[str] = []
    for k, count in enumerate(chosen.hits):
        if count == 0 and not any(glob_reaches_into(config.include[k], folder) for folder in blind):
            problems.append(
                f"{where(('include', k))}: {config.include[k]!r} matches no file under {root_shown}{origin}; "
                "fix the glob or remove it"
            )
    if chosen.included and not chosen.selected and not blind:
        problems.append(
            f"{where(('exclude',))}: excludes every file that include matches ({chosen.included}), so the branch "
            "would have no modules; fix include or exclude"
        )
    problems += [f"{label}: {shown(folder)}/ {unlisted[folder]}" for folder in blind]
    return problems


@dataclass
class _Named:
    """The selected files by module name (more than one file to a name is a problem said when reading), with each
    file's kind and whether it is binary."""

    by_name: dict[str, list[str]] = field(default_factory=dict)
    binary_of: dict[str, bool] = field(default_factory=dict)
    kinds: dict[str, Kind] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _name_modules(
    selected: list[str],
    config: BranchConfig,
    is_binary: Callable[[str], bool],
    label: str,
    shown: Callable[[str], str],
) -> _Named:
    """Phase 3: the module name of each selected file; a name that is not UTF-8 or that the server refuses is a
    problem, and a source map is left out with ``source_maps: omit``."""
    named = _Named()
    for path in selected:
        if not path.isascii():
            undecodable = _undecodable_part(path)
            if undecodable is not None:
                # The name cannot travel as the UTF-8 text of JSON, and apply would fail on it: refuse it here.
                what = "file" if undecodable == path else f"folder {shown(undecodable)}/"
                named.problems.append(
                    f"{label}: {shown(path)} has a name that is not UTF-8 (its undecodable bytes are shown as \\xNN), "
                    f"and module names are UTF-8 text; rename the {what}"
                )
                continue
        binary = is_binary(path)
        kind = kind_of(path, binary=binary, module_suffixes=tuple(config.naming.strip_suffixes))
        if kind == "source map" and config.source_maps == "omit":
            continue
        name = module_name(path, binary=binary, naming=config.naming)
        if kind == "source map":  # NAME.js.map, whatever strip_suffixes says
            name = module_name(path, binary=True, naming=dataclasses.replace(config.naming, strip_suffixes=[]))
        reason = refused_name_reason(name)
        if reason is not None:
            named.problems.append(
                f"{label}: {shown(path)} becomes module {name!r}, but {reason}; rename it, or exclude it"
            )
            continue
        named.by_name.setdefault(name, []).append(path)
        named.binary_of[path] = binary
        named.kinds[path] = kind
    return named


@dataclass
class _ModulesRead:
    """The modules read, the file each came from (as shown in messages) and its kind, and what could not be used."""

    modules: list[Module] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    kinds: dict[str, Kind] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _read_modules(
    named: _Named, read: Callable[[str], bytes], config: BranchConfig, label: str, shown: Callable[[str], str]
) -> _ModulesRead:
    """Phase 4: read each module's one file (two files to one name is a problem, and neither is read)."""
    done = _ModulesRead()
    for name, sources in named.by_name.items():
        if len(sources) > 1:
            listed = [shown(p) for p in sources]
            both = "both" if len(listed) == 2 else "all"
            done.problems.append(
                f"{label}: {', '.join(listed[:-1])} and {listed[-1]} {both} become module {name!r}; rename or "
                f"exclude {'one of them' if len(listed) == 2 else 'all but one'}"
            )
            continue
        path = sources[0]
        made = _read_module(name, path, read, named, config, f"{label}: {shown(path)}")
        if isinstance(made, str):
            done.problems.append(made)
            continue
        done.modules.append(made)
        done.files[name] = shown(path)
        done.kinds[name] = named.kinds[path]
    return done


def _read_module(
    name: str, path: str, read: Callable[[str], bytes], named: _Named, config: BranchConfig, file: str
) -> Module | str:
    """One module from its file, or the problem that keeps it out (``file`` is ``<label>: <file>``): unreadable,
    of no kind the game runs, not UTF-8 text, or a source map that cannot be wrapped."""
    try:
        data = read(path)
    except UnreadableFile as exc:
        return f"{file} {exc}"
    if named.kinds[path] == "other":  # refused after the read, so that why it cannot be read is said first
        return f"{file} is not {describe_kinds()}, so the game could not run it; exclude it, or list it under binary"
    if named.binary_of[path]:
        return Module(name, binary=data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return (
            f"{file} is not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}, "
            f"line {line}); save it as UTF-8, or list it under binary if it is not text"
        )
    if named.kinds[path] == "source map" and config.source_maps == "wrap":
        try:
            text = wrap_source_map(text)
        except ValueError as exc:
            return f"{file} {exc}; fix the build, or set source_maps: omit for this branch"
    return Module(name, text=text)


def _missing_requires(done: _ModulesRead, config: BranchConfig, left_out: dict[str, str]) -> list[MissingRequire]:
    """Phase 5: the requires of the JavaScript modules that name no module of the branch."""
    return check_requires(
        (
            (m.name, done.files[m.name], m.text)
            for m in done.modules
            if m.text is not None and done.kinds[m.name] == "javascript"
        ),
        [m.name for m in done.modules],
        ignore=config.requires.ignore,
        separator=config.naming.separator,
        left_out=left_out,
    )


def _size_problems(code: CodeSet, length: int, branch: str, label: str) -> list[str]:
    """Phase 6: code over the server's 5 MB limit (counted as the server counts it), or an upload body over its
    request limit."""
    if length > MAX_CODE_LENGTH:
        return [
            f"{label}: the code is {length:,} characters as the server counts them (JSON.stringify of the "
            f"modules), over the 5 MB limit of {MAX_CODE_LENGTH:,}; exclude files or minify the code"
        ]
    if (body := code.upload_body_length(branch)) > MAX_BODY_BYTES:
        # Under 5 MB of UTF-16 units can still be over 8 MiB of UTF-8 (3 bytes for most non-Latin characters).
        return [
            f"{label}: the upload would be {body:,} bytes of JSON (UTF-8), over the server's request body limit of "
            f"{MAX_BODY_BYTES:,} (8 MiB), though under 5 MB as the server counts characters; exclude files or "
            "minify the code"
        ]
    return []


def build_branch(
    config: BranchConfig,
    paths: Iterable[str],
    read: Callable[[str], bytes],
    *,
    label: str | None = None,
    prefix: str = "",
    origin: str = "",
    where: Callable[[Loc], str] | None = None,
    prefetch: Callable[[list[str]], None] | None = None,
    unlisted: Mapping[str, str] | None = None,
) -> BranchBuild:
    """The code set of one branch, from the files under its root.

    ``paths`` are relative to the root (``/`` separators); ``read(path)`` returns a file's bytes or raises
    :class:`UnreadableFile`. ``prefix`` is the root's path relative to the manifest's folder (for file names in
    messages and in ``files``), ``origin`` says where the files are (``" in commit 1a2b3c4"``), and
    ``where(loc)`` names a key of this branch in the manifest (``gitops.yaml:9: branches[0].include[1]``).
    ``prefetch(paths)``, when given, is told once which files will be read, so an edge can fetch them in one go.
    ``unlisted`` maps the folders under the root whose files could not be listed to why (the text completes
    "<folder>/ ..."): each one that include could reach into is a problem, since the modules in it would be left
    out, and an upload (``remote_only: remove``) would delete them from the server.
    No I/O happens here except through ``read`` and ``prefetch``.
    """
    label = label or f"{config.server}/{config.branch}"
    base = prefix.rstrip("/") + "/" if prefix else ""

    def shown(path: str) -> str:
        return printable(base + path)  # as posixpath.join(prefix, path) for a relative path, without its cost

    includes = [matcher([g]) for g in config.include]
    is_binary = matcher(config.binary)
    ordered = sorted(paths)
    chosen = _select_files(ordered, includes, matcher(config.exclude))
    problems = _glob_problems(
        config,
        chosen,
        unlisted or {},
        label=label,
        root_shown=f"{prefix}/" if prefix else "./",
        origin=origin,
        where=where if where is not None else format_loc,
        shown=shown,
    )
    named = _name_modules(chosen.selected, config, is_binary, label, shown)
    problems += named.problems
    if prefetch is not None:
        prefetch([sources[0] for sources in named.by_name.values() if len(sources) == 1])
    done = _read_modules(named, read, config, label, shown)
    problems += done.problems
    warnings: list[str] = []
    if config.requires.check:
        left_out = _left_out(ordered, set(chosen.selected), config, includes, is_binary, shown)
        missing = _missing_requires(done, config, left_out)
        problems += summarise(missing, label)
        warnings += guarded_warnings(missing, label)
    code = CodeSet.of(done.modules)
    length = code.server_length()
    problems += _size_problems(code, length, config.branch, label)
    if chosen.selected and "main" not in named.by_name:
        add = f"add {shown('main.js')}" if ".js" in config.naming.strip_suffixes else "add a module named main"
        warnings.append(f"{label}: no module 'main'; the server adds an empty one, so the code will not run; {add}")
    return BranchBuild(code, done.files, length, problems, warnings, done.kinds)
