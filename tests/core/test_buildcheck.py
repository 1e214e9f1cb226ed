"""What a build command does, read from its text (:mod:`gitops.core.buildcheck`): watch flags in every spelling,
through the package scripts it runs; whether it installs itself; which install a lockfile asks for."""

from __future__ import annotations

import pytest

from gitops.core.buildcheck import dependencies, install_argv, installs_itself, runs_node, watch_flag

SCRIPTS = {
    "build": "rollup -cw",
    "all": "npm run lint && npm run build",
    "lint": "eslint src",
    "once": "rollup -c",
    "types": "tsc -w -p .",
    "pack": "cross-env NODE_ENV=production webpack --watch",
    "loop": "npm run loop",
}


@pytest.mark.parametrize(
    ("command", "found"),
    [
        ("rollup -cw", "-cw (rollup)"),
        ("rollup -wc", "-wc (rollup)"),
        ("rollup -c -w", "-w (rollup)"),
        ("rollup --config rollup.config.js --watch", "--watch (rollup)"),
        ("webpack --watch", "--watch (webpack)"),
        ("webpack -w --mode production", "-w (webpack)"),
        ("tsc -w", "-w (tsc)"),
        ("tsc --watch=true", "--watch=true (tsc)"),
        ("esbuild src/main.ts --bundle --outfile=dist/main.js --watch", "--watch (esbuild)"),
        ("npx rollup -cw", "-cw (rollup)"),
        ("node_modules/.bin/rollup -c -w", "-w (rollup)"),
        ("NODE_ENV=production rollup -cw", "-cw (rollup)"),
        ("yarn rollup -cw", "-cw (rollup)"),
        ("pnpm exec tsc -w", "-w (tsc)"),
        ("gulp watch", "watch (gulp)"),
        ("grunt watch", "watch (grunt)"),
        ("nodemon build.js", "nodemon (a program that watches)"),
        ("npm run build", "-cw (rollup, in the package script 'build')"),
        ("npm run all", "-cw (rollup, in the package script 'build')"),
        ("yarn build", "-cw (rollup, in the package script 'build')"),
        ("pnpm run types", "-w (tsc, in the package script 'types')"),
        ("npm run pack", "--watch (webpack, in the package script 'pack')"),
        ("npm run watch", "watch (a script named for watching)"),
        (["rollup", "-cw"], "-cw (rollup)"),
        (["npm", "run", "build"], "-cw (rollup, in the package script 'build')"),
    ],
)
def test_a_command_that_watches_is_found(command: str | list[str], found: str) -> None:
    assert watch_flag(command, SCRIPTS) == found


@pytest.mark.parametrize(
    "command",
    [
        "rollup -c",
        "npm run once",
        "npm run lint",
        "npm run loop",  # a script that runs itself: followed a few levels, then left
        "tsc --watch=false",
        "tsc -p tsconfig.json",
        "grep -w main dist/main.js",  # -w of a program that does not watch
        "rollup -c --environment DEST:main",
        "webpack --mode production",
        "node build.mjs",
        "npm ci && npm run once",
        "echo 'unterminated",
    ],
)
def test_a_command_that_builds_once_is_not_taken_for_watching(command: str) -> None:
    assert watch_flag(command, SCRIPTS) is None


@pytest.mark.parametrize(
    ("command", "installs"),
    [
        ("npm ci && npm run build", True),
        ("npm install; npm run build", True),
        ("yarn && yarn build", True),
        ("pnpm install --frozen-lockfile && pnpm build", True),
        (["npm", "ci"], True),
        ("npm run build", False),
        ("yarn build", False),
        ("npx tsc", False),
    ],
)
def test_a_build_that_installs_itself(command: str | list[str], installs: bool) -> None:
    assert installs_itself(command) is installs


def test_each_lockfile_has_its_install() -> None:
    assert install_argv("package-lock.json", yarn_berry=False) == ["npm", "ci", "--no-audit", "--no-fund"]
    assert install_argv("npm-shrinkwrap.json", yarn_berry=False)[:2] == ["npm", "ci"]
    assert install_argv("yarn.lock", yarn_berry=False) == ["yarn", "install", "--frozen-lockfile"]
    assert install_argv("yarn.lock", yarn_berry=True) == ["yarn", "install", "--immutable"]
    assert install_argv("pnpm-lock.yaml", yarn_berry=False) == ["pnpm", "install", "--frozen-lockfile"]
    assert install_argv(None, yarn_berry=False)[:3] == ["npm", "install", "--no-package-lock"]


def test_dependencies_are_what_package_json_names() -> None:
    assert dependencies({"devDependencies": {"rollup": "^4"}, "dependencies": {"lodash": "4"}}) == {"rollup", "lodash"}
    assert dependencies({"name": "bot", "scripts": {"build": "node build.js"}}) == set()
    assert dependencies({"dependencies": {}, "devDependencies": "rollup"}) == set()


@pytest.mark.parametrize(
    ("command", "node"),
    [
        ("npm run build", True),
        ("yarn build", True),
        ("node build.mjs", True),
        ("npx webpack", True),
        ("tsc -p .", True),
        ("grunt", True),
        ("./node_modules/.bin/rollup -c", True),
        ("screeps-bundler --out dist", True),  # a program of the package's own dependencies
        (["rollup", "-c"], True),
        ("cargo build --release && wasm-bindgen target/x.wasm", False),
        ("make dist", False),
        ("python3 tools/build.py", False),
    ],
)
def test_a_build_that_runs_node_tooling(command: str | list[str], node: bool) -> None:
    assert runs_node(command, {"screeps-bundler", "@types/screeps"}) is node
