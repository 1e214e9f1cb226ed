"""What every layout reads the same way (``gitops.core.layout``): ``package.json``, and the separator the code's
requires use. Pure, no files (``gitops init``'s core)."""

from __future__ import annotations

import pytest

from gitops.core.layoutdetect import detect_layout
from tests.core.snapshots import snap


def test_a_package_json_that_is_not_json_is_no_build() -> None:
    layout = detect_layout(snap({"package.json", "main.js"}, contents={"package.json": "{"}))
    assert (layout.kind, layout.build) == ("flat", None)


@pytest.mark.parametrize(("written", "separator"), [("lib/path", "/"), ("lib.path", "."), ("lib-path", "-")])
def test_the_separator_is_the_one_the_requires_use(written: str, separator: str) -> None:
    sources = {"src/main.js": f"require('{written}'); require('lodash'); require('fs');"}
    layout = detect_layout(snap(set(), {"src"}, {"src": {"main.js", "lib/path.js"}}, sources=sources))
    assert layout.separator == separator
    assert layout.seen[-1] == f"1 of 1 literal requires name modules with the separator {separator!r}"


def test_a_tie_keeps_the_layouts_own_separator_and_guarded_missing_requires_are_optional() -> None:
    sources = {"main.js": "try { require('config_local') } catch (e) {}\nrequire('nowhere');"}
    layout = detect_layout(snap({"main.js"}, sources=sources))
    assert (layout.kind, layout.separator) == ("flat", ".")
    assert layout.optional_requires == ("config_local",)
