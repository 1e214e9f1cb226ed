"""A detected layout widened to read back what a server holds (``gitops.core.readback``). Pure, no files."""

from __future__ import annotations

from gitops.core.layoutdetect import detect_layout
from gitops.core.readback import widen_for
from tests.core.snapshots import snap


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
