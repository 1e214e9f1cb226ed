"""The Markdown plan (job summary, pull request comment) keeps names and server text inert.

The rendered text is parsed by markdown-it-py as CommonMark with GitHub's tables, and the tokens are checked: one
heading per section the renderer writes, every table row of eight cells, each hostile name inside one code span
(where GitHub reads no Markdown and links no mention), no HTML but the renderer's own ``<details>``.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from gitops.core.diff import ModuleChange
from gitops.core.health import Thresholds, Tick
from gitops.core.plan import BranchPlan, Plan, RemoteSeen, Step
from gitops.core.rehearsal import compare, side
from gitops.render.outcome import MarkdownConsole
from gitops.render.plan import md_code, md_fence, md_text, render_markdown
from gitops.render.rehearsal import markdown

HOSTILE = [
    "evil\n# Heading from a module name",
    "a`b``c",
    "`starts with a backtick",
    "ends with a backtick`",
    "@octocat please look",
    "<details><summary>open</summary>",
    "cell|split|more",
    "line\r\nbreak\u2028and\x07bell",
    "\n\n</details>\n\n## after the details",
    "*emphasis* _and_ [link](https://example.test) ![img](x) &amp; ~~strike~~",
    " spaced ",
    "\u202etxt.js",  # reads "sj.txt" where the override acts
    "left\u200fright\u2066isolated\u2069\u061c",
    "main\u200b.js\u2060\ufeff",  # invisible: reads "main.js"
]


def parse(text: str) -> list[Token]:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(text)


def inline_children(tokens: list[Token]) -> list[Token]:
    return [child for token in tokens if token.type == "inline" for child in token.children or []]


def shown(text: str) -> str:
    """How a name is shown: on one line, its line breaks and control characters as escapes."""
    return (
        text.replace("\\", "\\\\")
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\u2028", "\\u2028")
        .replace("\x07", "\\u0007")
        .replace("\u202e", "\\u202e")
        .replace("\u200f", "\\u200f")
        .replace("\u2066", "\\u2066")
        .replace("\u2069", "\\u2069")
        .replace("\u061c", "\\u061c")
        .replace("\u200b", "\\u200b")
        .replace("\u2060", "\\u2060")
        .replace("\ufeff", "\\ufeff")
    )


@pytest.mark.parametrize("name", HOSTILE)
def test_a_code_span_holds_the_whole_name_and_nothing_else(name: str) -> None:
    tokens = inline_children(parse(f"x {md_code(name)} y"))
    assert [t.type for t in tokens] == ["text", "code_inline", "text"]
    assert tokens[1].content == shown(name)


@pytest.mark.parametrize("name", HOSTILE)
def test_prose_is_shown_as_written_without_markup_or_mentions(name: str) -> None:
    tokens = inline_children(parse(f"- {md_text(name)}"))
    assert {t.type for t in tokens} <= {"text", "code_inline"}
    assert "".join(t.content for t in tokens) == shown(name).strip()  # prose loses its outer spaces
    for token in tokens:  # a mention is only ever inside code, where GitHub does not link it
        if "@" in token.content:
            assert token.type == "code_inline"


def test_a_fence_outlasts_every_run_of_backticks() -> None:
    text = "```\n````\nnot the end"
    [block] = [t for t in parse(md_fence(text, "text")) if t.type == "fence"]
    assert block.content == text + "\n"


def module(name: str, change: Any = "added", diff: str | None = None) -> ModuleChange:
    return ModuleChange(
        name=name,
        change=change,
        old_size=None if change == "added" else 3,
        new_size=5,
        old_digest=None,
        new_digest=None,
        binary=False,
        diff=diff,
    )


def hostile_plan() -> Plan:
    modules = [module(name) for name in HOSTILE]
    modules.append(module("evil\n# also in a diff", "changed", diff="-a\n+b\n```\n</details>\n+\u202eevil\x1b[2J"))
    branch = BranchPlan(
        server="local",
        branch="evil|branch\n# @octocat `x`",
        action="update",
        remote=RemoteSeen(how="download", learnt_at=0.0, exists=True, digest=None, verified=True, basis="download"),
        modules=modules,
        unchanged=0,
        activate=[],
        module_count=len(modules),
        upload_length=100,
        upload_digest=None,
        steps=[Step(kind="upload", request="POST /api/user/code")],
    )
    return Plan(
        created_at=10.0,
        manifest_path="gitops.yaml",
        manifest_digest="0" * 64,
        source={"kind": "worktree"},
        refresh="always",
        branches=[branch],
        budget=[],
        warnings=["module 'x\n# y' says @octocat <b>hi</b> | z"],
    )


def test_hostile_names_render_as_inert_code() -> None:
    text = render_markdown(hostile_plan(), now=20.0)
    tokens = parse(text)
    headings = [
        [(c.type, c.content) for c in tokens[i + 1].children or []]
        for i, t in enumerate(tokens)
        if t.type == "heading_open"
    ]
    assert headings == [
        [("text", "screeps-gitops plan")],
        [("code_inline", shown("local/evil|branch\n# @octocat `x`")), ("text", ": update (upload)")],
    ]
    rows = [t for t in tokens if t.type == "tr_open"]
    cells = [t for t in tokens if t.type in ("th_open", "td_open")]
    assert (len(rows), len(cells)) == (2, 16), "a header row and one branch row, eight cells each"
    children = inline_children(tokens)
    codes = [t.content for t in children if t.type == "code_inline"]
    assert shown("evil|branch\n# @octocat `x`") in codes, "the branch name whole, its `|` kept in the table"
    for name in HOSTILE:
        assert any(shown(name) in code for code in codes), name
    for token in children:
        if "@octocat" in token.content:
            assert token.type == "code_inline"
    html = [t.content for t in tokens if t.type == "html_block"] + [
        t.content for t in children if t.type == "html_inline"
    ]
    assert all(h.startswith(("<details><summary>diff of <code>", "</details>")) for h in html), html
    [summary] = [h for h in html if h.startswith("<details>")]
    assert summary.strip() == "<details><summary>diff of <code>evil\\n# also in a diff</code></summary>"
    [diff] = [t for t in tokens if t.type == "fence"]
    assert diff.content == "-a\n+b\n```\n</details>\n+\\u202eevil\\u001b[2J\n", "the text output's escapes"


#: What the text output escapes (gitops.inert) and Markdown must not show raw: C0/C1 controls, separators, bidi.
RAW = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u200b\u180e\u2060-\u2064\ufeff]"
)


def test_no_control_reaches_the_markdown_raw() -> None:
    """Every hostile name and text anywhere in the Markdown (tables, headings, prose, diffs): escaped as the
    terminal escapes it, a bidirectional override included."""
    text = render_markdown(hostile_plan(), now=20.0)
    assert RAW.findall(text) == []
    assert "\\u202etxt.js" in text
    assert "main\\u200b.js" in text


def test_the_apply_and_verify_sections_escape_the_games_text() -> None:
    """The Action's job summary and comment: its apply's lines and verifications, through the one presenter."""
    console = MarkdownConsole()
    hostile = "module \u202etxt.js threw \x1b]0;t\x07 at\r\n::add-mask::x"
    console.say(hostile)
    text = "\n".join(console.sections(health="failing"))
    assert RAW.findall(text) == []
    [fence] = [t for t in parse(text) if t.type == "fence"]
    assert fence.content == "module \\u202etxt.js threw \\u001b]0;t\\u0007 at\\r\n::add-mask::x\n"


def test_a_rehearsals_errors_are_code_no_backtick_or_override_of_them_can_end() -> None:
    error = "Error: x`y\u202e|z\n    at module.exports.loop (main:1:149)\n"
    head = side("head", [Tick(errors=(error,))] * 4, [3.0] * 4, 12, Thresholds(ticks=4), ["main"])
    text = markdown([compare("local/main`\u202e", head, None)], "failing", 4, "head", None)
    assert RAW.findall(text) == []
    codes = [t.content for t in inline_children(parse(text)) if t.type == "code_inline"]
    assert any("x`y\\u202e|z" in code for code in codes), codes
