"""What a credential says, as values: the two login kinds, what a credential value may hold, an account's fingerprint.

A credential is read in two places (the credentials, from the environment or a file; the client sending it and
the session token the server gives back); the rules for what such a string says are pure facts, kept here once so
that those places agree and can be tested without a server, a file or httpx. Nothing here sends, reads or logs: the
callers own the wording of their errors and the secrets (:class:`gitops.secrets.Secret`); this module only looks at
strings. What the server's token query says of a token is :mod:`gitops.core.tokens`.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Literal

__all__ = ["LoginKind", "account_fingerprint", "header_safe", "value_problem"]

#: How a server is logged in to: a persistent token (official servers), or a user name and password signing in
#: (private servers, screepsmod-auth).
LoginKind = Literal["token", "password"]

#: What a session token must look like to be sent back as a header: printable ASCII without spaces.
_HEADER_SAFE = re.compile(r"^[\x21-\x7e]+$")


def header_safe(value: str) -> bool:
    """Whether ``value`` can travel as an HTTP header value as it is (printable ASCII, no whitespace)."""
    return bool(_HEADER_SAFE.match(value))


def value_problem(value: str, *, header: bool) -> str | None:
    """What is wrong with a credential value, in words (``"contains whitespace"``), or ``None``.

    ``header``: the value travels in an HTTP header (a token, a user name), so it must be printable ASCII without
    whitespace; otherwise (a password, in a JSON body) only control characters and broken text are refused.
    """
    for char in value:
        if char in "\r\n":
            return "contains a line break (carriage return or newline)"
        category = unicodedata.category(char)
        if category == "Cs":
            return "contains bytes that are not valid UTF-8"
        if category == "Cc":
            return "contains a control character"
        if header and char.isspace():
            return "contains whitespace"
        if header and not char.isascii():
            return "contains a non-ASCII character (only letters, digits and ASCII punctuation can be sent)"
    return None


def account_fingerprint(url: str, username: str) -> str:
    """A hash of server URL and user name: one ledger per account, the same across password changes."""
    raw = f"screeps-gitops\0{url.rstrip('/').lower()}\0{username}".encode()
    return hashlib.sha256(raw).hexdigest()[:16]
