"""Which layout a bot's repository has, from a listing of its top level: the pure half of ``gitops init``.

:func:`detect_layout` takes a bounded :class:`~gitops.core.layout.RepoSnapshot` and returns the
:class:`~gitops.core.layout.Layout` the player's own tooling implies: it tries the layouts a build tool makes
(:mod:`gitops.core.buildlayouts`) in its order, then the layouts whose files are the modules themselves (flat, src,
the game client's folders), which live here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from gitops.core.buildlayouts import build_layout, compiled_layout, pipeline_layout, runner_drives_bundler, wasm_layout
from gitops.core.layout import (
    BUNDLER_CONFIGS,
    FLAT_EXCLUDES,
    GRUNTFILES,
    GULPFILES,
    NOT_BRANCH_FOLDERS,
    Layout,
    RepoSnapshot,
    builds_once,
    modules_under,
    package_data,
    package_scripts,
    with_requires,
)


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
    package = package_data(snapshot.contents.get("package.json"))
    scripts = package_scripts(package)
    if "build" in scripts:
        seen.append(f"package.json has a build script: {scripts['build']}")
    configs = sorted(name for name in snapshot.files if name in BUNDLER_CONFIGS)
    if configs:
        seen.append(f"a bundler configuration: {', '.join(configs)}")

    wasm = wasm_layout(snapshot, scripts, seen)
    if wasm is not None:
        return wasm
    bundled = bool(configs) and "package.json" in snapshot.files
    # A gulpfile or Gruntfile that runs the bundler itself (webpack-stream, grunt-webpack, gulp-rollup) decides where
    # the bundle goes (gulp.dest, the upload's src), not the bundler's own configuration or defaults.
    if runner_drives_bundler(snapshot):
        pipeline = pipeline_layout(snapshot, scripts, seen)
        if pipeline is not None:
            return pipeline
    if bundled:
        built = build_layout(snapshot, scripts, seen)
        if built is not None:
            return built
    pipeline = pipeline_layout(snapshot, scripts, seen)
    if pipeline is not None:
        return pipeline
    compiled = compiled_layout(snapshot, scripts, seen)
    if compiled is not None:
        return compiled
    built = None if bundled else build_layout(snapshot, scripts, seen)
    if built is not None:
        return built

    return (
        _flat_layout(snapshot, seen)
        or _src_layout(snapshot, scripts, seen)
        or _client_layout(snapshot, seen)
        or _empty_layout(seen)
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
    return with_requires(
        Layout(kind="flat", root=".", separator=".", include=("**/*.js",), exclude=FLAT_EXCLUDES, seen=tuple(seen)),
        snapshot,
        top_js,
    )


def _src_layout(snapshot: RepoSnapshot, scripts: Mapping[str, str], seen: list[str]) -> Layout | None:
    """A ``src/`` folder of JavaScript (and its ``.wasm``): root ``src``."""
    src_js = modules_under(snapshot, "src")
    if "src" not in snapshot.folders or not src_js:
        return None
    seen.append(f"a src/ folder ({len(src_js)} .js file{'s' if len(src_js) != 1 else ''})")
    has_wasm = any(p.endswith(".wasm") for p in snapshot.inside.get("src", frozenset()))
    include = ("**/*.js", "**/*.wasm") if has_wasm else ("**/*.js",)
    npm_build = "npm run build" if builds_once("build", scripts.get("build"), scripts) else None
    return with_requires(
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
    return with_requires(
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
