"""init's guesses on the shapes the corpus of real bots showed (issue 46, point 2; bench/corpus.py measures the bots).

Each repository here is a minimal shape written for the test, not a bot's code: a Gruntfile whose upload task copies
into dist/ beside a ``test`` script that runs grunt, a gulpfile whose ``copy`` task writes what gulp-screeps uploads
beside a ``ci-config`` script, a ``build`` script that watches, bundlers that leave raw source maps, a monorepo's top.
"""

from __future__ import annotations

import json

import pytest

from gitops.core.layout import RepoSnapshot, workspaces
from gitops.core.layoutdetect import detect_layout
from gitops.core.taskrunners import script_running_task
from tests.core.snapshots import package, snap

# A large grunt bot's shape: sources in src/, the deploy copies them (and a profiler) into dist/ and uploads
# dist/*.js; 'test' runs mocha and a private server; nothing is named build.
GRUNT_DEPLOY = """module.exports = function(grunt) {
  grunt.loadNpmTasks('grunt-screeps');
  grunt.loadNpmTasks('grunt-contrib-copy');
  grunt.loadNpmTasks('grunt-contrib-clean');
  grunt.loadNpmTasks('grunt-mocha-test');
  grunt.loadNpmTasks('grunt-exec');
  grunt.initConfig({
    screeps: {
      main: { options: { branch: 'default' }, files: [{ src: ['dist/*.js'] }] },
      season: { options: { server: 'season' }, files: [{ src: ['dist/*.js'] }] },
    },
    mochaTest: { src: ['test/**/*.js'] },
    clean: ['dist/'],
    copy: {
      main: { files: [{ expand: true, cwd: 'src/', src: ['**'], dest: 'dist/' }] },
      profiler: { files: [{ expand: true, cwd: 'node_modules/profiler/', src: ['profiler.js'], dest: 'dist/' }] },
    },
    exec: { server: 'node utils/server.js' },
  });
  grunt.registerTask('default', ['clean', 'copy:main', 'copy:profiler', 'screeps:main']);
  grunt.registerTask('test', ['mochaTest', 'exec:server']);
  grunt.registerTask('deploy', ['clean', 'copy:main', 'copy:profiler', 'screeps:main']);
};
"""

# A gulp bot's shape: 'copy' flattens src/ into dist/ with '_', 'deploy' runs it and uploads dist/*.js with
# credentials from a git-ignored file; 'ci-config' writes that file (and no dist/).
GULP_DEPLOY = """const gulp = require('gulp');
const screeps = require('gulp-screeps');
const rename = require('gulp-rename');
gulp.task('clean', () => del('dist/*'));
gulp.task('copy', gulp.series('clean', () => {
  return gulp.src('src/**/*.js')
    .pipe(rename((p) => { p.basename = p.dirname.split('/').concat([p.basename]).join('_'); p.dirname = ''; }))
    .pipe(gulp.dest('dist/'));
}));
function deploy() {
  const config = require('./.screeps.json');
  return gulp.src('dist/*.js').pipe(screeps(config.main));
}
gulp.task('deploy', gulp.series('copy', deploy));
gulp.task('ci-config', (done) => { require('fs').writeFileSync('.screeps.json', '{}'); done(); });
gulp.task('default', gulp.series('deploy'));
"""


def task_runner_repo(name: str, text: str, scripts: dict[str, str]) -> RepoSnapshot:
    return snap(
        {"package.json", name},
        {"src", "test"},
        {"src": {"main.js", "role/harvester.js"}},
        {"package.json": package(scripts), name: text},
    )


def test_a_grunt_bot_is_built_by_its_deploys_steps_not_by_a_script_that_runs_other_tasks() -> None:
    scripts = {"test": "eslint . && grunt test", "deploy": "grunt deploy", "lint": "eslint ."}
    layout = detect_layout(task_runner_repo("Gruntfile.js", GRUNT_DEPLOY, scripts))
    assert (layout.kind, layout.root, layout.build) == ("build", "dist", "npx grunt clean copy:main copy:profiler")
    assert layout.include == ("*.js",)  # grunt-screeps reads dist/*.js
    assert (
        "Gruntfile.js's 'default' task uploads dist/ after 'clean copy:main copy:profiler': the build runs those "
        "steps, without the upload" in layout.seen
    )
    # A package script that runs exactly those steps is the build, by its name.
    scripts["dist"] = "grunt clean copy:main copy:profiler"
    assert detect_layout(task_runner_repo("Gruntfile.js", GRUNT_DEPLOY, scripts)).build == "npm run dist"


def test_a_gulp_bot_is_built_by_the_task_that_writes_what_it_uploads() -> None:
    scripts = {"deploy": "gulp", "ci-config": "gulp ci-config", "test": "standard && ava"}
    layout = detect_layout(task_runner_repo("gulpfile.js", GULP_DEPLOY, scripts))
    assert (layout.kind, layout.root, layout.build, layout.include) == ("build", "dist", "npx gulp copy", ("*.js",))
    assert layout.assumed == ()
    scripts["copy"] = "npx gulp copy"
    assert detect_layout(task_runner_repo("gulpfile.js", GULP_DEPLOY, scripts)).build == "npm run copy"


@pytest.mark.parametrize(
    ("scripts", "task", "script"),
    [
        ({"test": "eslint . && grunt test"}, None, None),  # another task is not the default task
        ({"test": "eslint . && grunt test"}, "test", "test"),
        ({"b": "grunt", "build": "grunt --verbose"}, None, "build"),  # flags are not tasks; build-named first
        ({"x": "npx gulp copy", "y": "gulp copy clean"}, "copy", "x"),
        ({"x": "gulp 'unclosed"}, "copy", None),
    ],
)
def test_a_script_runs_a_task_only_when_it_names_exactly_that_task(
    scripts: dict[str, str], task: str | None, script: str | None
) -> None:
    tool = "gulp" if "gulp" in " ".join(scripts.values()) else "grunt"
    assert script_running_task(scripts, tool, task) == script


@pytest.mark.parametrize("build", ["rollup -cw", "rollup -c -w", "rollup --watch", "rollup -c --watch=true"])
def test_init_never_picks_a_build_script_that_watches(build: str) -> None:
    config = "export default { output: { file: 'dist/main.js', format: 'cjs' } };"
    layout = detect_layout(
        snap(
            {"package.json", "rollup.config.js"},
            contents={"package.json": package({"build": build}), "rollup.config.js": config},
        )
    )
    assert (layout.root, layout.build) == ("dist", "npx rollup -c")
    src = detect_layout(
        snap({"package.json"}, {"src"}, {"src": {"main.js"}}, {"package.json": package({"build": build})})
    )
    assert (src.kind, src.build) == ("src", None)


@pytest.mark.parametrize(
    ("config", "text", "maps"),
    [
        ("esbuild.config.mjs", "build({ entryPoints: ['src/main.ts'], outdir: 'dist', sourcemap: true })", True),
        ("esbuild.config.mjs", "build({ entryPoints: ['src/main.ts'], outdir: 'dist', sourcemap: 'inline' })", False),
        ("webpack.config.js", "module.exports = { devtool: 'source-map', output: { filename: 'main.js' } };", True),
        ("webpack.config.js", "module.exports = { devtool: 'inline-source-map' };", False),
        # rollup-plugin-screeps writes the map itself, wrapped, as main.js.map.js ('**/*.js' reads it).
        ("rollup.config.js", "output: { file: 'dist/main.js', sourcemap: true }, plugins: [screeps({})]", False),
        ("rollup.config.js", "output: { file: 'dist/main.js', sourcemap: true }", True),
    ],
)
def test_a_source_map_the_bundler_leaves_beside_the_code_is_included(config: str, text: str, maps: bool) -> None:
    layout = detect_layout(
        snap({"package.json", config}, {"src"}, contents={"package.json": package({"build": "x"}), config: text})
    )
    assert ("**/*.js.map" in layout.include) is maps
    assert layout.include[0] == "**/*.js"


def test_tsc_with_source_maps_includes_them() -> None:
    tsconfig = '{ "compilerOptions": { "outDir": "out", "sourceMap": true } }'
    layout = detect_layout(
        snap(
            {"package.json", "tsconfig.json"},
            {"src"},
            {"src": {"main.ts"}},
            {"package.json": package({"build": "tsc"}), "tsconfig.json": tsconfig},
        )
    )
    assert (layout.root, layout.include) == ("out", ("**/*.js", "**/*.js.map"))


def test_a_monorepos_top_is_not_a_flat_bot_of_its_tools_files() -> None:
    top = snap(
        {"package.json", "eslint.config.shared.js", "karma.conf.js"},
        {"packages", "scripts"},
        {"packages": set()},
        {"package.json": json.dumps({"workspaces": ["packages/*"], "scripts": {"build": "npm run build -ws"}})},
    )
    assert detect_layout(top).kind == "empty"
    assert workspaces(top) == ("packages/*",)
    yarn = snap({"package.json"}, contents={"package.json": json.dumps({"workspaces": {"packages": ["bots/*"]}})})
    assert workspaces(yarn) == ("bots/*",)
    assert workspaces(snap({"package.json"}, contents={"package.json": '{"workspaces": 3}'})) == ()


@pytest.mark.parametrize(
    ("plugin", "strip"), [("rollup-plugin-screeps-world", (".js", ".wasm")), ("rollup-plugin-screeps", None)]
)
def test_a_wasm_beside_the_bundle_is_named_as_the_bots_own_upload_plugin_names_it(
    plugin: str, strip: tuple[str, ...] | None
) -> None:
    config = (
        f"import screeps from '{plugin}';\nimport copy from 'rollup-plugin-copy';\n"
        "export default { input: 'src/main.ts', output: { file: 'dist/main.js', format: 'cjs', sourcemap: true },\n"
        "  plugins: [copy({ targets: [{ src: 'src/pkg/engine_bg.wasm', dest: 'dist' }] }), screeps({})] };\n"
    )
    layout = detect_layout(
        snap(
            {"package.json", "rollup.config.js"},
            {"src"},
            {"src": {"main.ts", "pkg/engine_bg.wasm"}},
            {"package.json": package({"build": "rollup -c"}), "rollup.config.js": config},
        )
    )
    assert layout.include == ("**/*.js", "**/*.wasm")  # the plugin wraps the map itself: no raw *.js.map
    assert layout.strip_suffixes == strip


# gulp running webpack 1 through webpack-stream: the webpack configuration names no output folder (gulp.dest does),
# so 'npx webpack' would write none; gulp-screeps uploads what the gulp task wrote.
GULP_WEBPACK = """const gulp = require('gulp');
const webpack = require('webpack-stream');
const screeps = require('gulp-screeps');
gulp.task('compile', () => gulp.src('src/main.js')
  .pipe(webpack(require('./webpack.config.js'))).pipe(gulp.dest('out')));
gulp.task('screeps', ['compile'], () => gulp.src('out/*.js').pipe(screeps(require('./credentials.js'))));
gulp.task('default', ['screeps']);
"""


def test_a_gulpfile_that_runs_webpack_is_the_build_not_webpacks_defaults() -> None:
    layout = detect_layout(
        snap(
            {"package.json", "gulpfile.js", "webpack.config.js"},
            {"src"},
            {"src": {"main.js", "role/harvester.js"}},
            {
                "package.json": package({"deploy": "gulp"}),
                "gulpfile.js": GULP_WEBPACK,
                "webpack.config.js": "module.exports = { entry: './src/main.js', output: { filename: 'main.js' } };",
            },
        )
    )
    assert (layout.kind, layout.root, layout.build, layout.include) == ("build", "out", "npx gulp compile", ("*.js",))


def test_a_rust_library_with_its_bundle_is_built_whole_and_its_wasm_named_as_its_plugin_names_it() -> None:
    # wasm-pack writes the .wasm (git-ignored), rollup copies it beside the bundle, rollup-plugin-screeps uploads it.
    scripts = {
        "build": "run-s build:lib build:src",
        "build:lib": "wasm-pack build --target web --out-dir src/wasm",
        "build:src": "rollup -c",
        "watch": "rollup -cw",
    }
    config = (
        "const screeps = require('rollup-plugin-screeps');\n"
        "module.exports = { input: 'src/index.ts', output: { file: 'dist/index.js' }, external: ['lib.wasm'],\n"
        "  plugins: [copy({ targets: [{ src: 'src/wasm/lib_bg.wasm', dest: 'dist', rename: 'lib.wasm' }] }),\n"
        "            screeps({})] };\n"
    )
    layout = detect_layout(
        snap(
            {"package.json", "Cargo.toml", "rollup.config.cjs"},
            {"src"},
            {"src": {"index.ts"}},
            {"package.json": package(scripts), "rollup.config.cjs": config},
        )
    )
    assert (layout.kind, layout.root, layout.build, layout.strip_suffixes) == ("wasm", "dist", "npm run build", None)
    # Its fork that names the module by its stem, and a crate whose 'build' watches: the bundling script, stems.
    config = config.replace("rollup-plugin-screeps", "rollup-plugin-screeps-world")
    scripts["build"] = "rollup -cw"
    stems = detect_layout(
        snap(
            {"package.json", "Cargo.toml", "rollup.config.cjs"},
            contents={"package.json": package(scripts), "rollup.config.cjs": config},
        )
    )
    assert (stems.build, stems.strip_suffixes) == ("npm run build:src", (".js", ".wasm"))


def test_a_task_runner_file_loading_a_file_the_checkout_lacks_is_said() -> None:
    top = "const config = require('./.screeps.json');\n"  # a credentials file Git ignores, loaded by every run
    text = top + GRUNT_DEPLOY.replace("branch: 'default'", "branch: config.branch")
    layout = detect_layout(task_runner_repo("Gruntfile.js", text, {}))
    assert layout.build == "npx grunt clean copy:main copy:profiler"
    assert layout.assumed == (
        "Gruntfile.js loads ./.screeps.json whenever it runs, and this folder does not hold it (a credentials file Git "
        "ignores?): the build fails without it, in CI too; create it there, or move that require into the upload's "
        "task",
    )
    # Loaded only inside the upload (gulp's deploy()), or in a try: the build never needs it.
    assert detect_layout(task_runner_repo("gulpfile.js", GULP_DEPLOY, {})).assumed == ()
    held = snap(
        {"package.json", "Gruntfile.js", ".screeps.json"},
        {"src"},
        {"src": {"main.js"}},
        {"package.json": package({}), "Gruntfile.js": text},
    )
    assert detect_layout(held).assumed == ()
