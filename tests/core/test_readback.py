"""``gitops/core/readback.py``: a detected layout widened so that ``init --pull`` reads back what the server holds."""

from __future__ import annotations

from gitops.core.layout import Layout
from gitops.core.layoutdetect import detect_layout
from gitops.core.readback import widen_for
from tests.core.snapshots import snap


def _flat() -> Layout:
    return Layout(kind="flat", root="src", separator=".", include=("**/*.js",))


def test_nothing_to_read_back_changes_nothing() -> None:
    assert widen_for(_flat(), [("main", False, "x"), ("role.harvester", False, "y")]) == _flat()


def test_a_binary_without_a_suffix_is_included_as_its_exact_file_escaped() -> None:
    wider = widen_for(_flat(), [("add[two]", True, None)])
    assert wider.include == ("**/*.js", "add\\[two\\]")
    assert wider.binary == ("**/*.wasm", "add\\[two\\]")
    assert wider.seen == ("binary module 'add[two]' on the server: add\\[two\\] is included as binary",)


def test_a_wrapped_map_is_included_and_keeps_the_default_wrapping() -> None:
    wider = widen_for(_flat(), [("main.js.map", False, 'module.exports = {"version":3};')])
    assert wider.include == ("**/*.js", "**/*.js.map")
    assert wider.source_maps is None
    assert wider.separator == "."  # no name holds a '/'


def test_each_change_is_said_once() -> None:
    wider = widen_for(_flat(), [("a.bin", True, None), ("b.bin", True, None), ("x/y", False, "")])
    assert wider.include == ("**/*.js", "**/*.bin")
    assert wider.separator == "/"
    assert wider.seen == (
        "the server's module names hold '/': the separator is '/'",
        "binary module 'a.bin' on the server: **/*.bin is included as binary",
        "binary module 'b.bin' on the server: **/*.bin is included as binary",
    )


def test_a_layout_that_chose_raw_maps_keeps_its_choice() -> None:
    raw = Layout(kind="flat", root="src", separator="/", include=("**/*.js",), source_maps="omit")
    assert widen_for(raw, [("main.js.map", False, '{"version":3}')]).source_maps == "omit"


def test_widen_for_reads_back_maps_binaries_and_names_with_a_slash() -> None:
    base = detect_layout(snap({"main.js"}))
    wider = widen_for(
        base,
        [
            ("lib/util", False, "x"),
            ("addTwo", True, None),
            ("data.bin", True, None),
            ("main.js.map", False, '{"version":3}'),
        ],
    )
    assert wider.separator == "/"
    assert wider.include == ("**/*.js", "addTwo", "**/*.bin", "**/*.js.map")
    assert wider.binary == ("**/*.wasm", "addTwo", "**/*.bin")
    assert wider.source_maps == "raw"
    assert widen_for(wider, []) == wider
