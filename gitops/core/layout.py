"""Which layout a bot's repository has, from a listing of its top level: the pure half of ``gitops init``.

:func:`detect_layout` reads a :class:`RepoSnapshot` (the names at the top of the repository, the names inside a few
folders, the text of ``package.json``) and returns a :class:`Layout`: the root, separator and globs a manifest
needs, the build command when there is one, and what was seen (printed by ``gitops init``). No I/O happens here;
:mod:`gitops.app.adopt` takes the snapshot and writes the manifest.

The layouts, in the order they are tried:

* **wasm**: a ``Cargo.toml`` or a ``*.wasm`` file (at the top or in ``dist``/``target``/``pkg``): a ``main.js``
  loader plus the ``.wasm`` module, in the folder that holds the ``.wasm`` (``dist`` after an npm build,
  ``target`` for cargo-screeps), the binary named by its stem (``compiled.wasm`` is ``require('compiled')``);
* **build**: a ``package.json`` with a ``build`` script and a ``dist/`` folder or a rollup/webpack config: the
  bundler's output, ``dist``;
* **flat**: ``*.js`` at the top (the tutorial's ``role.harvester.js``): root ``.``, separator ``.``, the tools'
  own files left out;
* **src**: a ``src/`` folder: root ``src``, separator ``/``;
* **empty**: nothing recognised: the ``src`` layout, for ``gitops pull`` (or you) to fill.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

LayoutKind = Literal["wasm", "build", "flat", "src", "empty"]

#: Folders where a build leaves its output (the first one found holding a ``.wasm`` is the wasm layout's root).
OUTPUT_FOLDERS = ("dist", "target", "pkg")
#: Bundler configurations that mean "the deployed code is built into dist/".
BUNDLER_CONFIGS = (
    "rollup.config.js",
    "rollup.config.mjs",
    "rollup.config.ts",
    "webpack.config.js",
    "webpack.config.mjs",
    "webpack.config.ts",
)
#: What a flat layout leaves out: dependencies, the tools' own scripts and configurations, tests.
FLAT_EXCLUDES = (
    "node_modules/**",
    "Gruntfile.js",
    "gulpfile.js",
    "*.config.js",
    "test/**",
    "tests/**",
    "dist/**",
)


@dataclass(frozen=True)
class RepoSnapshot:
    """What :func:`detect_layout` looks at: top-level ``files`` and ``folders`` (names), the file names under a few
    folders (``inside["src"]``: paths relative to that folder, ``/`` separators), and the text of a few files
    (``contents["package.json"]``)."""

    files: frozenset[str] = frozenset()
    folders: frozenset[str] = frozenset()
    inside: Mapping[str, frozenset[str]] = field(default_factory=dict)
    contents: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Layout:
    """The manifest's view of a repository: one branch's root, naming and globs, and how the code is built."""

    kind: LayoutKind
    root: str
    separator: Literal["/", "."]
    include: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    binary: tuple[str, ...] = ("**/*.wasm",)
    build: str | None = None
    #: ``naming.strip_suffixes`` when not the default ``[".js"]``: the wasm layout names its binary by its stem.
    strip_suffixes: tuple[str, ...] | None = None
    #: What was seen, one line each ("package.json has a build script: rollup -c"), for the person.
    seen: tuple[str, ...] = ()


def _build_script(package_json: str | None) -> str | None:
    """The ``scripts.build`` of a ``package.json`` text, or ``None`` (also for a file that is not JSON)."""
    if package_json is None:
        return None
    try:
        data = json.loads(package_json)
    except ValueError:
        return None
    scripts = data.get("scripts") if isinstance(data, dict) else None
    build = scripts.get("build") if isinstance(scripts, dict) else None
    return build if isinstance(build, str) and build.strip() else None


def _wasm_folder(snapshot: RepoSnapshot) -> str | None:
    """``"."`` when a ``.wasm`` is at the top, else the first output folder holding one, else ``None``."""
    if any(name.endswith(".wasm") for name in snapshot.files):
        return "."
    for folder in OUTPUT_FOLDERS:
        if any(path.endswith(".wasm") for path in snapshot.inside.get(folder, frozenset())):
            return folder
    return None


def detect_layout(snapshot: RepoSnapshot) -> Layout:
    """The layout of the repository that ``snapshot`` shows (see the module's docstring for the rules)."""
    seen: list[str] = []
    build_script = _build_script(snapshot.contents.get("package.json"))
    npm_build = "npm run build" if build_script is not None else None
    if build_script is not None:
        seen.append(f"package.json has a build script: {build_script}")
    bundler = sorted(name for name in snapshot.files if name in BUNDLER_CONFIGS)
    if bundler:
        seen.append(f"a bundler configuration: {', '.join(bundler)}")

    cargo = "Cargo.toml" in snapshot.files
    wasm_folder = _wasm_folder(snapshot)
    if cargo or wasm_folder is not None:
        if cargo:
            seen.append("Cargo.toml: a Rust bot compiled to WebAssembly")
        if wasm_folder is not None:
            seen.append(f"a .wasm module in {'the top folder' if wasm_folder == '.' else wasm_folder + '/'}")
        root = wasm_folder or ("dist" if npm_build is not None else "target")
        build = npm_build or ("cargo screeps build" if cargo else None)
        return Layout(
            kind="wasm",
            root=root,
            separator="/",
            # Only the loader and the module at the root's top: a build folder holds much else below it.
            include=("*.js", "*.wasm"),
            binary=("*.wasm",),
            build=build,
            # cargo-screeps and the wasm-pack loaders require the module by its stem: require('compiled').
            strip_suffixes=(".js", ".wasm"),
            seen=tuple(seen),
        )

    if build_script is not None and ("dist" in snapshot.folders or bundler):
        if "dist" in snapshot.folders:
            seen.append("a dist/ folder (the bundle)")
        return Layout(kind="build", root="dist", separator="/", include=("**/*.js",), build=npm_build, seen=tuple(seen))

    top_js = sorted(
        name
        for name in snapshot.files
        if name.endswith(".js") and name not in ("Gruntfile.js", "gulpfile.js") and not name.endswith(".config.js")
    )
    if top_js:
        shown = ", ".join(top_js[:3]) + (", ..." if len(top_js) > 3 else "")
        seen.append(f"{len(top_js)} .js file{'s' if len(top_js) != 1 else ''} at the top: {shown}")
        return Layout(
            kind="flat", root=".", separator=".", include=("**/*.js",), exclude=FLAT_EXCLUDES, seen=tuple(seen)
        )

    if "src" in snapshot.folders:
        count = sum(1 for p in snapshot.inside.get("src", frozenset()) if p.endswith(".js"))
        seen.append(f"a src/ folder ({count} .js file{'s' if count != 1 else ''})")
        has_wasm = any(p.endswith(".wasm") for p in snapshot.inside.get("src", frozenset()))
        include = ("**/*.js", "**/*.wasm") if has_wasm else ("**/*.js",)
        return Layout(kind="src", root="src", separator="/", include=include, build=npm_build, seen=tuple(seen))

    seen.append("no code yet: the src/ layout, for 'gitops pull' or you to fill")
    return Layout(kind="empty", root="src", separator="/", include=("**/*.js",), seen=tuple(seen))
