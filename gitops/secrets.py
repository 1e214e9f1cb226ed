"""Secrets (tokens, passwords) and their redaction.

A :class:`Secret` never shows its value in ``str``/``repr``/format; code calls ``reveal()`` only where the value goes on
the wire. Every secret created is also registered, so that :func:`redact` can scrub it (and the 8-character prefix
the official server echoes in 429 bodies) from any text the tool prints, logs or writes: server messages, exception
text, debug output.
"""

from __future__ import annotations

import hashlib
import re
import threading

HIDDEN = "<hidden>"
_MIN_PREFIX = 8

_lock = threading.Lock()
_known: set[str] = set()


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
    """Remember a secret value so that :func:`redact` scrubs it."""
    if value:
        with _lock:
            _known.add(value)


def redact(text: str) -> str:
    """``text`` with every known secret, its 8-character prefix, and ``token=``/``_token=`` values hidden."""
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for value in known:
        if value in text:
            text = text.replace(value, HIDDEN)
        # The prefix rule is for tokens (what the server echoes); the prefix of a registered link or phrase
        # ("https://") is no secret, and scrubbing it would mangle every address in the text.
        if len(value) >= 2 * _MIN_PREFIX and _TOKEN_LIKE.match(value) and value[:_MIN_PREFIX] in text:
            text = text.replace(value[:_MIN_PREFIX], HIDDEN)
    return _TOKEN_PARAM.sub(lambda m: m.group(1) + HIDDEN, text)


_TOKEN_LIKE = re.compile(r"^[A-Za-z0-9_-]+$")
_TOKEN_PARAM = re.compile(r"((?:^|[?&#;\s])_?token=)(?!<hidden>)[^&\s#\"'<>]+")
