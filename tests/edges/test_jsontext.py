"""``gitops/edges/jsontext.py``: bounded JSON of a server's answer, each refusal worded without the body."""

from __future__ import annotations

import math

import pytest

from gitops.edges.jsontext import MAX_JSON_DEPTH, UnreadableJSON, parse_json


def test_an_answer_is_its_value() -> None:
    assert parse_json(b'{"ok":1,"list":["a","b"]}') == {"ok": 1, "list": ["a", "b"]}


def test_what_orjson_refuses_the_standard_library_still_reads() -> None:
    assert math.isnan(parse_json(b"[NaN]")[0])
    assert parse_json(b'"\\udce9"') == "\udce9"
    assert parse_json(b"18446744073709551616") == 2**64


def test_nesting_at_the_limit_is_read_and_deeper_is_refused() -> None:
    assert parse_json(b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH) is not None
    with pytest.raises(UnreadableJSON, match=f"nested more than {MAX_JSON_DEPTH} levels deep"):
        parse_json(b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1))
    with pytest.raises(UnreadableJSON, match="nested more than"):
        parse_json(b"[" * 100_000 + b"]" * 100_000)  # past the C parser's own recursion limit


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"a": 1', "Expecting ',' delimiter"),
        (b'{"a": "\xff"}', "it is not UTF-8 text"),
        (b"", "Expecting value"),
    ],
)
def test_what_is_not_json_is_refused_with_a_reason_and_not_the_body(body: bytes, reason: str) -> None:
    with pytest.raises(UnreadableJSON) as refused:
        parse_json(body)
    assert str(refused.value) == reason
