"""Outside text made inert before it is printed: the one neutraliser of every way out.

A server's text (game console lines, error bodies, a websocket's close reason, a ``packageVersion``) reaches a
terminal and, in CI, a runner's log. Printed raw it can act there: an escape sequence sets the window title, writes
the clipboard (OSC 52), hides a link behind other text (OSC 8) or moves the cursor over earlier lines; a line that
begins with ``::`` (or the older ``##[``) is a GitHub workflow command (``::add-mask::``, ``::warning::``,
``::stop-commands::``), and a line break inside a value is all it takes to begin one.

:func:`inert` shows such characters as escapes (``\\u001b``; the ``\\uXXXX`` form reads the same inside a JSON
string) and puts a backslash before a line that would start a workflow command. The CLI passes everything it
prints from outside through it, after :func:`gitops.secrets.redact` (``gitops.cli._print_error``, ``gitops
console``, init's lines, and every outcome :mod:`gitops.render.outcome` presents); the Markdown renderers escape
the same characters their own way (``gitops.render.plan.md_text``, ``md_code``, ``md_fence``), from the same
:data:`BIDI_CONTROLS`.
"""

from __future__ import annotations

import re

#: The bidirectional controls that make a line read otherwise than it is (a module named ``\u202etxt.js`` shows as
#: ``sj.txt``): the marks (ALM, LRM, RLM), the embeddings and overrides, the isolates. A regular expression's
#: character class body, shared with the Markdown renderers (``gitops.render.plan``), so that a pull request's
#: comment escapes what the terminal escapes.
#: With them the invisible format characters that hide or join text without a mark of their own: the zero width
#: space, the Mongolian vowel separator, the word joiner and the invisible operators, and the byte order mark. The
#: zero width joiner and non-joiner are left as they are: emoji sequences and Persian text need them.
BIDI_CONTROLS = r"\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u200b\u180e\u2060-\u2064\ufeff"
#: C0 controls but tab and line feed, DEL, C1 controls (``\x9b`` is CSI, ``\x9d`` OSC on some terminals), the
#: Unicode line and paragraph separators, and the bidirectional controls.
_CONTROL = re.compile(rf"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029{BIDI_CONTROLS}]")
_CONTROL_ONE_LINE = re.compile(rf"[\x00-\x1f\x7f-\x9f\u2028\u2029{BIDI_CONTROLS}]")
#: A line the Actions runner reads as a command: it trims the line first, then looks for ``::`` (or ``##[``).
_WORKFLOW_COMMAND = re.compile(r"^([ \t]*)(::|##\[)", re.MULTILINE)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _NAMED.get(char, f"\\u{ord(char):04x}")


def shown(text: str) -> str:
    """``text`` with its control characters as escapes, line breaks and tabs kept, lone surrogates as ``\\udc80``;
    no workflow-command check: for a Markdown code block (a diff, a log), which no runner reads as a command."""
    return _CONTROL.sub(_escape, text).encode("utf-8", "backslashreplace").decode("utf-8")


def inert(text: str, *, one_line: bool = False) -> str:
    """``text`` safe to print to a terminal or a CI log: control characters (escape sequences' ESC, CSI, OSC,
    BEL, carriage returns, ...) shown as escapes, a line that would begin a workflow command prefixed with ``\\``,
    lone surrogates as ``\\udc80``. Line breaks stay, unless ``one_line`` (then they are ``\\n`` too)."""
    text = (_CONTROL_ONE_LINE if one_line else _CONTROL).sub(_escape, text)
    text = _WORKFLOW_COMMAND.sub(r"\1\\\2", text)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
