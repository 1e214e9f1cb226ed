"""Layout detection and the new manifest's text: pure, no files (``gitops init``'s core)."""

from __future__ import annotations

import json

import pytest
import yaml

from gitops.config.manifest import manifest_from_data
from gitops.config.scaffold import ServerChoice, manifest_text, server_name_for
from gitops.core.layout import FLAT_EXCLUDES, Layout, RepoSnapshot, detect_layout

PACKAGE_WITH_BUILD = json.dumps({"name": "bot", "scripts": {"build": "rollup -c"}})


def snap(
    files: set[str] | None = None,
    folders: set[str] | None = None,
    inside: dict[str, set[str]] | None = None,
    contents: dict[str, str] | None = None,
) -> RepoSnapshot:
    return RepoSnapshot(
        frozenset(files or ()),
        frozenset(folders or ()),
        {k: frozenset(v) for k, v in (inside or {}).items()},
        contents or {},
    )


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


def test_a_build_script_without_output_or_bundler_is_not_the_build_layout() -> None:
    layout = detect_layout(snap({"package.json"}, {"src"}, {"src": {"main.js"}}, {"package.json": PACKAGE_WITH_BUILD}))
    assert (layout.kind, layout.root, layout.build) == ("src", "src", "npm run build")


def test_flat_js_at_the_top_is_root_dot_with_the_dot_separator_and_tool_excludes() -> None:
    layout = detect_layout(snap({"main.js", "role.harvester.js", "Gruntfile.js", "package.json"}, {"node_modules"}))
    assert (layout.kind, layout.root, layout.separator) == ("flat", ".", ".")
    assert layout.exclude == FLAT_EXCLUDES
    assert layout.seen == ("2 .js files at the top: main.js, role.harvester.js",)


def test_only_tool_scripts_at_the_top_is_not_flat() -> None:
    layout = detect_layout(snap({"Gruntfile.js", "webpack.config.js"}, {"src"}, {"src": {"main.js", "role/a.js"}}))
    assert (layout.kind, layout.root, layout.separator) == ("src", "src", "/")
    assert layout.seen[-1] == "a src/ folder (2 .js files)"


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
    layout = detect_layout(snap({"main.js", "compiled.wasm"}))
    assert (layout.kind, layout.root, layout.build) == ("wasm", ".", None)


def test_nothing_recognised_is_the_empty_src_layout() -> None:
    layout = detect_layout(snap({"README.md"}, {"docs"}, contents={"package.json": "not json"}))
    assert (layout.kind, layout.root, layout.separator) == ("empty", "src", "/")


def test_a_package_json_that_is_not_json_is_no_build() -> None:
    layout = detect_layout(snap({"package.json", "main.js"}, contents={"package.json": "{"}))
    assert (layout.kind, layout.build) == ("flat", None)


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("https://screeps.com", "mmo"),
        ("https://screeps.com/ptr", "ptr"),
        ("https://screeps.com/season/", "season"),
        ("http://127.0.0.1:21025", "local"),
        ("https://server.example.org", "server"),
        ("http://10.0.0.7:21025", "private"),
    ],
)
def test_server_names(url: str, name: str) -> None:
    assert server_name_for(url) == name


LAYOUTS = [
    Layout("build", "dist", "/", ("**/*.js",), build="npm run build", seen=("x",)),
    Layout("flat", ".", ".", ("**/*.js",), exclude=FLAT_EXCLUDES),
    Layout("src", "src", "/", ("**/*.js", "**/*.wasm")),
    Layout(
        "wasm",
        "target",
        "/",
        ("*.js", "*.wasm"),
        binary=("*.wasm",),
        build="cargo screeps build",
        strip_suffixes=(".js", ".wasm"),
    ),
    Layout("empty", "src", "/", ("**/*.js",)),
]


@pytest.mark.parametrize("layout", LAYOUTS, ids=[layout.kind for layout in LAYOUTS])
def test_every_layouts_manifest_text_is_a_valid_manifest_with_its_values(layout: Layout) -> None:
    text = manifest_text(layout, ServerChoice("mmo"), "default")
    manifest = manifest_from_data(yaml.safe_load(text))
    [branch] = manifest.branches
    assert (branch.server, branch.branch, branch.root) == ("mmo", "default", layout.root)
    assert tuple(branch.include) == layout.include
    assert tuple(branch.exclude) == layout.exclude
    assert tuple(branch.binary) == layout.binary
    assert branch.naming.separator == layout.separator
    assert manifest.servers["mmo"].url == "https://screeps.com"
    assert manifest.servers["mmo"].token_env == "SCREEPS_TOKEN"
    assert branch.build == layout.build
    if layout.strip_suffixes is not None:
        assert tuple(branch.naming.strip_suffixes) == layout.strip_suffixes


@pytest.mark.parametrize(
    "server",
    [
        ServerChoice("tournament", token_env=None, credentials="tournament"),
        ServerChoice("home", "http://127.0.0.1:21025", None, username_env="HOME_USER", password_env="HOME_PASS"),
    ],
)
def test_other_credentials_are_named_their_way(server: ServerChoice) -> None:
    manifest = manifest_from_data(yaml.safe_load(manifest_text(LAYOUTS[2], server, "main")))
    config = manifest.servers[server.name]
    assert (config.token_env, config.credentials, config.username_env, config.password_env) == (
        None,
        server.credentials,
        server.username_env,
        server.password_env,
    )


@pytest.mark.parametrize("branch", ["yes", "123", "1:20", "a b #c", "x: y", 'q"uote', "null", "ünïcode"])
def test_branch_names_that_yaml_would_misread_are_quoted(branch: str) -> None:
    manifest = manifest_from_data(yaml.safe_load(manifest_text(LAYOUTS[0], ServerChoice("mmo"), branch)))
    assert manifest.branches[0].branch == branch
