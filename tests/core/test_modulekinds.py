"""``gitops/core/modulekinds.py``: which kind of module a file makes, and the source map's wrapper both ways."""

from __future__ import annotations

import pytest

from gitops.core.modulekinds import describe_kinds, kind_of, unwrap_source_map, wrap_source_map


@pytest.mark.parametrize(
    ("path", "binary", "suffixes", "kind"),
    [
        ("main.js", False, (), "javascript"),
        ("lib/x.cjs", False, (), "javascript"),
        ("lib/x.mjs", False, (), "javascript"),
        ("main.js.map", False, (), "source map"),
        ("main.js", True, (), "binary"),  # the binary globs win over the name
        ("pkg/bot_bg.wasm", True, (), "binary"),
        ("config.json", False, (), "other"),
        ("main.ts", False, (), "other"),
        ("main.ts", False, (".ts",), "javascript"),  # a suffix naming modules is JavaScript
    ],
)
def test_the_kind_of_a_file(path: str, binary: bool, suffixes: tuple[str, ...], kind: str) -> None:
    assert kind_of(path, binary=binary, module_suffixes=suffixes) == kind


def test_a_map_is_wrapped_as_rollup_plugin_screeps_uploads_it() -> None:
    assert wrap_source_map('{"version":3}\n') == 'module.exports = {"version":3};'
    wrapped = 'module.exports = {"version": 3};'
    assert wrap_source_map(wrapped) == wrapped  # already wrapped: taken as it is
    assert unwrap_source_map(wrapped) == '{"version": 3}'


def test_what_is_not_a_map_is_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match=r"is not valid JSON \(Expecting value at line 1, column 1\)"):
        wrap_source_map("not json")
    with pytest.raises(ValueError, match="is not a JSON object"):
        wrap_source_map("[1, 2]")


@pytest.mark.parametrize(
    "text", ["module.exports = [1];", "module.exports = {oops};", 'exports = {"a": 1};', '{"version": 3}']
)
def test_unwrap_returns_none_for_anything_but_the_wrapper_around_an_object(text: str) -> None:
    assert unwrap_source_map(text) is None


def test_the_kinds_are_described_for_messages() -> None:
    text = describe_kinds()
    assert ".js, .cjs, .mjs" in text
    assert "(.js.map)" in text
    assert "binary globs" in text
