"""Which layout a bot's repository has, from a listing of its top level: the pure half of ``gitops init``.

A first manifest should be right without the player reading about globs, so ``gitops init`` proposes what the
player's own tooling already does: the folder its bundler writes, the separator its ``require`` calls use, one branch
per folder of the game client's layout. Deciding is kept pure and apart from reading: :func:`detect_layout` takes a
bounded :class:`RepoSnapshot` (names, ``package.json``, bundler configurations, some JavaScript) and returns a
:class:`Layout` with what was seen and what was assumed, which ``gitops init`` prints and writes into the
manifest's comments. :mod:`gitops.app.adopting` takes the snapshot and writes the manifest; the layouts and the order
they are tried in are :func:`detect_layout`'s docstring.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from gitops.core.buildcheck import watch_flag
from gitops.core.requires import GAME_MODULES, NODE_BUILTINS, resolve, scan_requires
from gitops.core.taskrunners import (
    BUILD_NAMES,
    STRING,
    Pipeline,
    block_after,
    grunt_pipeline,
    gulp_pipeline,
    relative_folder,
    script_running_task,
)

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


def _builds_once(name: str, command: str | None, scripts: Mapping[str, str]) -> bool:
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


def _package(package_json: str | None) -> dict[str, object]:
    if package_json is None:
        return {}
    try:
        data = json.loads(package_json)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _scripts(package: Mapping[str, object]) -> dict[str, str]:
    scripts = package.get("scripts")
    if not isinstance(scripts, dict):
        return {}
    return {k: v for k, v in scripts.items() if isinstance(k, str) and isinstance(v, str) and v.strip()}


def workspaces(snapshot: RepoSnapshot) -> tuple[str, ...]:
    """The npm/yarn workspaces ``package.json`` declares (``["packages/*"]``, or ``{"packages": [...]}``)."""
    declared = _package(snapshot.contents.get("package.json")).get("workspaces")
    if isinstance(declared, dict):
        declared = declared.get("packages")
    if not isinstance(declared, list):
        return ()
    return tuple(w for w in declared if isinstance(w, str))


def _wasm_folder(snapshot: RepoSnapshot) -> str | None:
    """``"."`` when a ``.wasm`` is at the top, else the first output folder holding one, else ``None``."""
    if any(name.endswith(".wasm") for name in snapshot.files):
        return "."
    for folder in OUTPUT_FOLDERS:
        if any(path.endswith(".wasm") for path in snapshot.inside.get(folder, frozenset())):
            return folder
    return None


def _rollup_output(text: str) -> str | None:
    for key, value in re.findall(r"\b(file|dir)\s*:\s*" + STRING, text):
        folder = relative_folder(posixpath.dirname(value) if key == "file" else value)
        if folder is not None and not value.endswith(".ts"):
            return folder or "."
    return None


@dataclass(frozen=True)
class _WebpackOutput:
    root: str
    #: The bundle's file under the root (``main.js``), when the configuration names one without a placeholder.
    file: str | None
    #: How the root was read: "output.path", "output.filename", or "webpack's default".
    how: str


def _webpack_output(text: str) -> _WebpackOutput | None:
    """Where webpack (4 and 5) writes the bundle: ``output.path`` (``path.resolve(__dirname, 'x')``, ``__dirname``,
    ``__dirname + '/x'``, a plain string) joined with ``output.filename``'s folder; without ``output.path``, webpack's
    default ``dist`` (``path.resolve(process.cwd(), 'dist')``, and the build runs in the repository). ``None`` when
    the path is an expression this cannot read."""
    output = block_after(text, "output")
    filename = re.search(r"\bfilename\s*:\s*" + STRING, output or "")
    file: str | None = filename.group(1) if filename else "main.js"  # webpack's default: the entry 'main'
    if file is not None and ("[" in file or relative_folder(file) is None):
        file = None  # '[name].js': one bundle per entry, named at build time
    path_value = re.search(
        r"\bpath\s*:\s*(path\.(?:resolve|join)\([^()]*(?:\(\)[^()]*)*\)|__dirname\s*\+\s*" + STRING + r"|[^,\n}]+)",
        output or "",
    )
    how = "output.path"
    if path_value is None:
        folder: str | None = "dist"
        how = "webpack's default output.path"
    else:
        value = path_value.group(1).strip()
        joined = re.fullmatch(
            r"path\.(?:resolve|join)\(\s*(?:__dirname|process\.cwd\(\))\s*(?:,\s*" + STRING + r"\s*)?\)", value
        )
        added = re.fullmatch(r"__dirname\s*\+\s*['\"`]/([^'\"`\n]+)['\"`]", value)
        plain = re.fullmatch(STRING, value)
        if value == "__dirname":
            folder = "."
        elif joined is not None:
            folder = relative_folder(joined.group(1)) if joined.group(1) else "."
        elif added is not None:
            folder = relative_folder(added.group(1))
        elif plain is not None:
            folder = relative_folder(plain.group(1))
        else:
            folder = None
    if folder is None:
        return None
    if file is not None and "/" in file:
        folder = posixpath.normpath(posixpath.join(folder, posixpath.dirname(file)))
        file = posixpath.basename(file)
        if relative_folder(folder) is None:
            return None
    return _WebpackOutput(folder, file, how)


def _esbuild_output(text: str) -> str | None:
    found = re.search(r"(?:--|\b)(outfile|outdir)\s*[=:]\s*['\"`]?([^\s'\"`,}]+)", text)
    if found is None:
        return None
    value = found.group(2)
    return relative_folder(posixpath.dirname(value) if found.group(1) == "outfile" else value)


def _tsc_out_dir(tsconfig: str | None) -> str | None:
    if tsconfig is None:
        return None
    # tsconfig.json allows comments and trailing commas: read the one key with a pattern rather than as JSON.
    found = re.search(r'"outDir"\s*:\s*"([^"]+)"', tsconfig)
    return relative_folder(found.group(1)) if found else None


@dataclass(frozen=True)
class _Bundler:
    tool: str
    root: str
    source: str  # where the root was read: "rollup.config.js", "the build script", ...
    #: The root is a guess (the configuration's output could not be read).
    guessed: bool = False
    #: The one file the build writes, when the root is a folder that holds much else (webpack into ``.``).
    file: str | None = None
    #: The configuration copies ``.wasm`` files beside the bundle (rollup-plugin-copy, copy-webpack-plugin).
    wasm: bool = False


def _bundler(snapshot: RepoSnapshot, scripts: Mapping[str, str]) -> _Bundler | None:
    """The bundler that writes the deployed code, and the folder it writes (a Node project's: with a
    ``package.json``, which installs the bundler)."""
    if "package.json" not in snapshot.files:
        return None
    for name in sorted(n for n in snapshot.files if n in BUNDLER_CONFIGS):
        tool = BUNDLER_CONFIGS[name]
        text = snapshot.contents.get(name, "")
        wasm = ".wasm" in text
        if tool == "rollup":
            # rollup-plugin-screeps leaves the wrapped source map beside the bundle as main.js.map.js, which
            # '**/*.js' reads as module 'main.js.map', as the plugin uploads it.
            root = _rollup_output(text)
        elif tool == "webpack":
            output = _webpack_output(text)
            if output is None:
                return _Bundler(tool, "dist", name, guessed=True, wasm=wasm)
            where = name if output.how == "output.path" else f"{name}, {output.how}"
            return _Bundler(tool, output.root, where, file=output.file if output.root == "." else None, wasm=wasm)
        else:
            root = _esbuild_output(text)
        return _Bundler(tool, root or "dist", name, guessed=root is None, wasm=wasm)
    for command in scripts.values():
        if re.search(r"\besbuild\b", command):
            root = _esbuild_output(command)
            if root is not None:
                return _Bundler("esbuild", root, "a package script")
    return None


def _runs(command: str, tool: str, scripts: Mapping[str, str], depth: int = 0) -> bool:
    """Whether a script command runs ``tool``, itself or through ``npm run NAME`` (two levels deep)."""
    if re.search(rf"(^|[\s;&|(/]){re.escape(tool)}(\s|$|;|&)", command):
        return True
    if depth >= 2:
        return False
    for other in re.findall(r"(?:npm run|yarn run|yarn|pnpm run|pnpm)\s+([\w:.-]+)", command):
        if other in scripts and _runs(scripts[other], tool, scripts, depth + 1):
            return True
    return False


def _script_running(scripts: Mapping[str, str], tool: str) -> str | None:
    """The package script that runs ``tool`` to build (not to watch or upload), the usual names first."""
    fitting = [
        name
        for name, command in scripts.items()
        if _runs(command, tool, scripts) and _builds_once(name, command, scripts)
    ]
    order = {name: k for k, name in enumerate(BUILD_NAMES)}
    fitting.sort(key=lambda n: (order.get(n, len(order)), len(n), n))
    return fitting[0] if fitting else None


def _npm(script: str) -> str:
    return "npm run build" if script == "build" else f"npm run {script}"


def _modules_under(snapshot: RepoSnapshot, root: str) -> list[str]:
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


def detect_layout(snapshot: RepoSnapshot) -> Layout:
    """The layout of the repository that ``snapshot`` shows.

    The rule is "what the player's own tooling would do". The layouts, in the order they are tried:

    * **wasm**: a ``Cargo.toml`` or a ``*.wasm`` file (at the top or in ``dist``/``target``/``pkg``). Today's
      rustyscreeps starter builds with wasm-pack and rollup through an npm script into ``dist/`` (``main.js`` plus
      the ``.wasm`` renamed to the crate's name, uploaded by its stem): root ``dist``, built by that script in its
      dry-run mode. A repository with cargo-screeps' configuration (``screeps.toml``) and no npm build is built by
      ``cargo screeps build`` into ``target``.
    * **build**: a bundler whose output is the code: a rollup, webpack or esbuild configuration (or an esbuild or
      ``tsc`` command in a package script, with ``tsconfig.json``'s ``outDir``). The root is the folder the
      configuration writes (``output.file``'s folder, ``output.dir``, webpack's ``output.path``, esbuild's
      ``--outfile``/``--outdir``), and the build is the package script that runs that bundler without watching or
      uploading (``build`` is preferred only when it does run it: a ``build`` of ``tsc -p .`` beside a ``compile`` of
      ``rollup -c`` means ``npm run compile``).
    * **build**, through a task runner: a gulpfile or Gruntfile that writes an output folder (``gulp.dest('dist')``, a
      copy task's ``dest``, grunt-screeps uploading a folder the repository does not hold yet): root the folder the
      bot's own upload reads, built by the task that writes it without uploading (:mod:`gitops.core.taskrunners`),
      run by the package script that runs exactly that task or by ``npx gulp|grunt <task>``. Tried before the
      bundlers when the task runner runs the bundler itself (webpack-stream). The text is read, never run; one that
      only uploads the sources as they are (grunt-screeps over ``*.js``) is not a build.
    * **compiled**: a bot in another language: Kotlin/JS (``build.gradle(.kts)``), built by Gradle into
      ``build/distributions``; Python through Transcrypt (``*.py`` and a mention of transcrypt), built into
      ``__target__`` beside the main module. The root is the compiler's output, whether or not it exists yet.
    * **build**, the fallbacks: ``tsc`` with ``tsconfig.json``'s ``outDir``; a ``build`` script beside a ``dist/``.
    * **flat**: ``*.js`` at the top (the tutorial's ``role.harvester.js``): root ``.``, the tools' own files left out.
    * **src**: a ``src/`` folder of JavaScript: root ``src``.
    * **client**: the game client's own folder, one folder per branch each holding a ``main.js`` (``default/main.js``,
      ``sim/main.js``): one manifest branch per folder.
    * **empty**: nothing recognised: the ``src`` layout, for ``gitops pull`` (or you) to fill.

    For the layouts whose files are the modules (flat, src, client), the separator is the one the code's own
    ``require`` calls use: each candidate (``/``, ``.``, ``_``, ``-``) is tried, and the one under which most literal
    requires name a module the branch holds wins (a player whose upload script flattens ``roles/harvester.js`` into
    ``roles_harvester`` gets ``_``). Requires written inside a ``try`` block whose module is missing are optional
    extension points: they are listed for ``requires.ignore``.
    """
    seen: list[str] = []
    package = _package(snapshot.contents.get("package.json"))
    scripts = _scripts(package)
    if "build" in scripts:
        seen.append(f"package.json has a build script: {scripts['build']}")
    configs = sorted(name for name in snapshot.files if name in BUNDLER_CONFIGS)
    if configs:
        seen.append(f"a bundler configuration: {', '.join(configs)}")

    wasm = _wasm_layout(snapshot, scripts, seen)
    if wasm is not None:
        return wasm
    bundled = bool(configs) and "package.json" in snapshot.files
    # A gulpfile or Gruntfile that runs the bundler itself (webpack-stream, grunt-webpack, gulp-rollup) decides where
    # the bundle goes (gulp.dest, the upload's src), not the bundler's own configuration or defaults.
    if _runner_drives_bundler(snapshot):
        pipeline = _pipeline_layout(snapshot, scripts, seen)
        if pipeline is not None:
            return pipeline
    if bundled:
        built = _build_layout(snapshot, scripts, seen)
        if built is not None:
            return built
    pipeline = _pipeline_layout(snapshot, scripts, seen)
    if pipeline is not None:
        return pipeline
    compiled = _compiled_layout(snapshot, scripts, seen)
    if compiled is not None:
        return compiled
    built = None if bundled else _build_layout(snapshot, scripts, seen)
    if built is not None:
        return built

    return (
        _flat_layout(snapshot, seen)
        or _src_layout(snapshot, scripts, seen)
        or _client_layout(snapshot, seen)
        or _empty_layout(seen)
    )


def _runner_drives_bundler(snapshot: RepoSnapshot) -> bool:
    """Whether a gulpfile or Gruntfile runs the bundler as one of its steps."""
    return any(
        re.search(r"webpack-stream|grunt-webpack|gulp-rollup|rollup-stream|gulp-esbuild", snapshot.contents.get(n, ""))
        for n in (*GULPFILES, *GRUNTFILES)
    )


def _flat_layout(snapshot: RepoSnapshot, seen: list[str]) -> Layout | None:
    """``*.js`` at the top, the tools' own files aside: root ``.``."""
    top_js = sorted(
        name
        for name in snapshot.files
        # Tools' configurations (eslint.config.js, eslint.config.shared.js, karma.conf.js) are not the bot.
        if name.endswith(".js") and name not in (*GULPFILES, *GRUNTFILES) and not re.search(r"\.(config|conf)\.", name)
    )
    if not top_js:
        return None
    shown = ", ".join(top_js[:3]) + (", ..." if len(top_js) > 3 else "")
    seen.append(f"{len(top_js)} .js file{'s' if len(top_js) != 1 else ''} at the top: {shown}")
    return _with_requires(
        Layout(kind="flat", root=".", separator=".", include=("**/*.js",), exclude=FLAT_EXCLUDES, seen=tuple(seen)),
        snapshot,
        top_js,
    )


def _src_layout(snapshot: RepoSnapshot, scripts: Mapping[str, str], seen: list[str]) -> Layout | None:
    """A ``src/`` folder of JavaScript (and its ``.wasm``): root ``src``."""
    src_js = _modules_under(snapshot, "src")
    if "src" not in snapshot.folders or not src_js:
        return None
    seen.append(f"a src/ folder ({len(src_js)} .js file{'s' if len(src_js) != 1 else ''})")
    has_wasm = any(p.endswith(".wasm") for p in snapshot.inside.get("src", frozenset()))
    include = ("**/*.js", "**/*.wasm") if has_wasm else ("**/*.js",)
    npm_build = "npm run build" if _builds_once("build", scripts.get("build"), scripts) else None
    return _with_requires(
        Layout(kind="src", root="src", separator="/", include=include, build=npm_build, seen=tuple(seen)),
        snapshot,
        src_js,
    )


def _client_layout(snapshot: RepoSnapshot, seen: list[str]) -> Layout | None:
    """The game client's own folder: one folder per branch, each holding a ``main.js``."""
    client = sorted(
        folder
        for folder in snapshot.folders
        if folder not in NOT_BRANCH_FOLDERS
        and not folder.startswith(".")
        and "main.js" in snapshot.inside.get(folder, frozenset())
    )
    if not client:
        return None
    seen.append(f"the game client's layout: a folder per branch holding main.js ({', '.join(f + '/' for f in client)})")
    paths = sorted({p for f in client for p in snapshot.inside.get(f, frozenset()) if p.endswith(".js")})
    return _with_requires(
        Layout(
            kind="client",
            root=client[0],
            separator=".",
            include=("*.js",),
            seen=tuple(seen),
            branch_roots=tuple(client),
        ),
        snapshot,
        paths,
        prefixes=client,
    )


def _empty_layout(seen: list[str]) -> Layout:
    """Nothing recognised: the ``src`` layout, for ``gitops pull`` (or the player) to fill."""
    seen.append("no code yet: the src/ layout, for 'gitops pull' or you to fill")
    return Layout(kind="empty", root="src", separator="/", include=("**/*.js",), seen=tuple(seen))


def _with_requires(
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


def _wasm_layout(snapshot: RepoSnapshot, scripts: Mapping[str, str], seen: list[str]) -> Layout | None:
    cargo = "Cargo.toml" in snapshot.files
    wasm_folder = _wasm_folder(snapshot)
    if not cargo and wasm_folder is None:
        return None
    if cargo:
        seen.append("Cargo.toml: a Rust bot compiled to WebAssembly")
    if wasm_folder is not None:
        seen.append(f"a .wasm module in {'the top folder' if wasm_folder == '.' else wasm_folder + '/'}")
    assumed: list[str] = []
    build: str | None = None
    root = wasm_folder
    deploy = next(
        (name for name, command in scripts.items() if "deploy" in name and re.search(r"\bnode\b", command)), None
    )
    whole = _builds_once("build", scripts.get("build"), scripts)
    # With the crate here, 'build' (which compiles it, then bundles) before a script that only bundles: the .wasm is
    # not committed, and a fresh checkout has none until the crate is compiled.
    build_script = (
        ("build" if cargo and whole else None) or _script_running(scripts, "rollup") or ("build" if whole else None)
    )
    cargo_screeps = bool({"screeps.toml", "example-screeps.toml"} & snapshot.files)
    if build_script is not None:
        build = _npm(build_script)
        root = root or "dist"
    elif deploy is not None:
        # Today's rustyscreeps starter: one script runs wasm-pack and rollup into dist/, then uploads; its
        # --dryrun stops before the upload (it still reads the server's entry of .screeps.yaml).
        seen.append(f"package.json's {deploy} script builds with wasm-pack and rollup into dist/: {scripts[deploy]}")
        build = f"npm run {deploy} -- --server {{server}} --dryrun"
        root = root if root not in (None, "target") else "dist"
        assumed.append(
            f"the build runs '{deploy}' in its dry-run mode, which reads the server's entry in .screeps.yaml (the "
            "starter's credentials file): name that entry like the manifest's server, or change build"
        )
    elif cargo:
        if cargo_screeps:
            seen.append("screeps.toml: cargo-screeps builds and deploys")
        build = "cargo screeps build"
        root = root or "target"
        if not cargo_screeps:
            assumed.append("no npm build and no screeps.toml: built with cargo-screeps into target/; change build")
    return Layout(
        kind="wasm",
        root=root or ".",
        separator="/",
        # Only the loader and the module at the root's top: a build folder holds much else below it.
        include=("*.js", "*.wasm"),
        # A loader at the top of the repository sits beside the tools' own scripts: leave them out.
        exclude=FLAT_EXCLUDES if (root or ".") == "." else (),
        binary=("*.wasm",),
        build=build,
        # The loaders require the module by its stem: require('screeps_starter_rust'), require('compiled'); a bundle
        # uploaded by rollup-plugin-screeps requires it with the suffix, as that plugin names it.
        strip_suffixes=None if _keeps_wasm_suffix(snapshot) else (".js", ".wasm"),
        seen=tuple(seen),
        assumed=tuple(assumed),
    )


_RAW_MAPS = {
    "esbuild": re.compile(
        r"\bsourcemap\s*:\s*(true|['\"`](external|linked|both)['\"`])|--sourcemap(?!=inline)(\s|=|$)"
    ),
    "webpack": re.compile(r"\bdevtool\s*:\s*['\"`](?![^'\"`]*(inline|eval))[^'\"`]*source-map"),
    "rollup": re.compile(r"\bsourcemap\s*:\s*true"),
    "tsc": re.compile(r'"sourceMap"\s*:\s*true'),
}


#: Upload plugins that name a binary module by its stem (``x_bg.wasm`` -> ``x_bg``), unlike rollup-plugin-screeps,
#: which keeps the suffix: rollup-plugin-screeps-world.
_STEM_UPLOADERS = re.compile(r"rollup-plugin-screeps-world")


def _keeps_wasm_suffix(snapshot: RepoSnapshot) -> bool:
    """Whether the bot's own upload is rollup-plugin-screeps, which names a ``.wasm`` with its suffix (its fork
    rollup-plugin-screeps-world does not)."""
    return any(
        re.search(r"rollup-plugin-screeps(?!-)", snapshot.contents.get(n, ""))
        for n in sorted(snapshot.files)
        if BUNDLER_CONFIGS.get(n) == "rollup"
    )


def _writes_raw_maps(snapshot: RepoSnapshot, scripts: Mapping[str, str], tool: str) -> bool:
    """Whether the build leaves a raw source map (``main.js.map``) beside the code: esbuild's ``sourcemap``,
    webpack's ``devtool: 'source-map'``, tsc's ``sourceMap``, rollup's ``sourcemap`` without rollup-plugin-screeps
    (which writes the map wrapped, as ``main.js.map.js``, itself)."""
    pattern = _RAW_MAPS.get(tool)
    if pattern is None:
        return False
    if tool == "tsc":
        texts = [snapshot.contents.get("tsconfig.json", "")]
    else:
        texts = [snapshot.contents.get(n, "") for n in sorted(snapshot.files) if BUNDLER_CONFIGS.get(n) == tool]
        texts += [c for c in scripts.values() if re.search(rf"\b{tool}\b", c)]
    if tool == "rollup" and any("rollup-plugin-screeps" in t or re.search(r"\bscreeps\s*\(", t) for t in texts):
        return False
    return any(pattern.search(t) for t in texts)


def _build_layout(snapshot: RepoSnapshot, scripts: Mapping[str, str], seen: list[str]) -> Layout | None:
    bundler = _bundler(snapshot, scripts)
    assumed: list[str] = []
    if bundler is None:
        ts_only = any(p.endswith(".ts") for p in snapshot.inside.get("src", frozenset())) and not any(
            p.endswith(".js") for p in snapshot.inside.get("src", frozenset())
        )
        tsc = _script_running(scripts, "tsc")
        if ts_only and (tsc is not None or "tsconfig.json" in snapshot.files):
            out_dir = _tsc_out_dir(snapshot.contents.get("tsconfig.json"))
            bundler = _Bundler("tsc", out_dir or "dist", "tsconfig.json's outDir" if out_dir else "tsc")
            if out_dir is None:
                assumed.append("TypeScript without a bundler or an outDir: the code is compiled into dist/")
        elif scripts.get("build") and "dist" in snapshot.folders:
            bundler = _Bundler("build", "dist", "a dist/ folder (the bundle)")
        else:
            return None
    written = f"{bundler.root}/{bundler.file}" if bundler.file is not None else f"{bundler.root}/"
    seen.append(f"{bundler.tool} writes {posixpath.normpath(written) if bundler.file else written} ({bundler.source})")
    if bundler.guessed:
        assumed.append(f"{bundler.source}'s output folder could not be read: dist/; change root if not")
    script = _script_running(scripts, bundler.tool) if bundler.tool != "build" else "build"
    if script is not None:
        build: str | None = _npm(script)
        if script != "build" and "build" in scripts:
            seen.append(f"the {script!r} script runs {bundler.tool}; 'build' ({scripts['build']}) does not")
    elif _builds_once("build", scripts.get("build"), scripts):
        build = "npm run build"
        assumed.append(f"'npm run build' writes {bundler.root}/; change build if another script does")
    elif bundler.tool in ("rollup", "webpack"):
        build = "npx rollup -c" if bundler.tool == "rollup" else "npx webpack"
        assumed.append(
            f"no package script runs {bundler.tool}: the build is '{build}'; change build if you use another"
        )
    else:
        build = None
        assumed.append(f"no build command found: write the one that makes {bundler.root}/ under build")
    include: tuple[str, ...] = ("**/*.js",)
    if bundler.root == ".":
        # The bundle beside the sources: that file alone, not every script of the repository.
        include = (bundler.file,) if bundler.file is not None else ("*.js",)
    if _writes_raw_maps(snapshot, scripts, bundler.tool):
        # The map beside the bundle deploys too (module 'main.js.map', wrapped): stack traces name the sources.
        include += ("**/*.js.map",)
        seen.append(f"{bundler.tool} writes source maps beside the code: **/*.js.map is included")
    if bundler.wasm or any(p.endswith(".wasm") for p in snapshot.inside.get("src", frozenset())):
        # A prebuilt module the configuration copies beside the bundle: the built output holds it, the code needs it.
        include += ("**/*.wasm",)
        seen.append(f"{bundler.source} copies .wasm files beside the bundle: **/*.wasm is included")
    strip: tuple[str, ...] | None = None
    if "**/*.wasm" in include and _STEM_UPLOADERS.search(snapshot.contents.get(bundler.source, "")):
        # The bot's own uploader names the .wasm by its stem, and the bundle requires it so.
        strip = (".js", ".wasm")
        seen.append(f"{bundler.source}'s upload plugin names a .wasm by its stem: naming.strip_suffixes keeps that")
    return Layout(
        kind="build",
        root=bundler.root,
        separator="/",
        include=include,
        exclude=FLAT_EXCLUDES if bundler.root == "." and bundler.file is None else (),
        build=build,
        strip_suffixes=strip,
        seen=tuple(seen),
        assumed=tuple(assumed),
    )


def _pipeline_layout(snapshot: RepoSnapshot, scripts: Mapping[str, str], seen: list[str]) -> Layout | None:
    """The build layout of a gulp or grunt pipeline that writes the deployed code
    (:func:`gitops.core.taskrunners.gulp_pipeline`, :func:`~gitops.core.taskrunners.grunt_pipeline`)."""
    pipeline: Pipeline | None = None
    for name in sorted(snapshot.files):
        text = snapshot.contents.get(name)
        if text is None:
            continue
        if name in GULPFILES:
            pipeline = gulp_pipeline(name, text)
        elif name in GRUNTFILES:
            pipeline = grunt_pipeline(name, text, snapshot.folders)
        if pipeline is not None:
            break
    if pipeline is None:
        return None
    assumed: list[str] = []
    root = pipeline.output
    if root is None:
        root = "dist"
        seen.append(f"{pipeline.file} writes the code through {pipeline.tool}, to a folder it does not name plainly")
        assumed.append(
            f"the folder {pipeline.file} writes could not be read: root is dist, the most likely; check it, and "
            "change root to the folder the build writes"
        )
    else:
        seen.append(f"{pipeline.file} writes the code to {root}/ ({pipeline.tool}): that folder is what is deployed")
    build = _pipeline_build(pipeline, scripts, root, seen, assumed)
    for missing in _loads_missing_files(snapshot.contents.get(pipeline.file, ""), snapshot):
        assumed.append(
            f"{pipeline.file} loads {missing} whenever it runs, and this folder does not hold it (a credentials file "
            f"Git ignores?): the build fails without it, in CI too; create it there, or move that require into the "
            "upload's task"
        )
    # The files the bot's own upload reads under the root (grunt-screeps' 'dist/*.js': '*.js'), else all scripts.
    glob = pipeline.upload_glob
    include = (glob,) if glob is not None and "/" not in glob and glob.endswith(".js") else ("**/*.js",)
    layout = Layout(
        kind="build",
        root=root,
        separator="/",
        include=include,
        build=build,
        seen=tuple(seen),
        assumed=tuple(assumed),
    )
    src_js = _modules_under(snapshot, "src")
    if not src_js:
        return layout
    # A pipeline copies the files (it does not bundle them): the output's modules are named as the sources' requires
    # name them. The separator is learnt from src/; what is optional there may not be in the output, so no more.
    learnt = _with_requires(replace(layout, root="src"), snapshot, src_js)
    return replace(layout, separator=learnt.separator, seen=learnt.seen, assumed=learnt.assumed)


def _loads_missing_files(text: str, snapshot: RepoSnapshot) -> list[str]:
    """The files of the repository's top that a task runner's file requires at load (outside every function and
    ``try``) and the snapshot does not hold: ``require('./.screeps.json')`` of a git-ignored credentials file."""
    missing = []
    for call in scan_requires(text):
        name = call.name
        if call.guarded or call.nested or not name.startswith("./") or "/" in name[2:]:
            continue
        if not {name[2:], f"{name[2:]}.js", f"{name[2:]}.json"} & (snapshot.files | snapshot.folders):
            missing.append(name)
    return missing


def _pipeline_build(
    pipeline: Pipeline, scripts: Mapping[str, str], root: str, seen: list[str], assumed: list[str]
) -> str:
    """The build of a task runner's pipeline: the package script that runs exactly its task, else ``npx`` running
    it; what was read or guessed joins ``seen`` and ``assumed``."""
    script = script_running_task(scripts, pipeline.tool, pipeline.task)
    build = (
        _npm(script) if script is not None else f"npx {pipeline.tool}" + (f" {pipeline.task}" if pipeline.task else "")
    )
    if pipeline.from_upload_task is not None:
        seen.append(
            f"{pipeline.file}'s {pipeline.from_upload_task!r} task uploads {root}/ after '{pipeline.task}': the build "
            "runs those steps, without the upload"
        )
    elif script is not None:
        return build
    elif pipeline.uploads:
        assumed.append(
            f"{pipeline.file} also uploads ({pipeline.tool}-screeps): the build is '{build}'; make it a task "
            "that only writes the code, or gitops and the old upload both send it"
        )
    elif pipeline.task is None:
        assumed.append(f"the build is '{build}' (the default task); change build if another task writes {root}/")
    elif pipeline.task_guessed:
        assumed.append(
            f"{pipeline.file} registers no task that writes {root}/ without uploading: the build runs its "
            f"plugins' tasks, '{build}'; change build if it needs others"
        )
    return build


_KOTLIN_JS = re.compile(
    r"kotlin\(\s*\"js\"\s*\)|kotlin-js|kotlin2js|org\.jetbrains\.kotlin\.js|\bjs\s*(\(\s*IR\s*\)|\{)"
)


def _compiled_layout(snapshot: RepoSnapshot, scripts: Mapping[str, str], seen: list[str]) -> Layout | None:
    """A bot written in another language that compiles to JavaScript: the root is where the compiler writes, whether
    or not it has run yet, and the build is the compiler (never the sources' folder, which holds no module)."""
    assumed: list[str] = []
    gradle = next((n for n in ("build.gradle.kts", "build.gradle") if n in snapshot.files), None)
    if gradle is not None and _KOTLIN_JS.search(snapshot.contents.get(gradle, "")):
        wrapper = "gradlew" in snapshot.files
        build = "./gradlew build" if wrapper else "gradle build"
        seen.append(f"{gradle}: a Kotlin bot compiled to JavaScript (Kotlin/JS) by Gradle")
        seen.append(f"build it with '{build}'; its output, build/distributions/, is what is deployed")
        assumed.append(
            "Kotlin/JS writes the bundle to build/distributions/ (newer Kotlin: build/dist/js/productionExecutable/); "
            "change root if your build writes elsewhere"
        )
        return Layout(
            kind="compiled",
            root="build/distributions",
            separator="/",
            include=("*.js",),
            build=build,
            seen=tuple(seen),
            assumed=tuple(assumed),
        )
    python = sorted(path for path in snapshot.contents if path.endswith(".py"))
    mentions = [
        name
        for name, text in snapshot.contents.items()
        if name.endswith(".py") or name in ("requirements.txt", "pyproject.toml", "Makefile", "package.json")
        if re.search(r"transcrypt", text, re.IGNORECASE)
    ]
    if not python or not mentions:
        return None
    main = next((p for p in ("main.py", "src/main.py") if p in python), python[0])
    folder = posixpath.dirname(main)
    root = posixpath.join(folder, "__target__") if folder else "__target__"
    seen.append(f"{main}: a Python bot compiled to JavaScript by Transcrypt ({', '.join(sorted(mentions)[:3])})")
    script = _script_running(scripts, "transcrypt")
    if script is not None:
        build = _npm(script)
    else:
        build = f"transcrypt -b -n {main}"
        assumed.append(f"the build is '{build}' (Transcrypt writes {root}/ beside {main}); change build to your own")
    seen.append(f"build it with '{build}'; its output, {root}/, is what is deployed")
    return Layout(
        kind="compiled",
        root=root,
        separator="/",
        include=("**/*.js",),
        build=build,
        seen=tuple(seen),
        assumed=tuple(assumed),
    )
