"""The Markdown plan (job summary, pull request comment) keeps names and server text inert.

The rendered text is parsed by markdown-it-py as CommonMark with GitHub's tables, and the tokens are checked: one
heading per section the renderer writes, every table row of eight cells, each hostile name inside one code span
(where GitHub reads no Markdown and links no mention), no HTML but the renderer's own ``<details>``.
"""

from __future__ import annotations

from typing import Any

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from gitops.core.diff import ModuleChange
from gitops.core.plan import BranchPlan, Plan, RemoteSeen, Step
from gitops.render.plan import md_code, md_fence, md_text, render_markdown

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
    modules.append(module("evil\n# also in a diff", "changed", diff="-a\n+b\n```\n</details>"))
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
    assert diff.content == "-a\n+b\n```\n</details>\n"
