"""``gitops/config/yamlload.py``: the one YAML reader: plain data with the line of every key, and every file it will
not read (anchors, aliases, deep nesting, bytes that are not UTF-8) refused with ``file:line``."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitops.config.yamlload import MAX_DEPTH, UNFIT, Found, Problems, Unreadable, decode, parse, read_yaml


def test_data_and_the_line_of_each_key() -> None:
    document = parse("version: 1\nservers:\n  local:\n    url: http://x\n", "gitops.yaml", what="a manifest")
    assert document.data == {"version": 1, "servers": {"local": {"url": "http://x"}}}
    assert document.locations[("servers", "local", "url")] == 4
    assert document.problems == []


def test_an_empty_file_is_none() -> None:
    assert parse("# nothing\n", "gitops.yaml", what="a manifest").data is None


def test_anchors_and_aliases_are_refused_where_they_are() -> None:
    with pytest.raises(Unreadable) as refused:
        parse("a: &x 1\nb: *x\n", "gitops.yaml", what="a manifest")
    assert refused.value.problems == [
        "gitops.yaml:1:4: YAML anchors are not supported in gitops.yaml; remove '&x' and write the value out where "
        "it is needed",
        "gitops.yaml:2:4: YAML aliases are not supported in gitops.yaml; write the value out",
    ]


def test_nesting_deeper_than_the_limit_is_refused() -> None:
    with pytest.raises(Unreadable) as refused:
        parse("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "deep.yaml", what="a manifest")
    assert f"nested more than {MAX_DEPTH} levels deep" in refused.value.problems[0]


def test_a_lone_surrogate_escape_is_refused() -> None:
    with pytest.raises(Unreadable, match="is a lone surrogate, not a character"):
        parse('name: "\\udce9"\n', "gitops.yaml", what="a manifest")


def test_bytes_that_are_not_utf8_are_named_by_line_and_offset() -> None:
    assert decode("\ufeffa: 1\n".encode(), "x.yaml") == "a: 1\n"  # the byte-order mark is dropped
    with pytest.raises(Unreadable) as refused:
        decode(b"a: 1\nb: \xe9\n", "x.yaml")
    assert refused.value.problems == ["x.yaml:2: not UTF-8 (byte 0xe9 at offset 8); save the file as UTF-8"]


def test_a_yaml_error_never_quotes_the_line(tmp_path: Path) -> None:
    path = tmp_path / "gitops.yaml"
    path.write_text('token: "s3cret-value\n', encoding="utf-8")
    with pytest.raises(Unreadable) as refused:
        read_yaml(path, "gitops.yaml", what="a manifest")
    [text] = refused.value.problems
    assert text.startswith("gitops.yaml:")
    assert "s3cret-value" not in text


def test_problems_are_sorted_by_line_and_a_covered_key_reports_once() -> None:
    problems = Problems("gitops.yaml", {("a",): 3, ("b",): 1, ("b", "c"): 2})
    problems.add(("a",), "is wrong")
    problems.cover([Found(("b",), "cannot be read")])
    problems.add(("b", "c"), "is wrong too")  # under a covered key: not reported
    problems.add(("a",), "is wrong")  # a repeat
    assert problems.texts() == ["gitops.yaml:1: b: cannot be read", "gitops.yaml:3: a: is wrong"]
    assert problems
    assert not Problems(None, {})
    assert repr(UNFIT) == "<unreadable value>"
