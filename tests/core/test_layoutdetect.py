"""Which layout a repository has (``gitops.core.layoutdetect``): the order the layouts are tried in, and the layouts
whose files are the modules (flat, src, the game client's folders, empty). Pure, no files."""

from __future__ import annotations

from gitops.core.layout import FLAT_EXCLUDES
from gitops.core.layoutdetect import detect_layout
from tests.core.snapshots import PACKAGE_WITH_BUILD, snap


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


def test_nothing_recognised_is_the_empty_src_layout() -> None:
    layout = detect_layout(snap({"README.md"}, {"docs"}, contents={"package.json": "not json"}))
    assert (layout.kind, layout.root, layout.separator) == ("empty", "src", "/")


def test_the_game_clients_layout_is_a_branch_per_folder() -> None:
    layout = detect_layout(
        snap(
            {"README.md"},
            {"default", "sim", "docs"},
            {"default": {"main.js", "role.a.js"}, "sim": {"main.js"}, "docs": {"main.js"}},
        )
    )
    assert (layout.kind, layout.branch_roots, layout.separator) == ("client", ("default", "sim"), ".")
