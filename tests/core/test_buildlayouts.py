"""The layouts a build tool makes (``gitops.core.buildlayouts``): bundlers, task runners, wasm, compiled languages.
Pure, no files (``gitops init``'s core)."""

from __future__ import annotations

import pytest
import yaml

from gitops.app.scaffold import ServerChoice, manifest_text
from gitops.config.manifest import manifest_from_data
from gitops.core.layout import FLAT_EXCLUDES, Layout
from gitops.core.layoutdetect import detect_layout
from tests.core.snapshots import PACKAGE_WITH_BUILD, package, snap


def test_package_json_with_a_build_script_and_dist_is_the_build_layout() -> None:
    layout = detect_layout(
        snap({"package.json"}, {"dist", "src"}, {"dist": {"main.js"}}, {"package.json": PACKAGE_WITH_BUILD})
    )
    assert (layout.kind, layout.root, layout.separator, layout.build) == ("build", "dist", "/", "npm run build")
    assert layout.include == ("**/*.js",)
    assert "package.json has a build script: rollup -c" in layout.seen


def test_a_rollup_config_without_dist_yet_is_the_build_layout() -> None:
    layout = detect_layout(
        snap({"package.json", "rollup.config.js"}, {"src"}, contents={"package.json": PACKAGE_WITH_BUILD})
    )
    assert (layout.kind, layout.root) == ("build", "dist")


def test_cargo_toml_is_the_wasm_layout_built_by_cargo_screeps() -> None:
    layout = detect_layout(snap({"Cargo.toml"}, {"src"}))
    assert (layout.kind, layout.root, layout.build) == ("wasm", "target", "cargo screeps build")
    assert (layout.include, layout.binary) == (("*.js", "*.wasm"), ("*.wasm",))


def test_a_wasm_in_dist_with_an_npm_build_is_the_wasm_layout_in_dist() -> None:
    layout = detect_layout(
        snap(
            {"Cargo.toml", "package.json"},
            {"dist", "src", "js_src"},
            {"dist": {"main.js", "bot_bg.wasm"}},
            {"package.json": PACKAGE_WITH_BUILD},
        )
    )
    assert (layout.kind, layout.root, layout.build) == ("wasm", "dist", "npm run build")


def test_a_wasm_at_the_top_is_the_wasm_layout_at_the_top() -> None:
    layout = detect_layout(snap({"main.js", "compiled.wasm", "Gruntfile.js"}))
    assert (layout.kind, layout.root, layout.build) == ("wasm", ".", None)
    assert layout.exclude == FLAT_EXCLUDES  # the loader's neighbours (Gruntfile.js) are not modules


# --- what the player's own tooling does (issue 19) ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "text", "root"),
    [
        ("rollup.config.js", "export default { output: { file: './build/main.js', format: 'cjs' } };", "build"),
        ("rollup.config.mjs", "export default { output: { dir: 'out', format: 'cjs' } };", "out"),
        # The game client's folder as an output (a player's own copy step) is not a root: dist is assumed.
        ("rollup.config.js", "export default { output: { file: '/home/me/.config/Screeps/main.js' } };", "dist"),
        ("webpack.config.js", "module.exports = { output: { path: path.resolve(__dirname, 'bundle') } };", "bundle"),
        ("webpack.config.js", "module.exports = { output: { filename: 'main.js' } };", "dist"),
        ("webpack.config.js", "module.exports = { output: { path: __dirname + '/out', filename: 'main.js' } };", "out"),
        ("esbuild.config.mjs", "await build({ entryPoints: ['src/main.ts'], outfile: 'pack/main.js' });", "pack"),
    ],
)
def test_the_root_is_the_folder_the_bundler_configuration_writes(config: str, text: str, root: str) -> None:
    layout = detect_layout(
        snap({"package.json", config}, {"src"}, contents={"package.json": package({"build": "x"}), config: text})
    )
    assert (layout.kind, layout.root) == ("build", root)


@pytest.mark.parametrize(
    ("text", "root", "include", "seen"),
    [
        # webpack 4 and 5 without output.path: path.resolve(process.cwd(), 'dist'), filename main.js.
        (
            "module.exports = { entry: './src/main.js' };",
            "dist",
            ("**/*.js",),
            "webpack writes dist/ (webpack.config.js, webpack's default output.path)",
        ),
        # The player's own: the bundle beside the sources, that file alone.
        (
            "module.exports = { output: { filename: 'main.js', path: __dirname, libraryTarget: 'commonjs2' } };",
            ".",
            ("main.js",),
            "webpack writes main.js (webpack.config.js)",
        ),
        (
            "module.exports = { output: { path: path.resolve(__dirname), filename: 'bot.js' } };",
            ".",
            ("bot.js",),
            "webpack writes bot.js (webpack.config.js)",
        ),
        (
            "module.exports = { output: { path: path.resolve(process.cwd(), 'out') } };",
            "out",
            ("**/*.js",),
            "webpack writes out/ (webpack.config.js)",
        ),
        (
            "module.exports = { output: { path: path.join(__dirname, 'build'), filename: 'bot/main.js' } };",
            "build/bot",
            ("**/*.js",),
            "webpack writes build/bot/ (webpack.config.js)",
        ),
        # A path outside output (resolve's) is not the output's.
        (
            "module.exports = { resolve: { alias: { path: 'x' } }, output: { filename: 'main.js' } };",
            "dist",
            ("**/*.js",),
            "webpack writes dist/ (webpack.config.js, webpack's default output.path)",
        ),
    ],
)
def test_webpacks_real_output_is_the_root(text: str, root: str, include: tuple[str, ...], seen: str) -> None:
    layout = detect_layout(
        snap(
            {"package.json", "webpack.config.js"},
            {"src"},
            {"src": {"main.js"}},
            {"package.json": package({"build": "webpack"}), "webpack.config.js": text},
        )
    )
    assert (layout.kind, layout.root, layout.include, layout.build) == ("build", root, include, "npm run build")
    assert seen in layout.seen
    assert not layout.assumed
    manifest = manifest_from_data(yaml.safe_load(manifest_text(layout, ServerChoice("mmo"), "default")))
    assert (manifest.branches[0].root, tuple(manifest.branches[0].include)) == (root, include)


def test_a_wasm_the_bundler_copies_beside_the_bundle_is_included() -> None:
    config = (
        "import copy from 'rollup-plugin-copy';\n"
        "export default { input: 'src/main.js', output: { file: 'dist/main.js', format: 'cjs' },\n"
        "  plugins: [copy({ targets: [{ src: 'wasm/engine.wasm', dest: 'dist' }] })] };\n"
    )
    layout = detect_layout(
        snap(
            {"package.json", "rollup.config.js"},
            {"src", "wasm"},
            {"src": {"main.js"}, "wasm": {"engine.wasm"}},
            {"package.json": package({"build": "rollup -c"}), "rollup.config.js": config},
        )
    )
    assert (layout.root, layout.include, layout.binary) == ("dist", ("**/*.js", "**/*.wasm"), ("**/*.wasm",))
    assert "rollup.config.js copies .wasm files beside the bundle: **/*.wasm is included" in layout.seen
    plain = detect_layout(
        snap(
            {"package.json", "rollup.config.js"},
            {"src"},
            {"src": {"main.js"}},
            {
                "package.json": package({"build": "rollup -c"}),
                "rollup.config.js": config.replace("engine.wasm", "x.txt"),
            },
        )
    )
    assert plain.include == ("**/*.js",)


def test_the_build_is_the_script_that_runs_the_bundler_not_one_that_watches_or_uploads() -> None:
    scripts = {
        "build": "npm run lint && npm run bundle",
        "bundle": "rollup -c",
        "watch": "rollup -c -w",
        "push-main": "rollup -c --environment DEST:main",
        "lint": "eslint src",
    }
    layout = detect_layout(
        snap(
            {"package.json", "rollup.config.js"},
            contents={"package.json": package(scripts), "rollup.config.js": "output: { file: 'dist/main.js' }"},
        )
    )
    assert layout.build == "npm run build"  # build runs the bundler through npm run bundle


def test_a_bundler_without_a_script_is_run_by_npx_and_said_so() -> None:
    layout = detect_layout(
        snap({"package.json", "webpack.config.js"}, contents={"package.json": package({"test": "jest"})})
    )
    assert (layout.root, layout.build) == ("dist", "npx webpack")
    assert layout.assumed == (
        "no package script runs webpack: the build is 'npx webpack'; change build if you use another",
    )


def test_an_esbuild_command_in_a_script_names_its_output() -> None:
    scripts = {"build": "esbuild src/main.ts --bundle --platform=node --outfile=dist/main.js"}
    layout = detect_layout(snap({"package.json"}, {"src"}, {"src": {"main.ts"}}, {"package.json": package(scripts)}))
    assert (layout.kind, layout.root, layout.build) == ("build", "dist", "npm run build")


def test_typescript_compiled_by_tsc_deploys_its_out_dir() -> None:
    layout = detect_layout(
        snap(
            {"package.json", "tsconfig.json"},
            {"src"},
            {"src": {"main.ts", "roles/harvester.ts"}},
            {
                "package.json": package({"compile": "tsc -p ."}),
                "tsconfig.json": '{"compilerOptions": {"outDir": "lib"}}',
            },
        )
    )
    assert (layout.kind, layout.root, layout.build) == ("build", "lib", "npm run compile")
    unnamed = detect_layout(snap({"package.json", "tsconfig.json"}, {"src"}, {"src": {"main.ts"}}, {}))
    assert (unnamed.root, unnamed.build) == ("dist", None)
    assert unnamed.assumed[0].startswith("TypeScript without a bundler or an outDir")


def test_todays_rust_starter_builds_through_its_deploy_script() -> None:
    layout = detect_layout(
        snap(
            {"Cargo.toml", "package.json"},
            {"src", "js_src", "js_tools"},
            contents={"package.json": package({"deploy": "node js_tools/deploy.js"})},
        )
    )
    assert (layout.kind, layout.root, layout.build) == ("wasm", "dist", "npm run deploy -- --server {server} --dryrun")
    assert layout.strip_suffixes == (".js", ".wasm")
    assert "dry-run mode" in layout.assumed[0]


# --- init follows the bot's own tool (issue 41) ---------------------------------------------------------------

GULP_COPY_AND_APPEND = """const gulp = require('gulp');
const footer = require('gulp-footer');
gulp.task('build', () => gulp.src('src/**/*.js')
  .pipe(gulp.dest('dist'))
  .on('end', () => gulp.src('dist/main.js').pipe(footer('global.VERSION = 1;')).pipe(gulp.dest('dist'))));
"""


GULP_UPLOAD_ONLY = """const gulp = require('gulp');
const screeps = require('gulp-screeps');
gulp.task('default', () => gulp.src('src/*.js').pipe(screeps({ token: process.env.TOKEN, branch: 'default' })));
"""


GRUNT_UPLOAD_ONLY = """module.exports = function (grunt) {
    grunt.loadNpmTasks('grunt-screeps');
    grunt.initConfig({ screeps: { options: { branch: 'default' }, dist: { src: ['*.js', '!Gruntfile.js'] } } });
};
"""


GRUNT_COPY_THEN_UPLOAD = """module.exports = function (grunt) {
    grunt.loadNpmTasks('grunt-screeps');
    grunt.loadNpmTasks('grunt-contrib-clean');
    grunt.loadNpmTasks('grunt-contrib-copy');
    grunt.loadNpmTasks('grunt-file-append');
    grunt.initConfig({
        screeps: { options: { branch: 'default' }, dist: { src: ['dist/*.js'] } },
        clean: { dist: ['dist'] },
        copy: { screeps: { files: [{ expand: true, cwd: 'src/', src: '**', dest: 'dist/', flatten: true }] } },
        file_append: { versioned: { files: [{ append: 'global.BUILT = true;', input: 'dist/main.js' }] } },
    });
    grunt.registerTask('default', ['clean', 'copy:screeps', 'file_append:versioned', 'screeps']);
    grunt.registerTask('build', ['clean', 'copy:screeps', 'file_append:versioned']);
};
"""


def pipeline_repo(name: str, text: str, files: set[str] | None = None, scripts: dict[str, str] | None = None) -> Layout:
    return detect_layout(
        snap(
            {"package.json", name, *(files or set())},
            {"src"},
            {"src": {"main.js", "role.harvester.js"}},
            {"package.json": package(scripts or {}), name: text},
        )
    )


@pytest.mark.parametrize("name", ["gulpfile.js", "gulpfile.babel.js", "gulpfile.ts"])
def test_a_gulp_pipeline_that_writes_dist_is_built_by_gulp_and_dist_deployed(name: str) -> None:
    layout = pipeline_repo(name, GULP_COPY_AND_APPEND)
    assert (layout.kind, layout.root, layout.build, layout.include) == ("build", "dist", "npx gulp build", ("**/*.js",))
    assert f"{name} writes the code to dist/ (gulp): that folder is what is deployed" in layout.seen
    assert layout.assumed == ()
    text = manifest_text(layout, ServerChoice("mmo"), "default")
    assert manifest_from_data(yaml.safe_load(text)).branches[0].build == "npx gulp build"


def test_a_package_script_running_gulp_is_the_build() -> None:
    layout = pipeline_repo("gulpfile.js", GULP_COPY_AND_APPEND, scripts={"compile": "gulp build", "watch": "gulp w"})
    assert (layout.root, layout.build) == ("dist", "npm run compile")


def test_a_gulpfile_whose_output_cannot_be_read_says_so_and_writes_dist_to_check() -> None:
    text = "const gulp = require('gulp');\nconst out = process.env.OUT;\n"
    text += "exports.default = () => gulp.src('src/*.js').pipe(babel()).pipe(gulp.dest(out));\n"
    layout = pipeline_repo("gulpfile.js", text)
    assert (layout.kind, layout.root, layout.build) == ("build", "dist", "npx gulp")
    assert layout.assumed[0] == (
        "the folder gulpfile.js writes could not be read: root is dist, the most likely; check it, and change root to "
        "the folder the build writes"
    )
    assert "# Assumed (check these):" in manifest_text(layout, ServerChoice("mmo"), "default")


@pytest.mark.parametrize(("name", "text"), [("gulpfile.js", GULP_UPLOAD_ONLY), ("Gruntfile.js", GRUNT_UPLOAD_ONLY)])
def test_an_upload_only_task_runner_keeps_the_sources_as_they_are(name: str, text: str) -> None:
    assert pipeline_repo(name, text).kind == "src"
    flat = detect_layout(
        snap({"package.json", name, "main.js", "role.harvester.js"}, contents={name: text, "package.json": "{}"})
    )
    assert (flat.kind, flat.root, flat.build) == ("flat", ".", None)


def test_the_classic_example_uploads_with_grunt_and_stays_flat() -> None:
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "examples" / "classic"
    files = {p.name for p in folder.iterdir() if p.is_file()}
    contents = {n: (folder / n).read_text(encoding="utf-8") for n in ("Gruntfile.js", "package.json")}
    layout = detect_layout(snap(files, contents=contents))
    assert (layout.kind, layout.root, layout.build) == ("flat", ".", None)


def test_a_grunt_pipeline_that_copies_into_dist_is_built_by_its_own_task() -> None:
    layout = pipeline_repo("Gruntfile.js", GRUNT_COPY_THEN_UPLOAD)
    assert (layout.kind, layout.root, layout.build) == ("build", "dist", "npx grunt build")
    assert layout.assumed == ()
    # No build-named task: the one with the uploading task's steps less the upload, by its name.
    same_steps = pipeline_repo(
        "Gruntfile.js", GRUNT_COPY_THEN_UPLOAD.replace("registerTask('build'", "registerTask('x'")
    )
    assert (same_steps.root, same_steps.build, same_steps.assumed) == ("dist", "npx grunt x", ())
    # None: the steps of the task that uploads, before its screeps step, run by name (the bot's own deploy).
    no_task = pipeline_repo("Gruntfile.js", GRUNT_COPY_THEN_UPLOAD.replace("registerTask('build'", "// "))
    assert (no_task.root, no_task.build) == ("dist", "npx grunt clean copy:screeps file_append:versioned")
    assert (
        "Gruntfile.js's 'default' task uploads dist/ after 'clean copy:screeps file_append:versioned': the build runs "
        "those steps, without the upload" in no_task.seen
    )
    # A default task that only uploads, and nothing registered to write: the writing plugins' own tasks, a guess.
    plugins_only = pipeline_repo(
        "Gruntfile.js",
        GRUNT_COPY_THEN_UPLOAD.replace("registerTask('build'", "// ").replace(
            "['clean', 'copy:screeps', 'file_append:versioned', 'screeps']", "['screeps']"
        ),
    )
    assert (plugins_only.root, plugins_only.build) == ("dist", "npx grunt copy file_append")
    assert plugins_only.assumed == (
        "Gruntfile.js registers no task that writes dist/ without uploading: the build runs its plugins' tasks, "
        "'npx grunt copy file_append'; change build if it needs others",
    )


def test_a_kotlin_bot_is_built_by_gradle_into_build_distributions() -> None:
    gradle = 'plugins { kotlin("js") version "1.8.0" }\nkotlin { js(IR) { browser(); binaries.executable() } }\n'
    layout = detect_layout(
        snap(
            {"build.gradle.kts", "gradlew", "settings.gradle.kts"},
            {"src", "gradle"},
            {"src": {"main/kotlin/Main.kt"}},
            {"build.gradle.kts": gradle},
        )
    )
    assert (layout.kind, layout.root, layout.build) == ("compiled", "build/distributions", "./gradlew build")
    assert "build it with './gradlew build'; its output, build/distributions/, is what is deployed" in layout.seen
    manifest = manifest_from_data(yaml.safe_load(manifest_text(layout, ServerChoice("mmo"), "default")))
    assert manifest.branches[0].root == "build/distributions"
    plain_java = detect_layout(snap({"build.gradle"}, {"src"}, contents={"build.gradle": "apply plugin: 'java'\n"}))
    assert plain_java.kind == "empty"


def test_a_transcrypt_bot_is_built_into_its_target_folder_not_pulled_into_its_sources() -> None:
    layout = detect_layout(
        snap(
            {"requirements.txt", "README.md"},
            {"src"},
            {"src": {"main.py", "roles/harvester.py"}},
            {"requirements.txt": "transcrypt==3.9.0\n", "src/main.py": "from roles import harvester\n"},
        )
    )
    assert (layout.kind, layout.root, layout.build) == ("compiled", "src/__target__", "transcrypt -b -n src/main.py")
    assert "build it with 'transcrypt -b -n src/main.py'; its output, src/__target__/, is what is deployed" in (
        layout.seen
    )
    manifest = manifest_from_data(yaml.safe_load(manifest_text(layout, ServerChoice("mmo"), "default")))
    assert manifest.branches[0].root == "src/__target__"
    # Python without Transcrypt is not a bot of this kind.
    other = detect_layout(snap({"setup.py"}, contents={"setup.py": "import setuptools\n"}))
    assert other.kind == "empty"


def test_a_pipeline_that_copies_the_files_keeps_the_separator_their_requires_use() -> None:
    layout = detect_layout(
        snap(
            {"package.json", "gulpfile.js"},
            {"src"},
            {"src": {"main.js", "role/harvester.js"}},
            {"package.json": package({}), "gulpfile.js": GULP_COPY_AND_APPEND},
            {"src/main.js": "const h = require('role.harvester');\nmodule.exports.loop = () => h.run();\n"},
        )
    )
    assert (layout.root, layout.separator) == ("dist", ".")
    assert "1 of 1 literal requires name modules with the separator '.'" in layout.seen
    manifest = manifest_from_data(yaml.safe_load(manifest_text(layout, ServerChoice("mmo"), "default")))
    assert manifest.branches[0].naming.separator == "."


@pytest.mark.parametrize("watching", ["rollup -cw", "rollup -wc", "rollup -c --watch", "npm run dev"])
def test_a_build_script_that_watches_in_any_spelling_is_not_the_build(watching: str) -> None:
    """Issue 46: `npm run build` being `rollup -cw` made validate, plan and apply hang for ever."""
    scripts = {"build": watching, "dev": "rollup -c -w", "compile": "rollup -c"}
    layout = detect_layout(
        snap(
            {"package.json", "rollup.config.js"},
            contents={"package.json": package(scripts), "rollup.config.js": "output: { file: 'dist/main.js' }"},
        )
    )
    assert layout.build == "npm run compile"
