"""The compiled JavaScript parser (``gitops.edges.jsparser``): it parses current JavaScript and marks what is not.
What a deploy does with a module that does not parse is ``tests/edges/test_jssyntax.py``'s."""

from __future__ import annotations

from gitops.edges.jsparser import javascript_parser


def test_the_parser_reads_current_javascript_and_marks_what_is_not() -> None:
    parser = javascript_parser()
    good = parser.parse(b"class A { #x = 1; m() { return this.#x ?? a?.b; } }\nreturn 1;\n")
    assert good.root_node.type == "program"
    assert not good.root_node.has_error
    assert parser.parse(b"var x = ;\n").root_node.has_error


def test_each_call_makes_a_parser_of_its_own() -> None:
    assert javascript_parser() is not javascript_parser()
