"""JavaScript syntax, checked before anything is sent: a module the game cannot parse throws a ``SyntaxError`` in
every tick (``var x = ;`` passed validate, plan and apply, and was uploaded).

The parser is tree-sitter's JavaScript grammar (``tree-sitter-javascript``): a C parser with wheels for every
platform the tool runs on, kept by the tree-sitter project, that knows the syntax of current ECMAScript (optional
chaining, class fields, ``for await``, ...). A module is the body of a CommonJS function in game, and the grammar
takes a top-level ``return`` as such a body does. ``validate`` and ``gitops build`` check every JavaScript module;
``plan`` and ``apply`` check the modules they are about to upload (added or changed: the others are what the server
runs already), so that a deploy without changes parses nothing.

An edge, not the core: it loads a compiled library. It imports it only when asked to check something.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gitops.core.local import LocalBranch

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

#: At most this many modules' problems are listed (the first of each module).
MAX_LISTED = 20


@dataclass(frozen=True)
class SyntaxProblem:
    """The first place in a module's text that does not parse: 1-based line and column, and that line, cut."""

    line: int
    column: int
    excerpt: str

    def text(self) -> str:
        return f"line {self.line}, column {self.column}: JavaScript syntax error near {self.excerpt!r}"


@functools.cache
def _parser() -> Parser:
    from gitops.edges import jsparser  # noqa: PLC0415 (boundary: tree_sitter)

    return jsparser.javascript_parser()


def first_syntax_problem(text: str) -> SyntaxProblem | None:
    """Where ``text`` first fails to parse as JavaScript, or ``None``."""
    data = text.encode("utf-8", "surrogatepass")
    tree = _parser().parse(data)
    if not tree.root_node.has_error:
        return None
    node = _first_error(tree.root_node)
    row, column = node.start_point if node is not None else (0, 0)
    # Columns in characters of that line (tree-sitter counts bytes).
    lines = data.split(b"\n")
    line_bytes = lines[row] if row < len(lines) else b""
    prefix = line_bytes[:column].decode("utf-8", "replace")
    excerpt = line_bytes.decode("utf-8", "replace").strip()
    if len(excerpt) > 80:
        excerpt = excerpt[:77] + "..."
    return SyntaxProblem(row + 1, len(prefix) + 1, excerpt)


def _first_error(root: Node) -> Node | None:
    """The first ERROR or MISSING node, in document order (a walk that only enters subtrees holding one)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            return node
        stack.extend(child for child in reversed(node.children) if child.has_error or child.is_missing)
    return None


def syntax_problems(branches: Iterable[LocalBranch], only: Mapping[str, Collection[str]] | None = None) -> list[str]:
    """One line per JavaScript module of ``branches`` that does not parse, naming the branch, module and file;
    with ``only``, just the modules it names per branch label (a branch it does not name is not checked)."""
    found: list[str] = []
    for branch in branches:
        names = None if only is None else only.get(branch.label)
        if only is not None and not names:
            continue
        for module in branch.code:
            if module.text is None or branch.kinds.get(module.name, "javascript") != "javascript":
                continue
            if names is not None and module.name not in names:
                continue
            problem = first_syntax_problem(module.text)
            if problem is not None:
                where = branch.files.get(module.name, module.name)
                found.append(f"{branch.label}: module {module.name!r} ({where}) {problem.text()}")
                if len(found) >= MAX_LISTED:
                    return found
    return found
