"""The compiled JavaScript parser: tree-sitter with its JavaScript grammar, the one place that loads them.

Imported by :mod:`gitops.edges.jssyntax` only when it is asked to check a module (the boundary "tree_sitter" of
``docs/architecture.md``): a plan that uploads nothing never loads the compiled library.
"""

from __future__ import annotations

import tree_sitter
import tree_sitter_javascript


def javascript_parser() -> tree_sitter.Parser:
    """A new parser of JavaScript (current ECMAScript)."""
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_javascript.language()))
