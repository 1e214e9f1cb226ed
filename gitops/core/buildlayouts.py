"""The layouts a build tool makes, read from the repository's configuration (never run): the half of ``gitops
init``'s detection that knows each tool family.

A bundler (rollup, webpack, esbuild, ``tsc``) writes the deployed code into a folder its configuration names; a task
runner's pipeline (gulp, grunt: :mod:`gitops.core.taskrunners`) writes the folder the bot's own upload reads; a Rust
bot compiles to WebAssembly; a Kotlin or Python bot compiles to JavaScript. Each function here returns that layout
(root, globs, build command, what was seen and assumed) or ``None`` when its family is not there;
:func:`gitops.core.layoutdetect.detect_layout` decides the order they are tried in.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from gitops.core.layout import (
    BUNDLER_CONFIGS,
    FLAT_EXCLUDES,
    GRUNTFILES,
    GULPFILES,
    OUTPUT_FOLDERS,
    Layout,
    RepoSnapshot,
    builds_once,
    modules_under,
    with_requires,
)
from gitops.core.requires import scan_requires
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
        if _runs(command, tool, scripts) and builds_once(name, command, scripts)
    ]
    order = {name: k for k, name in enumerate(BUILD_NAMES)}
    fitting.sort(key=lambda n: (order.get(n, len(order)), len(n), n))
    return fitting[0] if fitting else None


def _npm(script: str) -> str:
    return "npm run build" if script == "build" else f"npm run {script}"


def runner_drives_bundler(snapshot: RepoSnapshot) -> bool:
    """Whether a gulpfile or Gruntfile runs the bundler as one of its steps."""
    return any(
        re.search(r"webpack-stream|grunt-webpack|gulp-rollup|rollup-stream|gulp-esbuild", snapshot.contents.get(n, ""))
        for n in (*GULPFILES, *GRUNTFILES)
    )


def wasm_layout(snapshot: RepoSnapshot, scripts: Mapping[str, str], seen: list[str]) -> Layout | None:
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
    whole = builds_once("build", scripts.get("build"), scripts)
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


def build_layout(snapshot: RepoSnapshot, scripts: Mapping[str, str], seen: list[str]) -> Layout | None:
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
    elif builds_once("build", scripts.get("build"), scripts):
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


def pipeline_layout(snapshot: RepoSnapshot, scripts: Mapping[str, str], seen: list[str]) -> Layout | None:
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
    src_js = modules_under(snapshot, "src")
    if not src_js:
        return layout
    # A pipeline copies the files (it does not bundle them): the output's modules are named as the sources' requires
    # name them. The separator is learnt from src/; what is optional there may not be in the output, so no more.
    learnt = with_requires(replace(layout, root="src"), snapshot, src_js)
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


def compiled_layout(snapshot: RepoSnapshot, scripts: Mapping[str, str], seen: list[str]) -> Layout | None:
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
