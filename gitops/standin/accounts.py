"""The stand-in's accounts file: users, their passwords and their tokens, in YAML.

The stand-in must answer logins and token scopes as the real server does, and its file is written by hand for a
test or a demo, so it is checked like the manifest: every problem in the file is reported at once, each as
``file:line: key: problem``, and the file is read as the manifest is (``gitops.config.yamlload``: at most 1 MB, no
anchors, no odd tags). The whole schema is :func:`load_accounts`'s docstring.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitops.config.yamlload import MAX_FILE_BYTES, Loc, Problems, Unreadable, counted, read_yaml
from gitops.core.endpoints import endpoint_key
from gitops.errors import ProblemsError, UsageError
from gitops.secrets import register
from gitops.standin.endpoints import SEGMENT_COUNT, SEGMENT_ENDPOINTS, TOKEN_ENDPOINTS

_USER_KEYS = ("username", "email", "password", "tokens")
_TOKEN_KEYS = ("value", "full", "endpoints", "websockets", "memory_segments")
_TOKEN_VALUE = re.compile(r"[!-~]{8,}")  # printable ASCII without spaces: it travels in a header and a URL
_USERNAME = re.compile(r"[A-Za-z0-9_-]{1,50}")
#: The largest accounts file read (a few users need a few kilobytes); a larger one is refused before it is parsed.
MAX_ACCOUNTS_BYTES = MAX_FILE_BYTES
_HINT = "See 'gitops serve --help' and 'gitops help serve' for the format."


class AccountsError(ProblemsError, UsageError):
    """The accounts file (or mapping) is invalid; ``problems`` lists every problem with its line and key."""


def fingerprint(token_value: str) -> str:
    """The key under which the store keeps a token's state: a hash, so the database holds no token."""
    return hashlib.sha256(b"gitops-standin\0" + token_value.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Token:
    """A persistent token and its scope."""

    value: str = field(repr=False)
    username: str
    full: bool
    endpoints: frozenset[str] = frozenset()
    websockets: tuple[str, ...] = ()
    memory_segments: frozenset[int] = frozenset()

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.value)

    def allows(self, endpoint: str) -> bool:
        """Whether the token reaches ``endpoint`` at all (segment numbers are checked by :meth:`allows_segment`)."""
        if self.full or endpoint in self.endpoints:
            return True
        return endpoint in SEGMENT_ENDPOINTS and bool(self.memory_segments)

    def allows_segment(self, endpoint: str, segment: int) -> bool:
        """Whether the token reaches memory segment ``segment`` through ``endpoint``."""
        return self.full or endpoint in self.endpoints or segment in self.memory_segments

    def scope(self) -> dict[str, object]:
        """The scope as ``GET /api/auth/query-token`` reports it."""
        return {
            "full": self.full,
            "endpoints": sorted(self.endpoints),
            "websockets": list(self.websockets),
            "memorySegments": sorted(self.memory_segments),
        }

    def describe(self) -> str:
        """A one-line summary without the value, for the terminal."""
        if self.full:
            return "full access"
        parts = [f"endpoints: {', '.join(sorted(self.endpoints)) or 'none'}"]
        if self.memory_segments:
            parts.append(f"memory segments: {', '.join(str(s) for s in sorted(self.memory_segments))}")
        if self.websockets:
            parts.append(f"websockets: {', '.join(self.websockets)}")
        return "restricted (" + "; ".join(parts) + ")"


@dataclass(frozen=True, slots=True)
class Account:
    """A user of the stand-in."""

    username: str
    email: str | None
    password: str | None = field(repr=False)
    tokens: tuple[Token, ...]
    user_id: str

    def password_matches(self, password: str) -> bool:
        if self.password is None:
            return False
        return hmac.compare_digest(self.password.encode("utf-8"), password.encode("utf-8"))


class Accounts:
    """Every user and token, with the look-ups that authentication needs."""

    def __init__(self, users: list[Account]) -> None:
        self.users: tuple[Account, ...] = tuple(users)
        self._by_token: dict[str, Token] = {t.value: t for a in users for t in a.tokens}
        self._by_name: dict[str, Account] = {a.username.lower(): a for a in users}
        self._by_login: dict[str, Account] = dict(self._by_name)
        for a in users:
            if a.email:
                self._by_login.setdefault(a.email.lower(), a)

    def token(self, value: str) -> Token | None:
        return self._by_token.get(value)

    def revoke(self, value: str) -> None:
        """The token is refused from now on, as one deleted in the account settings (tests)."""
        self._by_token.pop(value, None)

    def user(self, username: str) -> Account | None:
        return self._by_name.get(username.lower())

    def login(self, login: str, password: str) -> Account | None:
        """The account for HTTP Basic ``login:password``; the login is the e-mail or the username."""
        account = self._by_login.get(login.lower())
        if account is not None and account.password_matches(password):
            return account
        return None


def load_accounts(source: Path | Mapping[str, Any]) -> Accounts:
    """Read and check an accounts file (or an already parsed mapping); :class:`AccountsError` lists every problem,
    each as ``file:line: key: problem`` (``key: problem`` for a mapping).

    The whole schema::

        users:
          - username: alice              # required, unique (case-insensitive)
            email: alice@example.com     # optional; HTTP Basic accepts it or the username
            password: s3cret             # optional; without it the user has no HTTP Basic login
            tokens:                      # optional
              - value: 0123456789abcdef0123456789abcdef   # required, unique, 8+ printable characters
                full: true                                # full access: every endpoint and segment
              - value: fedcba9876543210fedcba9876543210
                endpoints: ["GET /api/user/code", "POST /api/user/code"]
                websockets: ["console"]                   # stored and reported; there is no websocket server
                memory_segments: [0, 1]                   # 0..99

    A token without ``full: true`` is restricted: it reaches the endpoints it lists, and the memory-segment
    endpoints for the segments it lists.
    """
    if isinstance(source, Path):
        where = f"the accounts file {source}"
        try:
            document = read_yaml(source, str(source), what="an accounts file", limit=MAX_ACCOUNTS_BYTES)
        except OSError as exc:
            raise AccountsError(
                f"cannot read the accounts file {source}: {exc.strerror or type(exc).__name__}",
                hint="Pass an existing YAML file with --accounts, or use --demo for a ready-made user and token.",
            ) from None
        except Unreadable as exc:
            raise _invalid(where, exc.problems) from None
        data = document.data
        problems = Problems(str(source), document.locations)
        problems.cover(document.problems)
    else:
        where = "the accounts mapping"
        data, problems = source, Problems(None, {})
    users = _check(data, problems)
    if problems:
        raise _invalid(where, problems.texts())
    for account in users:
        for token in account.tokens:
            register(token.value)
        if account.password:
            register(account.password)
    return Accounts(users)


def _invalid(where: str, problems: list[str]) -> AccountsError:
    count = counted(problems)
    return AccountsError(f"{where} is invalid ({count}):", problems, hint=_HINT)


def _check(data: Any, problems: Problems) -> list[Account]:
    problem = problems.add
    if not isinstance(data, Mapping):
        problem((), "expected a mapping with the key 'users'")
        return []
    for key in data:
        if key != "users":
            problem((str(key),), "unknown key; the file has only 'users'")
    raw_users = data.get("users")
    if not isinstance(raw_users, list) or not raw_users:
        problem(("users",), "expected a non-empty list of users")
        return []
    users: list[Account] = []
    seen_names: set[str] = set()
    seen_logins: set[str] = set()
    seen_tokens: set[str] = set()
    for i, raw in enumerate(raw_users):
        at: Loc = ("users", i)
        if not isinstance(raw, Mapping):
            problem(at, "expected a mapping with 'username', 'email', 'password' and 'tokens'")
            continue
        for key in raw:
            if key not in _USER_KEYS:
                problem((*at, str(key)), f"unknown key; a user has {', '.join(_USER_KEYS)}")
        username = raw.get("username")
        if not isinstance(username, str) or not _USERNAME.fullmatch(username):
            problem((*at, "username"), "required: 1 to 50 letters, digits, '_' or '-'")
            username = f"?{i}"
        elif username.lower() in seen_names:
            problem((*at, "username"), f"the username {username!r} is used twice")
        seen_names.add(username.lower())
        email = raw.get("email")
        if email is not None and (not isinstance(email, str) or "@" not in email or email != email.strip()):
            problem((*at, "email"), "expected an e-mail address such as alice@example.com")
            email = None
        if isinstance(email, str):
            if email.lower() in seen_logins:
                problem((*at, "email"), f"the e-mail {email!r} is used twice")
            seen_logins.add(email.lower())
        password = raw.get("password")
        if password is not None and (not isinstance(password, str) or not password):
            problem((*at, "password"), "expected a non-empty string (quote it if it looks like a number)")
            password = None
        tokens: list[Token] = []
        raw_tokens = raw.get("tokens", [])
        if raw_tokens is None:
            raw_tokens = []
        if not isinstance(raw_tokens, list):
            problem((*at, "tokens"), "expected a list of tokens")
            raw_tokens = []
        for j, raw_token in enumerate(raw_tokens):
            value = raw_token.get("value") if isinstance(raw_token, Mapping) else None
            if isinstance(value, str) and value in seen_tokens:
                problem((*at, "tokens", j, "value"), "this token value is used twice")
                continue
            if isinstance(value, str):
                seen_tokens.add(value)
            token = _check_token(raw_token, (*at, "tokens", j), username, problem)
            if token is not None:
                tokens.append(token)
        user_id = hashlib.sha256(b"user\0" + username.lower().encode("utf-8")).hexdigest()[:24]
        users.append(Account(username, email, password, tuple(tokens), user_id))
    return users


def _check_token(raw: Any, at: Loc, username: str, problem: Callable[[Loc, str], None]) -> Token | None:
    if not isinstance(raw, Mapping):
        problem(at, "expected a mapping with 'value' and either 'full: true' or 'endpoints'")
        return None
    ok = True
    for key in raw:
        if key not in _TOKEN_KEYS:
            problem((*at, str(key)), f"unknown key; a token has {', '.join(_TOKEN_KEYS)}")
            ok = False
    value = raw.get("value")
    if not isinstance(value, str) or not _TOKEN_VALUE.fullmatch(value):
        problem((*at, "value"), "required: a string of 8 or more printable characters without spaces (quote it)")
        ok = False
    full = raw.get("full", False)
    if not isinstance(full, bool):
        problem((*at, "full"), "expected true or false")
        ok = False
    endpoints: set[str] = set()
    raw_endpoints = raw.get("endpoints", [])
    if not isinstance(raw_endpoints, list):
        problem((*at, "endpoints"), "expected a list such as ['GET /api/user/code', 'POST /api/user/code']")
        raw_endpoints = []
        ok = False
    for k, entry in enumerate(raw_endpoints):
        key = _endpoint(entry)
        if key is None or key not in TOKEN_ENDPOINTS:
            problem(
                (*at, "endpoints", k),
                f"unknown endpoint {entry!r}; known: {', '.join(sorted(TOKEN_ENDPOINTS))}",
            )
            ok = False
        else:
            endpoints.add(key)
    websockets: list[str] = []
    raw_websockets = raw.get("websockets", [])
    if not isinstance(raw_websockets, list) or not all(isinstance(w, str) and w for w in raw_websockets):
        problem((*at, "websockets"), "expected a list of event names such as ['console', 'memory']")
        ok = False
    else:
        websockets = list(dict.fromkeys(raw_websockets))
    segments: set[int] = set()
    raw_segments = raw.get("memory_segments", [])
    if not isinstance(raw_segments, list):
        problem((*at, "memory_segments"), "expected a list of segment numbers such as [0, 1]")
        raw_segments = []
        ok = False
    for k, seg in enumerate(raw_segments):
        if isinstance(seg, bool) or not isinstance(seg, int) or not 0 <= seg < SEGMENT_COUNT:
            problem((*at, "memory_segments", k), f"expected a segment number from 0 to {SEGMENT_COUNT - 1}")
            ok = False
        else:
            segments.add(seg)
    if full is True and (endpoints or websockets or segments):
        problem(at, "a token with 'full: true' has every scope; remove endpoints, websockets and memory_segments")
        ok = False
    if not ok:
        return None
    assert isinstance(value, str)
    return Token(value, username, bool(full), frozenset(endpoints), tuple(websockets), frozenset(segments))


def _endpoint(entry: Any) -> str | None:
    """``"GET /api/user/code"`` from an accounts-file entry (case of the method and a trailing slash forgiven)."""
    if not isinstance(entry, str):
        return None
    parts = entry.split()
    if len(parts) != 2 or not parts[1].startswith("/"):
        return None
    return endpoint_key(parts[0], parts[1])
