"""What a bot's repository looks like to ``gitops init``: the values, and the reading every layout shares.

A first manifest should be right without the player reading about globs, so ``gitops init`` proposes what the
player's own tooling already does: the folder its bundler writes, the separator its ``require`` calls use, one branch
per folder of the game client's layout. Deciding is kept pure and apart from reading: a bounded
:class:`RepoSnapshot` (names, ``package.json``, bundler configurations, some JavaScript) goes in, a :class:`Layout`
with what was seen and what was assumed comes out, which ``gitops init`` prints and writes into the manifest's
comments. This module holds those two values, the files the detection reads, and what every layout reads the same
way (``package.json``'s scripts and workspaces, the separator the code's requires use); which layout a repository
has is :func:`gitops.core.layoutdetect.detect_layout` (the order the layouts are tried in is its docstring), the
layouts a build tool makes are :mod:`gitops.core.buildlayouts`. :mod:`gitops.app.adopting` takes the snapshot and
writes the manifest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from gitops.core.buildcheck import watch_flag
from gitops.core.requires import GAME_MODULES, NODE_BUILTINS, resolve, scan_requires

LayoutKind = Literal["wasm", "build", "compiled", "flat", "src", "client", "empty"]

#: Folders where a build leaves its output (the first one found holding a ``.wasm`` is the wasm layout's root).
OUTPUT_FOLDERS = ("dist", "target", "pkg")
#: Bundler configurations, by the bundler that reads them.
BUNDLER_CONFIGS: dict[str, str] = {
    "rollup.config.js": "rollup",
    "rollup.config.mjs": "rollup",
    "rollup.config.cjs": "rollup",
    "rollup.config.ts": "rollup",
    "webpack.config.js": "webpack",
    "webpack.config.mjs": "webpack",
    "webpack.config.cjs": "webpack",
    "webpack.config.ts": "webpack",
    "esbuild.config.js": "esbuild",
    "esbuild.config.mjs": "esbuild",
    "esbuild.config.cjs": "esbuild",
}
#: Task runners' files: gulp and grunt pipelines, read (never run) to tell one that writes an output folder from one
#: that uploads the sources as they are.
GULPFILES = ("gulpfile.js", "gulpfile.babel.js", "gulpfile.ts", "gulpfile.mjs", "gulpfile.cjs")
GRUNTFILES = ("Gruntfile.js", "Gruntfile.coffee", "gruntfile.js")
#: Build files of bots written in another language that compiles to JavaScript (Kotlin/JS, Python through
#: Transcrypt).
OTHER_LANGUAGE_FILES = ("build.gradle", "build.gradle.kts", "requirements.txt", "pyproject.toml", "Makefile")
#: Files whose text the detection reads (besides the bundler configurations). ``*.py`` files at the top and in
#: ``src/`` are read too (their text is in ``contents`` by path), to tell a Transcrypt bot.
READ_FILES = ("package.json", "tsconfig.json", *BUNDLER_CONFIGS, *GULPFILES, *GRUNTFILES, *OTHER_LANGUAGE_FILES)
#: What a flat layout leaves out: dependencies, the tools' own scripts and configurations, tests.
FLAT_EXCLUDES = (
    "node_modules/**",
    "Gruntfile.js",
    "gulpfile.js",
    "gulpfile.babel.js",
    "*.config.js",
    "test/**",
    "tests/**",
    "dist/**",
)
#: Top-level folders that are never a branch of the game client's layout.
NOT_BRANCH_FOLDERS = frozenset(
    {"src", "dist", "target", "pkg", "lib", "test", "tests", "docs", "scripts", "node_modules", "build", "tools"}
)
#: The separators tried against the code's requires, the layout's default first.
SEPARATORS = ("/", ".", "_", "-")
#: A script named for watching, or one that uploads (its name or its command); a command that watches is found by
#: :func:`watch_flag`, which reads combined short flags (``rollup -cw``) and the scripts a script runs.
_UPLOADS = re.compile(r"(^|[\s:_-])watch($|[\s:_-])|DEST|--environment|deploy|upload|push", re.IGNORECASE)


def builds_once(name: str, command: str | None, scripts: Mapping[str, str]) -> bool:
    """Whether the package script ``name`` (``command``) exists and builds: it neither uploads nor watches (a build
    that watches never ends), in any spelling of the watch flag (``rollup -cw``, ``--watch=true``, a script it runs)."""
    return command is not None and not _UPLOADS.search(f"{name} {command}") and watch_flag(command, scripts) is None


@dataclass(frozen=True)
class RepoSnapshot:
    """What :func:`detect_layout` looks at: top-level ``files`` and ``folders`` (names), the file names under a few
    folders (``inside["src"]``: paths relative to that folder, ``/`` separators; every top-level folder is listed,
    some only one level deep), the text of a few files (``contents["package.json"]``, the bundler
    configurations, ``tsconfig.json``) and of some JavaScript files (``sources``, by path from the top)."""

    files: frozenset[str] = frozenset()
    folders: frozenset[str] = frozenset()
    inside: Mapping[str, frozenset[str]] = field(default_factory=dict)
    contents: Mapping[str, str] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Layout:
    """The manifest's view of a repository: one branch's root, naming and globs, and how the code is built."""

    kind: LayoutKind
    root: str
    separator: str
    include: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    binary: tuple[str, ...] = ("**/*.wasm",)
    #: The build command; ``{server}`` in it stands for the manifest's server name.
    build: str | None = None
    #: ``naming.strip_suffixes`` when not the default ``[".js"]``: the wasm layout names its binary by its stem.
    strip_suffixes: tuple[str, ...] | None = None
    #: ``source_maps`` when not the default ``wrap``.
    source_maps: str | None = None
    #: What was seen, one line each ("package.json has a build script: rollup -c"), for the person.
    seen: tuple[str, ...] = ()
    #: What was guessed and how to change it, one line each: printed, and written into the manifest's comments.
    assumed: tuple[str, ...] = ()
    #: The game client's layout: one branch per folder (the folder's name is the branch, the folder its root).
    branch_roots: tuple[str, ...] = ()
    #: Modules that the code requires where it may never run (a try block, a function, a block) and that the branch
    #: does not hold: init offers them for requires.ignore.
    optional_requires: tuple[str, ...] = ()


def package_data(package_json: str | None) -> dict[str, object]:
    if package_json is None:
        return {}
    try:
        data = json.loads(package_json)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def package_scripts(package: Mapping[str, object]) -> dict[str, str]:
    scripts = package.get("scripts")
    if not isinstance(scripts, dict):
        return {}
    return {k: v for k, v in scripts.items() if isinstance(k, str) and isinstance(v, str) and v.strip()}


def workspaces(snapshot: RepoSnapshot) -> tuple[str, ...]:
    """The npm/yarn workspaces ``package.json`` declares (``["packages/*"]``, or ``{"packages": [...]}``)."""
    declared = package_data(snapshot.contents.get("package.json")).get("workspaces")
    if isinstance(declared, dict):
        declared = declared.get("packages")
    if not isinstance(declared, list):
        return ()
    return tuple(w for w in declared if isinstance(w, str))


def modules_under(snapshot: RepoSnapshot, root: str) -> list[str]:
    """The JavaScript files under ``root`` that the snapshot lists (paths relative to the root)."""
    if root == ".":
        return sorted(n for n in snapshot.files if n.endswith(".js"))
    return sorted(p for p in snapshot.inside.get(root, frozenset()) if p.endswith(".js"))


def _module_names(paths: list[str], separator: str) -> set[str]:
    return {p[: -len(".js")].replace("/", separator) for p in paths}


def choose_separator(
    paths: list[str], sources: Mapping[str, str], *, default: str
) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """The separator under which most literal requires in ``sources`` (texts of the files ``paths``, relative to
    the root) name a module the branch holds, ``default`` on a tie; with what was seen, and the modules that guarded
    requires name and no file holds (optional requires)."""
    calls = [(path, call) for path, text in sources.items() for call in scan_requires(text)]
    wanted = [
        (call, resolve(call.name))
        for _, call in calls
        if resolve(call.name) not in GAME_MODULES and resolve(call.name) not in NODE_BUILTINS
    ]
    if not wanted:
        return default, (), ()
    names = {sep: _module_names(paths, sep) for sep in SEPARATORS}  # once per separator, not once per require
    scores = {sep: sum(1 for _, name in wanted if name in names[sep]) for sep in SEPARATORS}
    best = max(SEPARATORS, key=lambda sep: (scores[sep], sep == default))
    if scores[best] == scores[default]:
        best = default
    held = names[best]
    # Every unmatched require that may never run (in a try block, a function, a block): what init names for
    # requires.ignore. One at load that matches nothing is the validate's refusal to show, not an option.
    optional = tuple(sorted({name for call, name in wanted if (call.guarded or call.nested) and name not in held}))
    seen = (f"{scores[best]} of {len(wanted)} literal requires name modules with the separator {best!r}",)
    return best, seen, optional


def with_requires(
    layout: Layout, snapshot: RepoSnapshot, paths: list[str], prefixes: list[str] | None = None
) -> Layout:
    """``layout`` with the separator the code's requires use, and the optional requires they name."""
    roots = prefixes if prefixes is not None else [layout.root]
    sources = {
        path[len(root) + 1 :] if root != "." else path: text
        for path, text in snapshot.sources.items()
        for root in roots
        if root == "." or path.startswith(root + "/")
    }
    separator, seen, optional = choose_separator(paths, sources, default=layout.separator)
    assumed = list(layout.assumed)
    if separator != layout.separator:
        assumed.append(
            f"the separator is {separator!r} because the code's requires use it; with folders, "
            f"role/harvester.js is module 'role{separator}harvester'"
        )
    return replace(
        layout, separator=separator, seen=layout.seen + seen, optional_requires=optional, assumed=tuple(assumed)
    )
