"""``gitops init`` end to end: real folders and Git repositories, the real CLI; each layout detected and validated."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml

from gitops.cli import run
from tests.factories import make_repo

WASM = b"\x00asm\x01\x00\x00\x00"


def gitops(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


LAYOUTS: dict[str, tuple[Mapping[str, str | bytes], str, str]] = {
    "build": (
        {
            # A build that works without node_modules: the point is that init names it and validate runs it.
            "package.json": json.dumps({"scripts": {"build": "mkdir -p dist && cp src/main.js dist/main.js"}}),
            "rollup.config.js": "export default {};\n",
            "src/main.js": "module.exports.loop = () => {};\n",
            "dist/main.js": "// stale until the build runs\n",
        },
        "dist",
        "/",
    ),
    "flat": (
        {
            "main.js": "module.exports.loop = () => {};\n",
            "role.harvester.js": "module.exports.run = () => {};\n",
            "Gruntfile.js": "module.exports = (grunt) => {};\n",
            "node_modules/grunt/index.js": "// a dependency\n",
            "package.json": json.dumps({"devDependencies": {"grunt-screeps": "1"}}),
        },
        ".",
        ".",
    ),
    "src": (
        {"src/main.js": "module.exports.loop = () => {};\n", "src/role/harvester.js": "module.exports.run = 1;\n"},
        "src",
        "/",
    ),
    "wasm": (
        {
            "Cargo.toml": "[package]\nname = 'bot'\n",
            "package.json": json.dumps({"scripts": {"build": "true"}}),
            "dist/main.js": "module.exports.loop = () => require('bot_bg');\n",
            "dist/bot_bg.wasm": WASM,
        },
        "dist",
        "/",
    ),
}


@pytest.mark.parametrize("kind", sorted(LAYOUTS))
def test_init_detects_each_layout_and_the_manifest_validates(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files, root, separator = LAYOUTS[kind]
    repo = make_repo(tmp_path / "bot", files)
    manifest = repo / "gitops.yaml"
    code, out, err = gitops(capsys, "init", "-m", str(manifest))
    assert code == 0, err
    assert out.startswith(f"Detected layout: {kind} (root {root}, separator {separator!r})\n")
    assert f"Wrote {manifest}: branch 'default' on server 'mmo' (https://screeps.com)" in out
    data = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    [branch] = data["branches"]
    assert (branch["server"], branch["branch"], branch["root"]) == ("mmo", "default", root)
    assert data["servers"]["mmo"] == {"url": "https://screeps.com", "token_env": "SCREEPS_TOKEN"}
    code, out, err = gitops(capsys, "validate", "-m", str(manifest))
    assert code == 0, err
    assert "is valid" in out


def test_the_flat_layout_deploys_the_bot_and_not_the_tools(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files, _, _ = LAYOUTS["flat"]
    repo = make_repo(tmp_path / "bot", files)
    assert gitops(capsys, "init", "-m", str(repo / "gitops.yaml"))[0] == 0
    code, out, err = gitops(capsys, "validate", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    assert "mmo/default: 2 modules" in out  # main and role.harvester; not Gruntfile.js, not node_modules


def test_the_wasm_layout_names_the_binary_by_its_stem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files, _, _ = LAYOUTS["wasm"]
    repo = make_repo(tmp_path / "bot", files)
    code, out, _ = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"))
    assert code == 0
    assert "Build command: npm run build (run by validate, plan and apply)" in out
    code, out, err = gitops(capsys, "validate", "--list", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    assert "2 modules (1 binary)" in out
    assert "bot_bg" in out


def test_a_rust_bot_without_npm_is_built_by_cargo_screeps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path / "bot", {"Cargo.toml": "[package]\nname = 'bot'\n", "src/lib.rs": "\n"})
    code, out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    assert out.startswith("Detected layout: wasm (root target, separator '/')\n")
    data = yaml.safe_load((repo / "gitops.yaml").read_text(encoding="utf-8"))
    assert data["branches"][0]["build"] == "cargo screeps build"
    assert data["branches"][0]["naming"] == {"strip_suffixes": [".js", ".wasm"]}


def test_init_refuses_to_overwrite_a_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path / "bot", {"src/main.js": "x\n", "gitops.yaml": "# mine\n"})
    code, out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"))
    assert code == 4
    assert out == ""
    assert err.startswith(f"Error: {repo / 'gitops.yaml'} already exists; gitops init writes a new manifest and never")
    assert (repo / "gitops.yaml").read_text(encoding="utf-8") == "# mine\n"


def test_init_options_name_the_server_and_its_credentials(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path / "bot", {"src/main.js": "x\n"})
    code, out, err = gitops(
        capsys,
        "init",
        "-m",
        str(repo / "gitops.yaml"),
        "--server",
        "http://127.0.0.1:21025",
        "--branch",
        "main",
        "--username-env",
        "HOME_USER",
        "--password-env",
        "HOME_PASSWORD",
    )
    assert code == 0, err
    data = yaml.safe_load((repo / "gitops.yaml").read_text(encoding="utf-8"))
    assert data["servers"] == {
        "local": {"url": "http://127.0.0.1:21025", "username_env": "HOME_USER", "password_env": "HOME_PASSWORD"}
    }
    assert data["branches"][0]["branch"] == "main"
    assert "export HOME_PASSWORD=..." in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--token-env", "T", "--credentials", "x"], "give one of them"),
        (["--username-env", "U"], "--username-env and --password-env go together"),
        (["--server", "ftp://example.com"], "servers.example.url: scheme 'ftp://' is not supported"),
        (["--token-env", "0123456789abcdef0123456789abcdef"], "servers.mmo.token_env: is not an environment variable"),
    ],
)
def test_bad_options_are_usage_errors_and_write_nothing(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path / "bot", {"src/main.js": "x\n"})
    code, _, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"), *args)
    assert code == 4, err
    assert message in err
    assert not (repo / "gitops.yaml").exists()
    assert [p.name for p in repo.iterdir() if p.name != ".git"] == ["src"]


def test_init_in_a_folder_that_does_not_exist_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = gitops(capsys, "init", "-m", str(tmp_path / "nowhere" / "gitops.yaml"))
    assert code == 4
    assert err.startswith(f"Error: {tmp_path / 'nowhere'} cannot be listed (No such file or directory)")


def test_init_naming_a_credentials_entry_makes_git_ignore_the_credentials_file(tmp_path: Path) -> None:
    import subprocess

    from tests.factories import git

    repo = tmp_path / "bot"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "main.js").write_text("module.exports.loop = () => {};\n", encoding="utf-8")
    assert run(["init", "-m", str(repo / "gitops.yaml"), "--credentials", "main"]) == 0
    assert ".screeps.yaml" in (repo / ".gitignore").read_text(encoding="utf-8").splitlines()
    check = subprocess.run(["git", "check-ignore", "-q", ".screeps.yaml"], cwd=repo, check=False)
    assert check.returncode == 0


def test_each_guess_is_said_once_plainly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files, _, _ = LAYOUTS["build"]  # rollup.config.js, and a build script that does not run rollup: a guess
    repo = make_repo(tmp_path / "bot", files)
    code, out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    guesses = [line for line in out.splitlines() if line.startswith("  - assumed: ")]
    assert "  - assumed: 'npm run build' writes dist/; change build if another script does" in guesses
    assert len(guesses) == len(set(guesses))
    assert "assumed: assumed" not in out
    assert "assumed: assumed" not in (repo / "gitops.yaml").read_text(encoding="utf-8")


def test_webpack_writing_main_js_beside_the_config_deploys_that_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = (
        "const path = require('path');\n"
        "module.exports = { entry: './src/main.js', target: 'node',\n"
        "  output: { path: __dirname, filename: 'main.js', libraryTarget: 'commonjs2' } };\n"
    )
    repo = make_repo(
        tmp_path / "bot",
        {
            # The stand-in for webpack: the build writes ./main.js, as the configuration says webpack would.
            "package.json": json.dumps({"scripts": {"build": "cp src/main.js main.js"}}),
            "webpack.config.js": config,
            "src/main.js": "module.exports.loop = () => {};\n",
            "tools/lint.js": "// not the bot\n",
        },
    )
    code, out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    assert out.startswith("Detected layout: build (root ., separator '/')\n")
    assert "  - webpack writes main.js (webpack.config.js)\n" in out
    branch = yaml.safe_load((repo / "gitops.yaml").read_text(encoding="utf-8"))["branches"][0]
    assert (branch["root"], branch["include"], branch["build"]) == (".", ["main.js"], "npm run build")
    code, out, err = gitops(capsys, "validate", "--list", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    assert "create the folder" not in out + err
    assert "mmo/default: 1 module" in out


def test_a_wasm_copied_beside_the_bundle_is_deployed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(
        tmp_path / "bot",
        {
            # The stand-in for rollup with rollup-plugin-copy: the bundle and the prebuilt module into dist/.
            "package.json": json.dumps(
                {"scripts": {"build": "mkdir -p dist && cp src/main.js dist/ && cp wasm/engine.wasm dist/"}}
            ),
            "rollup.config.js": (
                "import copy from 'rollup-plugin-copy';\n"
                "export default { input: 'src/main.js', output: { file: 'dist/main.js', format: 'cjs' },\n"
                "  plugins: [copy({ targets: [{ src: 'wasm/engine.wasm', dest: 'dist' }] })] };\n"
            ),
            "src/main.js": "const engine = require('engine.wasm');\nmodule.exports.loop = () => engine;\n",
            "wasm/engine.wasm": WASM,
            ".gitignore": "dist/\n",
        },
    )
    code, out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    branch = yaml.safe_load((repo / "gitops.yaml").read_text(encoding="utf-8"))["branches"][0]
    assert (branch["root"], branch["include"], branch["binary"]) == ("dist", ["**/*.js", "**/*.wasm"], ["**/*.wasm"])
    code, out, err = gitops(capsys, "validate", "--list", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    assert "2 modules (1 binary)" in out


GULPFILE = """const gulp = require('gulp');
const footer = require('gulp-footer');
exports.build = () => gulp.src('src/**/*.js').pipe(footer('global.BUILT = Date.now();')).pipe(gulp.dest('dist'));
"""
GRUNTFILE = """module.exports = function (grunt) {
    grunt.loadNpmTasks('grunt-screeps');
    grunt.loadNpmTasks('grunt-contrib-copy');
    grunt.initConfig({
        screeps: { options: { branch: 'default' }, dist: { src: ['dist/*.js'] } },
        copy: { main: { files: [{ expand: true, cwd: 'src/', src: '**', dest: 'dist/', flatten: true }] } },
    });
    grunt.registerTask('compile', ['copy:main']);
    grunt.registerTask('default', ['copy:main', 'screeps']);
};
"""
# The bots' code: main requires a module the build output holds (flattened by the copy).
PIPELINE_SOURCES = {
    "src/main.js": "const harvester = require('harvester');\nmodule.exports.loop = () => harvester.run();\n",
    "src/roles/harvester.js": "module.exports.run = () => global.BUILT;\n",
    ".gitignore": "dist/\nnode_modules/\n",
}


@pytest.mark.parametrize(
    ("files", "build", "include"),
    [
        (
            {"gulpfile.js": GULPFILE, "package.json": json.dumps({"devDependencies": {"gulp": "4"}})},
            "npx gulp build",
            ["**/*.js"],
        ),
        (
            {"Gruntfile.js": GRUNTFILE, "package.json": json.dumps({"scripts": {"dist": "grunt compile"}})},
            "npm run dist",
            ["*.js"],  # what grunt-screeps' src ('dist/*.js') reads under the root
        ),
    ],
    ids=["gulp", "grunt"],
)
def test_a_task_runner_that_transforms_the_code_is_the_build_and_its_output_the_root(
    files: dict[str, str],
    build: str,
    include: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = make_repo(tmp_path / "bot", {**files, **PIPELINE_SOURCES})
    code, out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    assert out.startswith("Detected layout: build (root dist, separator '/')\n")
    assert f"Build command: {build} (run by validate, plan and apply)" in out
    branch = yaml.safe_load((repo / "gitops.yaml").read_text(encoding="utf-8"))["branches"][0]
    assert (branch["root"], branch["build"], branch["include"]) == ("dist", build, include)
    # gulp and grunt are not installed here: the output the tool would write stands in for its run.
    (repo / "dist").mkdir()
    (repo / "dist" / "main.js").write_text(PIPELINE_SOURCES["src/main.js"] + "global.BUILT = 1;\n", encoding="utf-8")
    (repo / "dist" / "harvester.js").write_text(PIPELINE_SOURCES["src/roles/harvester.js"], encoding="utf-8")
    monkeypatch.setenv("GITOPS_SKIP_BUILD", "1")
    code, out, err = gitops(capsys, "validate", "--list", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    assert "mmo/default: 2 modules" in out
    assert "dist/main.js" in out


def test_an_upload_only_gruntfile_keeps_the_classic_layout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    classic = Path(__file__).resolve().parents[2] / "examples" / "classic"
    files = {p.name: p.read_text(encoding="utf-8") for p in classic.iterdir() if p.name != "gitops.yaml"}
    repo = make_repo(tmp_path / "bot", files)
    code, out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    assert out.startswith("Detected layout: flat (root ., separator '.')\n")
    assert "build" not in yaml.safe_load((repo / "gitops.yaml").read_text(encoding="utf-8"))["branches"][0]
    code, out, err = gitops(capsys, "validate", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    assert "mmo/default: 3 modules" in out


@pytest.mark.parametrize(
    ("files", "root", "build", "output"),
    [
        (
            {
                "requirements.txt": "transcrypt==3.9.1\n",
                "src/main.py": "from roles import harvester\n\ndef loop():\n    harvester.run()\n",
                "src/roles/harvester.py": "def run():\n    pass\n",
            },
            "src/__target__",
            "transcrypt -b -n src/main.py",
            {"src/__target__/main.js": "module.exports.loop = function () {};\n"},
        ),
        (
            {
                "build.gradle.kts": 'plugins { kotlin("js") version "1.8.0" }\nkotlin { js(IR) { nodejs() } }\n',
                "settings.gradle.kts": 'rootProject.name = "bot"\n',
                "src/main/kotlin/Main.kt": "fun loop() {}\n",
            },
            "build/distributions",
            "gradle build",
            {"build/distributions/main.js": "module.exports.loop = function () {};\n"},
        ),
    ],
    ids=["transcrypt", "kotlin"],
)
def test_a_bot_in_another_language_is_told_what_to_build_and_where_it_goes(
    files: dict[str, str],
    root: str,
    build: str,
    output: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = make_repo(tmp_path / "bot", {**files, ".gitignore": "__target__/\nbuild/\n"})
    code, out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    assert out.startswith(f"Detected layout: compiled (root {root}, separator '/')\n")
    assert "no code yet" not in out
    assert "gitops pull" not in out  # never into the sources' folder
    assert f"  {build}   # build the bot first: it writes {root}/, which is what is deployed" in out
    branch = yaml.safe_load((repo / "gitops.yaml").read_text(encoding="utf-8"))["branches"][0]
    assert (branch["root"], branch["build"]) == (root, build)
    # The compiler is not installed here: its output stands in for its run.
    for path, text in output.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text, encoding="utf-8")
    monkeypatch.setenv("GITOPS_SKIP_BUILD", "1")
    code, out, err = gitops(capsys, "validate", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    assert "mmo/default: 1 module" in out


def test_a_build_that_does_not_write_the_root_is_not_told_to_create_the_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(
        tmp_path / "bot",
        {
            # The build succeeds and writes ./main.js, not the dist/ the manifest names.
            "package.json": json.dumps({"scripts": {"build": "cp src/main.js main.js"}}),
            "src/main.js": "module.exports.loop = () => {};\n",
            "gitops.yaml": yaml.safe_dump(
                {
                    "version": 1,
                    "servers": {"mmo": {"url": "https://screeps.com", "token_env": "SCREEPS_TOKEN"}},
                    "branches": [{"server": "mmo", "branch": "default", "root": "dist", "build": "npm run build"}],
                }
            ),
        },
    )
    code, _, err = gitops(capsys, "validate", "-m", str(repo / "gitops.yaml"))
    assert code != 0
    assert "create the folder" not in err
    assert "and the build (npm run build) did not write it; set root to the folder the build writes" in err
