"""The source-map reader (``gitops.core.sourcemap``): Base64 VLQ and a map the TypeScript compiler wrote."""

from __future__ import annotations

import json

import pytest

from gitops.core.modulekinds import wrap_source_map
from gitops.core.sourcemap import SourceMap, SourceMapError, decode_vlq, map_name
from tests.core.test_rehearsal import TSC_MAP


def test_vlq_segments_decode_to_their_numbers() -> None:
    assert decode_vlq("AAAA") == [0, 0, 0, 0]
    assert decode_vlq("AACA") == [0, 0, 1, 0]
    assert decode_vlq("D") == [-1]
    assert decode_vlq("gB") == [16]  # a continuation digit
    assert decode_vlq("2HwBqC") == [123, 24, 37]
    assert decode_vlq("hB") == [-16]
    with pytest.raises(SourceMapError, match="cut off"):
        decode_vlq("g")
    with pytest.raises(SourceMapError, match="not a Base64 digit"):
        decode_vlq("A!")


def test_a_tsc_map_gives_the_source_line_of_each_bundle_line() -> None:
    source_map = SourceMap.parse(TSC_MAP)
    assert source_map.sources == ("src/main.ts",)  # ../../src/main.ts beside dist/src/main.js
    assert source_map.lookup(8, 15) == ("src/main.ts", 9)  # throw new Error(...)
    assert source_map.lookup(8) == ("src/main.ts", 9)
    assert source_map.lookup(4, 1) == ("src/main.ts", 5)  # function loop()
    assert source_map.lookup(1) is None  # "use strict": nothing mapped
    assert source_map.lookup(999) is None
    assert source_map.lookup(0) is None


def test_a_wrapped_map_module_reads_as_the_map_and_columns_pick_the_segment_before() -> None:
    data = {"version": 3, "sources": ["a.ts", "webpack:///./b.ts"], "sourceRoot": "", "mappings": "AAAA,IACCA;ACAA"}
    source_map = SourceMap.parse(wrap_source_map(json.dumps(data)))
    assert source_map.sources == ("a.ts", "b.ts")
    assert source_map.lookup(1, 1) == ("a.ts", 1)  # column 0: the first segment
    assert source_map.lookup(1, 4) == ("a.ts", 1)  # before column 4 (0-based) begins the second
    assert source_map.lookup(1, 5) == ("a.ts", 2)
    assert source_map.lookup(2, 1) == ("b.ts", 2)
    rooted = SourceMap.parse(json.dumps({**data, "sourceRoot": "src/"}))
    assert rooted.sources == ("src/a.ts", "src/b.ts")
    assert map_name("main") == "main.js.map"


def test_what_is_not_a_map_is_one_error() -> None:
    with pytest.raises(SourceMapError, match="not JSON"):
        SourceMap.parse("module.exports = nope")
    with pytest.raises(SourceMapError, match="no mappings"):
        SourceMap.parse('{"version": 3}')
