"""The local code of each branch, as pure data and one pure function.

:func:`build_branch` turns a branch's configuration, a listing of the files under its root and a way to read a
file's bytes into a :class:`~gitops.core.codeset.CodeSet` plus problems and warnings. The edges that list and read
files (the working tree, a Git ref) live in :mod:`gitops.edges.sources`.

Nothing under a root is left out silently, because a module left out is removed from the server by the next upload
(``remote_only: remove``): what an edge cannot list (a folder it cannot read, a submodule in a commit) reaches the
core as ``unlisted``, and what it cannot read (an endless link, a named pipe) as a note on the file; the core refuses
either where the branch's globs reach it.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from gitops.config.manifest import BranchConfig, Loc, Naming, format_loc
from gitops.core.codeset import CodeSet, Module, refused_name_reason
from gitops.core.endpoints import MAX_BODY_BYTES, MAX_CODE_LENGTH
from gitops.core.modulekinds import Kind, describe_kinds, kind_of, wrap_source_map


def glob_flags() -> int:
    """wcmatch's flags for the manifest's globs: ``**`` spans folders; ``{a,b}`` alternatives; ``/`` separators and
    case-sensitive matching on every platform. ``*`` does not match a leading dot (as in a shell): a module name
    starting with ``.`` would be dropped anyway.

    wcmatch (and the requires check) are imported by what matches globs and builds branches, not by this module:
    a plan's parent process imports it to take the code its child read, and never matches a glob (~12 ms)."""
    from wcmatch import glob as wcglob

    return wcglob.GLOBSTAR | wcglob.BRACE | wcglob.FORCEUNIX


class UnreadableFile(Exception):
    """Raised by a reader: the file cannot be used as a module. The text completes "<file> ..."."""


@dataclass(frozen=True)
class SourceInfo:
    """Where the local code came from: the working tree, the blobs of a commit (``--ref``), or a code set file that
    a build job wrote (``--codeset``; ``ref`` is then the file's path).

    ``commit`` is the full commit id (for the working tree: ``HEAD``, when the folder is in a Git repository);
    ``dirty`` says whether the working tree differs from ``HEAD`` under the branch roots or in the manifest
    (``None`` for a ref, or outside Git).
    """

    kind: Literal["worktree", "ref", "codeset"]
    ref: str | None
    commit: str | None
    dirty: bool | None

    def describe(self) -> str:
        """``working tree (commit 1a2b3c4d5e6f, uncommitted changes)`` or ``ref main (commit 1a2b3c4d5e6f)``."""
        if self.kind == "ref":
            return f"ref {self.ref} (commit {(self.commit or '')[:12]})"
        if self.kind == "codeset":
            return f"code set {self.ref} (commit {(self.commit or '')[:12] or 'none'})"
        details = []
        if self.commit:
            details.append(f"commit {self.commit[:12]}")
        if self.dirty:
            details.append("uncommitted changes")
        return "working tree" + (f" ({', '.join(details)})" if details else "")


@dataclass(frozen=True)
class LocalBranch:
    """The code of one branch of the manifest. ``files`` maps module name to the file it came from (relative to
    the manifest's folder, ``/`` separators)."""

    server: str
    branch: str
    code: CodeSet
    files: dict[str, str]
    #: module name -> "javascript", "source map" or "binary"
    kinds: Mapping[str, Kind] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.server}/{self.branch}"

    @cached_property
    def server_length(self) -> int:
        """``JSON.stringify(modules).length``, as the server counts it against the 5 MB limit."""
        return self.code.server_length()


@dataclass(frozen=True)
class LocalCode:
    """The code of every branch of the manifest, in manifest order."""

    branches: list[LocalBranch]
    source: SourceInfo
    warnings: list[str]

    def get(self, server: str, branch: str) -> LocalBranch | None:
        return next((b for b in self.branches if b.server == server and b.branch == branch), None)


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


# --- the pure core ---------------------------------------------------------------------------------------------


def module_name(path: str, *, binary: bool, naming: Naming) -> str:
    """The module name of a file at ``path`` (relative to the branch root, ``/`` separators).

    The name loses the longest of ``naming.strip_suffixes`` that ends the path, for text and binary modules alike
    (``binary`` is accepted for older callers and changes nothing): with the default ``[".js"]`` a ``.wasm`` file
    keeps its suffix, and listing ``.wasm`` there names ``pkg/mybot_bg.wasm`` ``pkg/mybot_bg``, as
    ``require('mybot_bg')`` in a cargo-screeps loader expects. Folder boundaries become ``naming.separator``:
    ``role/harvester.js`` is ``role/harvester`` or ``role.harvester``.
    """
    del binary  # binary modules are named like text modules since issue 13
    name = path
    for suffix in sorted(naming.strip_suffixes, key=len, reverse=True):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
            break
    if naming.separator != "/":
        name = name.replace("/", naming.separator)
    return name


#: Folders whose files are never modules, in the working tree and in a commit alike: dependencies and Git's own.
NEVER_MODULE_FOLDERS = frozenset({"node_modules", ".git"})


def never_module(path: str) -> bool:
    """Whether ``path`` lies in a folder that never holds modules (``node_modules/``, ``.git/``)."""
    return any(part in NEVER_MODULE_FOLDERS for part in path.split("/")[:-1])


def _matcher(patterns: list[str]) -> Callable[[str], bool]:
    """Whether a path matches one of ``patterns`` (and none of their exclusions), as ``wcglob.compile(patterns,
    flags=glob_flags()).match(path)`` says. The library's own regular expressions (``wcglob.translate``), matched here
    directly: its matcher object adds ~5 µs of checks per call, a third of the local read of 2,000 files."""
    if not patterns:
        return lambda _path: False
    from wcmatch import glob as wcglob

    include, exclude = wcglob.translate(patterns, flags=glob_flags())
    included = re.compile("|".join(f"(?:{p})" for p in include)).fullmatch
    if not exclude:
        return lambda path: included(path) is not None
    excluded = re.compile("|".join(f"(?:{p})" for p in exclude)).fullmatch
    return lambda path: included(path) is not None and excluded(path) is None


def printable(path: str) -> str:
    """``path`` for a message: the bytes of a name that is not UTF-8 (``os.fsdecode`` made them lone surrogates)
    shown as ``\\xe9``, so that printing it cannot fail."""
    if path.isascii():
        return path
    try:
        raw = path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that no undecodable byte made
        return path.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


def in_git_folder(path: str) -> bool:
    """Whether ``path`` (``/`` separators, relative to the repository or the root) names ``.git`` or something in it.

    Git's own folder holds the history, hooks and config (remote URLs may carry tokens): never a module. A working
    tree skips ``.git`` folders when it walks; this catches a root, or a link's target, that names one.
    """
    # Case-insensitively, as Git itself protects the name (a case-insensitive file system opens .GIT as .git).
    return ".git" in posixpath.normpath(path).casefold().split("/")


def _undecodable_part(path: str) -> str | None:
    """The leading part of ``path`` up to the first name that is not UTF-8, or ``None`` when it all is."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError as exc:
        end = path.find("/", exc.start)
        return path if end < 0 else path[:end]
    return None


def _alternatives(pattern: str) -> list[list[str]]:
    """The ``/``-separated parts of each alternative of a glob (``{a,b}`` expanded)."""
    import bracex

    try:
        expanded = bracex.expand(pattern)
    except bracex.ExpansionLimitException:
        expanded = ["**"]  # too many to look at: assume it reaches everywhere
    return [alternative.split("/") for alternative in expanded]


def _part_matches(name: str, part: str) -> bool:
    from wcmatch import fnmatch as wcfnmatch

    return bool(wcfnmatch.fnmatch(name, part, flags=wcfnmatch.FORCEUNIX))


def _reaches_into(parts: list[str], folder: list[str]) -> bool:
    """Whether a glob (its parts) could match some file under ``folder``, as ``glob_flags()`` match: ``**`` spans
    folders but not ones whose names start with a dot. Errs on yes."""
    if not folder:
        return bool(parts)
    if not parts:
        return False
    if parts[0] == "**":
        return _reaches_into(parts[1:], folder) or (not folder[0].startswith(".") and _reaches_into(parts, folder[1:]))
    return _part_matches(folder[0], parts[0]) and _reaches_into(parts[1:], folder[1:])


def _matches_whole(parts: list[str], folder: list[str]) -> bool:
    """Whether a glob (its parts) matches the path ``folder`` itself."""
    if not parts:
        return not folder
    if parts[0] == "**":
        return _matches_whole(parts[1:], folder) or (
            bool(folder) and not folder[0].startswith(".") and _matches_whole(parts, folder[1:])
        )
    return bool(folder) and _part_matches(folder[0], parts[0]) and _matches_whole(parts[1:], folder[1:])


def _glob_reaches_into(pattern: str, folder: str) -> bool:
    names = folder.split("/") if folder else []
    return any(_reaches_into(parts, names) for parts in _alternatives(pattern))


def _may_hold_modules(folder: str, config: BranchConfig) -> bool:
    """Whether files under ``folder`` (relative to the root) could be modules of the branch. Errs on yes: a folder
    whose files cannot be listed is harmless only when include cannot reach into it, or an exclude of the form
    ``folder/**`` (or one of its parents) leaves out all of it."""
    names = folder.split("/") if folder else []
    includes = [parts for pattern in config.include for parts in _alternatives(pattern)]
    if not any(_reaches_into(parts, names) for parts in includes):
        return False
    if any(part.startswith(".") for parts in includes for part in parts):
        return True  # include names hidden files, which an exclude's ``**`` does not cover
    for pattern in config.exclude:
        for parts in _alternatives(pattern):
            if parts[-1] != "**":
                continue
            for k in range(len(names) + 1):
                if _matches_whole(parts[:-1], names[:k]) and not any(n.startswith(".") for n in names[k:]):
                    return False
    return True


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
    shown: Callable[[str], str],
) -> dict[str, str]:
    """The modules that files under the root would make but include or exclude leave out, each with the hint a
    require of it gets: the file exists, and the glob to add to include (``**/*.wasm`` for a suffix) or that exclude
    drops it."""
    is_binary = _matcher(config.binary)
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

    def where_(loc: Loc) -> str:
        return where(loc) if where is not None else format_loc(loc)

    base = prefix.rstrip("/") + "/" if prefix else ""

    def shown(path: str) -> str:
        return printable(base + path)  # as posixpath.join(prefix, path) for a relative path, without its cost

    problems: list[str] = []
    warnings: list[str] = []
    includes = [_matcher([g]) for g in config.include]
    hits = [0] * len(includes)
    is_excluded = _matcher(config.exclude)
    is_binary = _matcher(config.binary)

    selected: list[str] = []
    included = 0
    ordered = sorted(paths)
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

    # Folders that could hold modules but cannot be listed; a glob that reaches into one is not said to match nothing.
    blind = [folder for folder in sorted(unlisted or {}) if _may_hold_modules(folder, config)]
    root_shown = f"{prefix}/" if prefix else "./"
    for k, count in enumerate(hits):
        if count == 0 and not any(_glob_reaches_into(config.include[k], folder) for folder in blind):
            problems.append(
                f"{where_(('include', k))}: {config.include[k]!r} matches no file under {root_shown}{origin}; "
                "fix the glob or remove it"
            )
    if included and not selected and not blind:
        problems.append(
            f"{where_(('exclude',))}: excludes every file that include matches ({included}), so the branch would "
            "have no modules; fix include or exclude"
        )
    problems += [f"{label}: {shown(folder)}/ {(unlisted or {})[folder]}" for folder in blind]

    by_name: dict[str, list[str]] = {}
    binary_of: dict[str, bool] = {}
    kinds: dict[str, Kind] = {}
    for path in selected:
        if not path.isascii():
            undecodable = _undecodable_part(path)
            if undecodable is not None:
                # The name cannot travel as the UTF-8 text of JSON, and apply would fail on it: refuse it here.
                what = "file" if undecodable == path else f"folder {shown(undecodable)}/"
                problems.append(
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
            problems.append(f"{label}: {shown(path)} becomes module {name!r}, but {reason}; rename it, or exclude it")
            continue
        by_name.setdefault(name, []).append(path)
        binary_of[path] = binary
        kinds[path] = kind

    if prefetch is not None:
        prefetch([sources[0] for sources in by_name.values() if len(sources) == 1])
    modules: list[Module] = []
    files: dict[str, str] = {}
    kinds_out: dict[str, Kind] = {}
    for name, sources in by_name.items():
        if len(sources) > 1:
            listed = [shown(p) for p in sources]
            both = "both" if len(listed) == 2 else "all"
            problems.append(
                f"{label}: {', '.join(listed[:-1])} and {listed[-1]} {both} become module {name!r}; rename or "
                f"exclude {'one of them' if len(listed) == 2 else 'all but one'}"
            )
            continue
        path = sources[0]
        try:
            data = read(path)
        except UnreadableFile as exc:
            problems.append(f"{label}: {shown(path)} {exc}")
            continue
        if kinds[path] == "other":  # refused after the read, so that why it cannot be read is said first
            problems.append(
                f"{label}: {shown(path)} is not {describe_kinds()}, so the game could not run it; exclude it, "
                "or list it under binary"
            )
            continue
        if binary_of[path]:
            modules.append(Module(name, binary=data))
        else:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                line = data[: exc.start].count(b"\n") + 1
                problems.append(
                    f"{label}: {shown(path)} is not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}, "
                    f"line {line}); save it as UTF-8, or list it under binary if it is not text"
                )
                continue
            if kinds[path] == "source map" and config.source_maps == "wrap":
                try:
                    text = wrap_source_map(text)
                except ValueError as exc:
                    problems.append(
                        f"{label}: {shown(path)} {exc}; fix the build, or set source_maps: omit for this branch"
                    )
                    continue
            modules.append(Module(name, text=text))
        files[name] = shown(path)
        kinds_out[name] = kinds[path]

    if config.requires.check:
        from gitops.core.requires import check_requires, guarded_warnings, summarise

        missing = check_requires(
            (
                (m.name, files[m.name], m.text)
                for m in modules
                if m.text is not None and kinds_out[m.name] == "javascript"
            ),
            [m.name for m in modules],
            ignore=config.requires.ignore,
            separator=config.naming.separator,
            left_out=_left_out(ordered, set(selected), config, includes, shown),
        )
        problems += summarise(missing, label)
        warnings += guarded_warnings(missing, label)

    code = CodeSet.of(modules)
    length = code.server_length()
    if length > MAX_CODE_LENGTH:
        problems.append(
            f"{label}: the code is {length:,} characters as the server counts them (JSON.stringify of the "
            f"modules), over the 5 MB limit of {MAX_CODE_LENGTH:,}; exclude files or minify the code"
        )
    elif (body := code.upload_body_length(config.branch)) > MAX_BODY_BYTES:
        # Under 5 MB of UTF-16 units can still be over 8 MiB of UTF-8 (3 bytes for most non-Latin characters).
        problems.append(
            f"{label}: the upload would be {body:,} bytes of JSON (UTF-8), over the server's request body limit of "
            f"{MAX_BODY_BYTES:,} (8 MiB), though under 5 MB as the server counts characters; exclude files or "
            "minify the code"
        )
    if selected and "main" not in by_name:
        add = f"add {shown('main.js')}" if ".js" in config.naming.strip_suffixes else "add a module named main"
        warnings.append(f"{label}: no module 'main'; the server adds an empty one, so the code will not run; {add}")
    return BranchBuild(code, files, length, problems, warnings, kinds_out)
