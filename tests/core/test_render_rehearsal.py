"""The rehearsal's renderers: the terminal's lines and the plan comment's one table (base vs pull request)."""

from __future__ import annotations

from markdown_it import MarkdownIt

from gitops.core.health import Thresholds, Tick
from gitops.core.rehearsal import Change, Comparison, compare, side
from gitops.render.rehearsal import change_line, markdown, text

BOOM = "Error: boom\n    at module.exports.loop (main:1:149)\n    at __mainLoop:1:52\n"


def _comparison() -> Comparison:
    base = side("base", [Tick(log=("x",))] * 4, [1.0, 1.0, 1.0, 2.0], 10, Thresholds(ticks=4), ["main"])
    head = side("head", [Tick(log=("x",), errors=(BOOM,))] * 4, [3.0] * 4, 12, Thresholds(ticks=4), ["main"])
    return compare("local/main", head, base)


def test_the_markdown_is_one_table_of_errors_and_cpu_base_against_the_pull_request() -> None:
    comparison = _comparison()
    out = markdown([comparison], "failing", 4, "working tree", "ref main (commit 0123456789ab)")
    html = MarkdownIt("commonmark").enable("table").render(out)
    assert html.count("<table>") == 1
    assert "<th>base</th>" in html
    assert "<th>pull request</th>" in html
    assert "| `local/main` | result | HEALTHY | FAILING |" in out
    assert "|  | failed ticks | 0 of 4 | 4 of 4 |" in out
    assert "|  | CPU per tick, mean | 1.25 | 3 |" in out
    assert "**new**" in out
    assert "Error: boom at main:1 (4 ticks)" in out


def test_the_text_names_each_error_with_the_bots_file_and_line() -> None:
    lines = text([_comparison()], "failing", 4, "working tree", "ref main")
    assert lines[0].startswith("rehearse: FAILING")
    assert "  new error: Error: boom at main:1 (4 ticks)" in lines
    assert any(line.split() == ["CPU", "mean", "change", "+1.75"] for line in lines)


CAUGHT = "room W1N1 failed: TypeError: x is undefined\n    at run (main:7:3)"


def _caught_comparison() -> Comparison:
    cpu = [1.0, 2.0, 1.0, 2.0, 2.0, 3.0]  # two runs of 3 ticks: medians 1 and 2
    base = side("base", [Tick(log=("tick 1",))] * 6, cpu, 10, Thresholds(ticks=6), ["main"])
    head = side("head", [Tick(log=("tick 2", CAUGHT))] * 6, cpu[::-1], 10, Thresholds(ticks=6), ["main"])
    return compare("local/main", head, base)


def test_caught_errors_changes_and_new_console_lines_are_shown_in_both() -> None:
    comparison = _caught_comparison()
    lines = text([comparison], comparison.result, 6, "working tree", "ref main")
    assert "  new caught error: TypeError: x is undefined at main:7 (6 ticks)" in lines
    assert "  CPU per tick: +0 (99 % interval -5.12 to +5.12): no significant change" in lines
    assert "  ticks with caught errors  0 of 6   6 of 6" in lines
    assert "  new console line: room WNNN failed: TypeError: x is undefined (6 ticks)" in lines
    out = markdown([comparison], comparison.result, 6, "working tree", "ref main")
    assert "|  | ticks with caught errors | 0 of 6 | 6 of 6 |" in out
    assert "- `local/main`: CPU per tick: +0 (99 % interval -5.12 to +5.12): no significant change" in out
    assert "- `local/main`: `new caught error: TypeError: x is undefined at main:7 (6 ticks)`" in out


def test_a_significant_change_says_so_and_a_head_alone_lists_its_caught_errors() -> None:
    assert change_line("CPU per tick", Change(2.0, 1.5, 2.5)) == (
        "CPU per tick: +2 (99 % interval +1.5 to +2.5): significant"
    )
    assert change_line("CPU per tick", None) is None
    alone = compare("local/main", _caught_comparison().head, None)
    lines = text([alone], alone.result, 6, "working tree", None)
    assert "  caught error: TypeError: x is undefined at main:7 (6 ticks)" in lines
    assert alone.result == "failing"
