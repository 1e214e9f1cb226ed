"""A player's real repository works the first time (issue 19): adopting round trips, optional requires, and
``gitops init`` on the layouts of the public starters (fixtures written here, modelled on their layouts)."""

from __future__ import annotations

import base64
import http.server
import json
import socket
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops.cli import run
from gitops.standin.testing import StandIn
from tests.app.test_pulling import seed
from tests.factories import make_repo
from tests.project import Project

WASM = b"\x00asm\x01\x00\x00\x00" + bytes(range(64))
THE_MAP = '{"version":3,"sources":["../src/main.ts"],"names":[],"mappings":"AAAA;AACA"}'


def b64(data: bytes) -> dict[str, str]:
    return {"binary": base64.b64encode(data).decode("ascii")}


def gitops(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def manifest_of(repo: Path) -> dict[str, Any]:
    data = yaml.safe_load((repo / "gitops.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


# --- adopting: init --pull, then a verified "No changes" --------------------------------------------------------

#: Every module kind a player's server may hold: text; names with '.', '/' and a flattening '_'; binary modules
#: with and without a suffix; a source map wrapped as rollup-plugin-screeps uploads it (no newline at the end) and
#: one wrapped with a newline, which no wrapping rule reproduces.
EVERY_KIND: dict[str, Any] = {
    "main": "const h = require('role.harvester');\nmodule.exports.loop = () => h.run();\n",
    "role.harvester": "module.exports.run = () => require('utils_path').go();\n",
    "utils_path": "module.exports.go = () => 1;\n",
    "lib/util": "module.exports = 2;\n",
    "addTwo": b64(WASM),
    "pathfinder.wasm": b64(WASM[::-1]),
    "main.js.map": f"module.exports = {THE_MAP};",
    "other.js.map": f"module.exports = {THE_MAP};\n",
}


@pytest.mark.parametrize(
    ("modules", "files"),
    [
        pytest.param(EVERY_KIND, {}, id="every-kind-empty-repo"),
        pytest.param(
            {k: v for k, v in EVERY_KIND.items() if "/" not in k},
            {"README.md": "# my bot\n"},
            id="flat-names-no-folders",
        ),
    ],
)
def test_init_pull_round_trips_every_module_kind_to_a_verified_no_changes(
    modules: dict[str, Any],
    files: dict[str, str],
    tmp_path: Path,
    standin: StandIn,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seed(standin, "adopt", modules)
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write(files)
    result = p.gitops("init", "--server", standin.url, "--branch", "adopt", "--pull")
    assert result.code == 0, result.err
    assert result.err == "", "no module is left out, so nothing to warn about"
    assert "Next: gitops plan --refresh=always   # should say: No changes" in result.out
    branch = manifest_of(p.root)["branches"][0]
    assert "**/*.js.map" in branch["include"]
    assert "addTwo" in branch["binary"]
    # The wrapper that wraps back byte for byte is written as the map; the other verbatim.
    root = p.root / branch["root"]
    assert (root / "main.js.map").read_text(encoding="utf-8") == THE_MAP
    assert (root / "other.js.map").read_text(encoding="utf-8") == EVERY_KIND["other.js.map"]
    assert (root / "addTwo").read_bytes() == WASM
    p.commit("adopted")
    plan = p.plan("--refresh=always")
    assert plan.code == 0, plan.out + plan.err
    assert "No changes: the servers hold what the repository holds" in plan.out
    capsys.readouterr()
    assert run(["validate", "-m", str(p.root / "gitops.yaml")]) == 0


def test_init_pull_says_what_is_left_out_and_never_promises_no_changes(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A module whose name no file can hold (an empty part between '/'): it cannot come back, and init says so.
    seed(standin, "odd", {"main": "module.exports.loop = () => {};\n", "a//b": "x;\n"})
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    result = p.gitops("init", "--server", standin.url, "--branch", "odd", "--pull")
    assert result.code == 1, result.out + result.err
    assert "should say: No changes" not in result.out
    assert "'a//b'" in result.err


# --- optional requires ------------------------------------------------------------------------------------------

GUARDED_BOT = {
    "main.js": (
        "const roles = require('roles');\n"
        "let local = {};\n"
        "try { local = require('config_local'); } catch (e) { /* optional */ }\n"
        "try {\n  require('extensions');\n} catch (e) {}\n"
        "module.exports.loop = () => roles.run(local);\n"
    ),
    "roles.js": "module.exports.run = () => {};\n",
}


def test_a_require_inside_try_is_a_warning_and_init_lists_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path / "bot", GUARDED_BOT)
    code, out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    assert (
        "Requires that may never run (in try blocks, functions or blocks) and that no file holds: "
        "'config_local', 'extensions'" in out
    )
    text = (repo / "gitops.yaml").read_text(encoding="utf-8")
    assert '#   ignore: ["config_local", "extensions"]' in text
    code, out, err = gitops(capsys, "validate", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    assert (
        "warning: mmo/default: main.js:3: require('config_local') inside a try block names a module the branch will "
        "not hold (the code catches the error; list 'config_local' under requires.ignore to silence this)"
    ) in err


def test_an_unguarded_missing_require_is_refused_with_the_nearest_module_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(
        tmp_path / "bot",
        {
            "main.js": "module.exports.loop = () => require('actions/build').run();\n",
            "actions_build.js": "module.exports.run = () => {};\n",
        },
    )
    (repo / "gitops.yaml").write_text(
        "version: 1\nservers: {mmo: {url: 'https://screeps.com', token_env: SCREEPS_TOKEN}}\n"
        "branches: [{server: mmo, branch: default, root: ., naming: {separator: '.'}}]\n",
        encoding="utf-8",
    )
    code, _, err = gitops(capsys, "validate", "-m", str(repo / "gitops.yaml"))
    assert code == 6
    assert (
        "main.js:1: require('actions/build') names a module the branch will not hold; did you mean "
        "require('actions_build')? The branch holds that module"
    ) in err


# --- init on the starters' layouts -------------------------------------------------------------------------------


def test_init_takes_the_script_that_runs_the_bundler_whose_output_is_the_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 'build' only type-checks into tsc-out/; rollup's config writes dist/main.js and runs from 'compile'.
    repo = make_repo(
        tmp_path / "bot",
        {
            "package.json": json.dumps(
                {"scripts": {"build": "tsc -p .", "compile": "rollup -c", "push": "rollup -c --environment DEST:main"}}
            ),
            "rollup.config.js": "export default {\n  input: 'src/main.ts',\n  output: { file: 'dist/main.js', "
            "format: 'cjs', sourcemap: true },\n};\n",
            "tsconfig.json": '{"compilerOptions": {"outDir": "tsc-out"}}',
            "src/main.ts": "export const loop = () => {};\n",
        },
    )
    code, out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    branch = manifest_of(repo)["branches"][0]
    assert (branch["root"], branch["build"]) == ("dist", "npm run compile")
    assert "the 'compile' script runs rollup; 'build' (tsc -p .) does not" in out


def test_init_writes_todays_rust_starter_layout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(
        tmp_path / "bot",
        {
            "Cargo.toml": "[package]\nname = 'screeps-starter-rust'\n",
            "src/lib.rs": "\n",
            "js_src/main.js": "import 'fastestsmallesttextencoderdecoder-encodeinto/EncoderDecoderTogether.min.js';\n",
            "js_tools/deploy.js": "// runs wasm-pack, then rollup into dist/, then uploads\n",
            "package.json": json.dumps(
                {"name": "screeps-starter-rust", "scripts": {"deploy": "node js_tools/deploy.js"}}
            ),
        },
    )
    code, out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    assert out.startswith("Detected layout: wasm (root dist, separator '/')\n")
    branch = manifest_of(repo)["branches"][0]
    assert branch["build"] == "npm run deploy -- --server mmo --dryrun"
    assert (branch["include"], branch["binary"]) == (["*.js", "*.wasm"], ["*.wasm"])
    assert branch["naming"] == {"strip_suffixes": [".js", ".wasm"]}
    assert "assumed: the build runs 'deploy' in its dry-run mode" in out
    assert "# Assumed (check these):" in (repo / "gitops.yaml").read_text(encoding="utf-8")


def test_the_rust_starters_build_names_the_entry_its_example_credentials_file_has_for_the_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(
        tmp_path / "bot",
        {
            "Cargo.toml": "[package]\nname = 'screeps-starter-rust'\n",
            "package.json": json.dumps({"scripts": {"deploy": "node js_tools/deploy.js"}}),
            ".example-screeps.yaml": (
                "servers:\n  main: {host: screeps.com, secure: true, token: your-token}\n"
                "  ptr: {host: screeps.com, secure: true, path: /ptr, token: your-token}\n"
            ),
        },
    )
    code, out, err = gitops(
        capsys, "init", "-m", str(repo / "gitops.yaml"), "--server", "https://screeps.com/ptr", "--token-env", "T"
    )
    assert code == 0, err
    assert manifest_of(repo)["branches"][0]["build"] == "npm run deploy -- --server ptr --dryrun"
    assert "dry-run mode" not in out  # nothing left to assume
    assert "your-token" not in out + (repo / "gitops.yaml").read_text(encoding="utf-8")


def test_an_ignored_credentials_file_with_an_entry_for_the_server_is_what_the_manifest_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "canary-0123456789abcdef"
    repo = make_repo(
        tmp_path / "bot",
        {
            "main.js": "module.exports.loop = () => {};\n",
            ".gitignore": ".screeps.yaml\n",
            ".screeps.yaml": f"servers:\n  home: {{host: screeps.com, secure: true, token: {secret}}}\n",
        },
    )
    code, out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    assert manifest_of(repo)["servers"]["mmo"] == {"url": "https://screeps.com", "credentials": "home"}
    assert ".screeps.yaml has an entry for https://screeps.com: credentials: home" in out
    assert secret not in out + err + (repo / "gitops.yaml").read_text(encoding="utf-8")


def test_a_cargo_screeps_bot_keeps_cargo_screeps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(
        tmp_path / "bot", {"Cargo.toml": "[package]\nname = 'bot'\n", "screeps.toml": "[build]\n", "src/lib.rs": "\n"}
    )
    assert gitops(capsys, "init", "-m", str(repo / "gitops.yaml"))[0] == 0
    branch = manifest_of(repo)["branches"][0]
    assert (branch["root"], branch["build"]) == ("target", "cargo screeps build")


def test_the_game_clients_layout_gets_one_branch_per_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(
        tmp_path / "bot",
        {
            "default/main.js": "module.exports.loop = () => require('role.harvester').run();\n",
            "default/role.harvester.js": "module.exports.run = () => {};\n",
            "sim/main.js": "module.exports.loop = () => {};\n",
            "README.md": "my scripts folder\n",
        },
    )
    code, out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    assert "Wrote" in out
    assert "branches 'default', 'sim'" in out
    branches = manifest_of(repo)["branches"]
    assert [(b["branch"], b["root"]) for b in branches] == [("default", "default"), ("sim", "sim")]
    code, out, err = gitops(capsys, "validate", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    assert "mmo/default: 2 modules" in out
    assert "mmo/sim: 1 module" in out


@pytest.mark.parametrize(
    ("require", "separator"),
    [("roles/harvester", "/"), ("roles.harvester", "."), ("roles_harvester", "_")],
)
def test_init_takes_the_separator_the_codes_requires_use(
    require: str, separator: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(
        tmp_path / "bot",
        {
            "src/main.js": f"const h = require('{require}');\nmodule.exports.loop = () => h.run();\n",
            "src/roles/harvester.js": "module.exports.run = () => {};\n",
        },
    )
    code, out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    assert f"separator {separator!r}" in out.splitlines()[0]
    code, out, err = gitops(capsys, "validate", "--list", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err  # the require check passes: the module has the name the code requires
    assert require in out


def test_a_typescript_project_without_a_bundler_config_builds_into_its_out_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(
        tmp_path / "bot",
        {
            "package.json": json.dumps({"scripts": {"build": "tsc"}}),
            "tsconfig.json": (
                "{\n  // comments are allowed here\n"
                '  "compilerOptions": {"outDir": "./out", "module": "commonjs"},\n}\n'
            ),
            "src/main.ts": "export const loop = () => {};\n",
            # The project's own compiler, as npm installs it (a stand-in that writes what tsc would).
            "node_modules/.bin/tsc": (
                "#!/bin/sh\nmkdir -p out && echo 'module.exports.loop = () => {};' > out/main.js\n"
            ),
        },
    )
    tsc = repo / "node_modules/.bin/tsc"
    tsc.chmod(tsc.stat().st_mode | stat.S_IXUSR)
    code, _, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    branch = manifest_of(repo)["branches"][0]
    assert (branch["root"], branch["build"]) == ("out", "npm run build")
    code, _out, err = gitops(capsys, "validate", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err


def test_a_build_whose_packages_are_missing_installs_them_and_says_why_it_cannot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No node_modules: the lockfile's install runs first (docs/manifest.md, "Fresh checkouts install their
    packages"); a lockfile npm cannot install from stops there, and the hint says what to fix."""
    repo = make_repo(
        tmp_path / "bot",
        {
            "package.json": json.dumps({"scripts": {"build": "rollup -c"}, "devDependencies": {"rollup": "4"}}),
            "package-lock.json": "{}",
            "rollup.config.js": "export default { output: { file: 'dist/main.js' } };\n",
            "src/main.js": "module.exports.loop = () => {};\n",
        },
    )
    assert gitops(capsys, "init", "-m", str(repo / "gitops.yaml"))[0] == 0
    code, _, err = gitops(capsys, "validate", "-m", str(repo / "gitops.yaml"))
    assert code == 6
    assert "install: npm ci --no-audit --no-fund\n" in err
    assert "the install command 'npm ci --no-audit --no-fund' failed with exit code" in err
    assert f"The packages could not be installed (npm ci --no-audit --no-fund, in {repo})" in err
    assert "build: npm run build" not in err  # the build does not run without its packages


# --- init and a private server's credentials -----------------------------------------------------------------------


class _VersionHandler(http.server.BaseHTTPRequestHandler):
    """Answers /api/version as @screeps/backend does (no token settings on a private server)."""

    def do_GET(self) -> None:
        body = json.dumps({"ok": 1, "protocol": 14, "packageVersion": "4.3.0", "serverData": {}}).encode()
        self.send_response(200 if self.path == "/api/version" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def private_like() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _VersionHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_init_for_a_private_server_names_a_user_and_a_password(
    private_like: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path / "bot", {"main.js": "module.exports.loop = () => {};\n"})
    code, out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"), "--server", private_like)
    assert code == 0, err
    server = manifest_of(repo)["servers"]["local"]
    assert server == {"url": private_like, "username_env": "SCREEPS_USERNAME", "password_env": "SCREEPS_PASSWORD"}
    assert "the server answers /api/version as a private server (server package 4.3.0)" in out
    assert "export SCREEPS_USERNAME=..." in out
    assert "export SCREEPS_PASSWORD=..." in out


def test_init_for_an_unreachable_private_server_says_what_it_assumed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    repo = make_repo(tmp_path / "bot", {"main.js": "module.exports.loop = () => {};\n"})
    code, out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"), "--server", url)
    assert code == 0, err
    assert manifest_of(repo)["servers"]["local"]["password_env"] == "SCREEPS_PASSWORD"
    assert f"assumed: {url} could not be reached, and it is not screeps.com" in out
    assert "for a token, run init again with --token-env NAME" in (repo / "gitops.yaml").read_text(encoding="utf-8")


def test_the_stand_in_keeps_its_token(standin: StandIn, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path / "bot", {"main.js": "module.exports.loop = () => {};\n"})
    code, _out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"), "--server", standin.url)
    assert code == 0, err
    assert manifest_of(repo)["servers"]["local"] == {"url": standin.url, "token_env": "SCREEPS_TOKEN"}


# --- a new user is led to init -------------------------------------------------------------------------------------


def test_a_missing_manifest_leads_to_init_and_help_names_no_repository_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = gitops(capsys, "plan", "-m", str(tmp_path / "gitops.yaml"))
    assert code == 5
    assert "gitops init" in err
    code, out, _ = gitops(capsys, "help")
    assert code == 0
    assert "layouts" in out
    assert "adopting" in out
    for command in ("init", "plan", "apply", "pull", "validate", "drift"):
        code, out, _ = gitops(capsys, command, "--help")
        assert code == 0
        assert "docs/" not in out, command
        assert "README" not in out, command


def test_every_help_topic_has_its_page() -> None:
    from gitops.cli.help import TOPICS, installed_links, topic_text

    for topic, (page, _) in TOPICS.items():
        text = topic_text(topic)
        assert text, topic
        if page:
            docs = (Path(__file__).resolve().parents[2] / "docs" / page).read_text(encoding="utf-8")
            assert text == installed_links(docs)
