"""Secrets (tokens, passwords) and their redaction.

A :class:`Secret` never shows its value in ``str``/``repr``/format; code calls ``reveal()`` only where the value goes on
the wire. Every secret created is also registered, so that :func:`redact` can scrub it (and the 8-character prefix
the official server echoes in 429 bodies) from any text the tool prints, logs or writes: server messages, exception
text, debug output.

Only secrets of at least :data:`MIN_REDACTED_LENGTH` (8) characters are scrubbed from text: a shorter one (a
one-letter password) would match ordinary words and make every message unreadable while pointing at the secret
itself. Such secrets are still never put in a message on purpose; redaction is the safety net, and it cannot
catch them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from typing import Any
from urllib.parse import quote, quote_plus

HIDDEN = "<hidden>"
#: Registered secrets shorter than this are not scrubbed from text (see the module docstring).
MIN_REDACTED_LENGTH = 8
_MIN_PREFIX = 8


class _Registry:
    """Every registered secret, and one compiled alternation of the texts that give them away."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.known: set[str] = set()
        #: Longest first; ``None`` after a registration, until the next redact() compiles it again.
        self.pattern: re.Pattern[str] | None = None
        #: The same without the 8-character token prefixes (:func:`leaked_in`).
        self.whole_pattern: re.Pattern[str] | None = None


_registry = _Registry()


class Secret:
    """A value that must never be printed."""

    __slots__ = ("_value",)

    def __init__(self, value: str, *, scrub: bool = True) -> None:
        # scrub=False: for a value that only carries another, registered secret (a link holding a token), so that
        # redact() hides the token inside it rather than the whole text.
        self._value = value
        if scrub:
            register(value)

    def reveal(self) -> str:
        return self._value

    def fingerprint(self) -> str:
        """A stable, non-reversible name for the secret (for ledger keys)."""
        return hashlib.sha256(b"screeps-gitops\0" + self._value.encode("utf-8")).hexdigest()[:16]

    def __str__(self) -> str:
        return HIDDEN

    def __repr__(self) -> str:
        return f"Secret({HIDDEN})"

    def __format__(self, spec: str) -> str:
        return HIDDEN

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("a Secret cannot be pickled")


def register(value: str) -> None:
    """Remember a secret value so that :func:`redact` scrubs it (if it has at least 8 characters)."""
    if value and value not in _registry.known:
        with _registry.lock:
            _registry.known.add(value)
            _registry.pattern = None
            _registry.whole_pattern = None


def redact(text: str) -> str:
    """``text`` with every known secret, its 8-character prefix, and ``token=``/``_token=`` values hidden.

    One pass over the text: what replaced a secret is never searched again, so ``<hidden>`` stays whole.
    """
    text = _compiled().sub(HIDDEN, text)
    return _TOKEN_PARAM.sub(lambda m: m.group(1) + HIDDEN, text)


def _compiled(*, whole: bool = False) -> re.Pattern[str]:
    """The expression of every registered secret's forms (``whole``: without the 8-character token prefixes)."""
    with _registry.lock:
        if _registry.pattern is None or _registry.whole_pattern is None:
            needles: set[str] = set()
            prefixes: set[str] = set()
            for value in _registry.known:
                needles.update(_forms(value))
                if len(value) >= 2 * _MIN_PREFIX and _TOKEN_LIKE.match(value):
                    prefixes.add(value[:_MIN_PREFIX])
            _registry.pattern = re.compile(_trie_pattern(needles)) if needles else _NOTHING
            wholes = needles - prefixes
            _registry.whole_pattern = re.compile(_trie_pattern(wholes)) if wholes else _NOTHING
        return _registry.whole_pattern if whole else _registry.pattern


def _trie_pattern(needles: set[str]) -> str:
    """One regular expression matching any needle, the longest where several start at the same place.

    The needles share a trie, so at each position of the text the regex follows one path by the characters there
    instead of trying every needle in turn: redaction stays one fast pass however many secrets (times their
    encoded forms) are registered. At each node the longer continuations come before ending there, so a whole
    token wins over its prefix and a secret over a shorter one inside it. A run of nodes with one child each is
    written as one literal, so the expression nests only where needles part: a secret of any length (10,000
    characters) neither recurses here nor nests the expression past what the regex compiler takes.
    """
    trie: dict[str, Any] = {}
    for needle in needles:
        node = trie
        for char in needle:
            node = node.setdefault(char, {})
        node[""] = {}

    def pattern(node: dict[str, Any]) -> str:
        branches = []
        for char, first in sorted(node.items()):
            if not char:
                continue
            literal, child = [char], first
            while len(child) == 1 and "" not in child:
                ((next_char, child),) = child.items()
                literal.append(next_char)
            branches.append(re.escape("".join(literal)) + pattern(child))
        if "" in node:
            branches.append("")
        if len(branches) == 1:
            return branches[0]
        return "(?:" + "|".join(branches) + ")"

    return pattern(trie)


def leaked_in(content: str | bytes) -> bool:
    """Whether ``content`` (a module's text or bytes) holds a whole registered secret: as it is, or in a form
    :func:`redact` hides (JSON- or URL-encoded, base64), but not the 8-character prefix :func:`redact` also hides
    (8 characters of code can match a prefix by chance; a whole token cannot). One pass of one expression."""
    text = content.decode("latin-1") if isinstance(content, bytes) else content
    return _compiled(whole=True).search(text) is not None


def _base64_cores(data: bytes) -> set[str]:
    """The base64 text that ``data`` gives inside any larger base64 text (``user:password`` in a Basic header, a
    token in a JSON web token): for each of the 3 alignments, the characters that depend on ``data`` alone."""
    cores: set[str] = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data + b"\0\0").decode("ascii")
        first = -(-8 * offset // 6)  # the first character without bits of the bytes before
        last = 8 * (offset + len(data)) // 6  # past the last character without bits of the bytes after
        core = encoded[first:last]
        cores.update((core, core.replace("+", "-").replace("/", "_")))
    return cores


def _url_forms(value: str) -> set[str]:
    forms = {quote(value, safe=""), quote(value), quote_plus(value)}
    forms |= {re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), f) for f in forms}
    return forms


def _forms(value: str) -> set[str]:
    """The texts that give ``value`` away: itself; as a ``repr`` or a JSON string shows it; URL-encoded (``%XX`` in
    either case, ``+`` for spaces); in base64 (standard and URL-safe, also inside a longer base64 text such as the
    ``user:password`` of a Basic header); and a token's prefix."""
    if len(value) < MIN_REDACTED_LENGTH:
        return set()
    as_json = {json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
    forms = {value, repr(value)[1:-1], repr(value.encode("utf-8"))[2:-1]}
    forms |= as_json | {f.replace("/", "\\/") for f in as_json}  # JSON may escape "/" (PHP does)
    forms |= _url_forms(value)
    forms |= _base64_cores(value.encode("utf-8"))
    # The prefix rule is for tokens (what the server echoes); the prefix of a registered link or phrase
    # ("https://") is no secret, and scrubbing it would mangle every address in the text.
    if len(value) >= 2 * _MIN_PREFIX and _TOKEN_LIKE.match(value):
        forms.add(value[:_MIN_PREFIX])
    return {f for f in forms if len(f) >= MIN_REDACTED_LENGTH}


_NOTHING = re.compile(r"(?!)")
_TOKEN_LIKE = re.compile(r"^[A-Za-z0-9_-]+$")
_TOKEN_PARAM = re.compile(r"((?:^|[?&#;\s])_?token=)(?!<hidden>)[^&\s#\"'<>]+")
