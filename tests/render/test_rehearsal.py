"""The rehearsal's renderers: the terminal's lines and the plan comment's one table (base vs pull request)."""

from __future__ import annotations

from dataclasses import replace

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


def _chart(out: str) -> list[str]:
    start = out.index("```mermaid\n") + len("```mermaid\n")
    return out[start : out.index("```", start)].splitlines()


def test_the_markdown_charts_cpu_per_tick_base_against_the_pull_request_beside_the_table() -> None:
    out = markdown([_comparison()], "failing", 4, "working tree", "ref main")
    assert out.index("| `local/main` | result |") < out.index("```mermaid")
    assert "CPU per tick of `local/main` (grey: base, red: pull request):" in out
    chart = _chart(out)
    assert chart[1] == "xychart-beta"
    assert '"plotColorPalette": "#8b949e, #cf222e"' in chart[0]
    assert chart[2:] == [
        '    x-axis "tick" 1 --> 4',
        '    y-axis "CPU (ms)" 0 --> 4',
        "    line [1, 1, 1, 2]",
        "    line [3, 3, 3, 3]",
    ]
    # GitHub renders the fenced block as Mermaid: it is one code block whose info string is mermaid.
    html = MarkdownIt("commonmark").enable("table").render(out)
    assert html.count('<code class="language-mermaid">') == 1


def test_the_chart_holds_only_numbers_and_fixed_words_whatever_the_bot_or_manifest_say() -> None:
    hostile = 'x"]\n```\n<img src=x onerror=alert(1)> %%{init}%% @alice'
    base = side("base", [Tick(log=(hostile,))] * 3, [1.0, 2.0], 10, Thresholds(ticks=3), [hostile])
    head = side("head", [Tick(errors=(hostile,))] * 3, [5.0, 6.0], 10, Thresholds(ticks=3), [hostile])
    # A result file read back may hold what is not a finite number: it is not drawn.
    head = replace(head, cpu_values=(float("inf"), 5.0, float("nan"), 6.0))
    out = markdown([compare(hostile, head, base)], "failing", 3, hostile, hostile)
    chart = _chart(out)
    for line in chart[2:]:
        assert line in ('    x-axis "tick" 1 --> 4', '    y-axis "CPU (ms)" 0 --> 7') or (
            line.startswith("    line [") and set(line[len("    line [") : -1]) <= set("0123456789., -")
        ), line
    assert chart[2:][-2:] == ["    line [1, 2]", "    line [5, 6]"]  # what is not a number is not drawn


def test_a_long_rehearsal_is_charted_as_means_of_equal_runs_of_ticks() -> None:
    ticks = [Tick()] * 1000
    head = side("head", ticks, [float(i % 10) for i in range(1000)], 1, Thresholds(ticks=1000), ["main"])
    out = markdown([compare("a/b", head, None)], "healthy", 1000, "working tree", None)
    chart = _chart(out)
    assert "red: pull request" in out
    assert "grey" not in out
    [line] = [line for line in chart if line.startswith("    line [")]
    values = line[len("    line [") : -1].split(", ")
    assert len(values) == 100
    assert set(values) == {"4.5"}
    assert '    x-axis "tick" 1 --> 1000' in chart
