"""Outside text made inert before it is printed: the one neutraliser of every way out.

A server's text (game console lines, error bodies, a websocket's close reason, a ``packageVersion``) reaches a
terminal and, in CI, a runner's log. Printed raw it can act there: an escape sequence sets the window title, writes
the clipboard (OSC 52), hides a link behind other text (OSC 8) or moves the cursor over earlier lines; a line that
begins with ``::`` (or the older ``##[``) is a GitHub workflow command (``::add-mask::``, ``::warning::``,
``::stop-commands::``), and a line break inside a value is all it takes to begin one.

:func:`inert` shows such characters as escapes (``\\u001b``; the ``\\uXXXX`` form reads the same inside a JSON
string) and puts a backslash before a line that would start a workflow command. The CLI passes everything it
prints from outside through it, after :func:`gitops.secrets.redact` (``gitops.cli._print_error``, ``gitops
console``, apply's verification reports, init's lines); the Markdown renderers have their own escaping for the
same characters (``gitops.render.plan.md_text``).
"""

from __future__ import annotations

import re

#: C0 controls but tab and line feed, DEL, C1 controls (``\x9b`` is CSI, ``\x9d`` OSC on some terminals), the
#: Unicode line and paragraph separators, and the bidirectional controls that make a line read otherwise than it is.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROL_ONE_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: A line the Actions runner reads as a command: it trims the line first, then looks for ``::`` (or ``##[``).
_WORKFLOW_COMMAND = re.compile(r"^([ \t]*)(::|##\[)", re.MULTILINE)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _NAMED.get(char, f"\\u{ord(char):04x}")


def inert(text: str, *, one_line: bool = False) -> str:
    """``text`` safe to print to a terminal or a CI log: control characters (escape sequences' ESC, CSI, OSC,
    BEL, carriage returns, ...) shown as escapes, a line that would begin a workflow command prefixed with ``\\``,
    lone surrogates as ``\\udc80``. Line breaks stay, unless ``one_line`` (then they are ``\\n`` too)."""
    text = (_CONTROL_ONE_LINE if one_line else _CONTROL).sub(_escape, text)
    text = _WORKFLOW_COMMAND.sub(r"\1\\\2", text)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
