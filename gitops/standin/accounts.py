"""The stand-in's accounts file: users, their passwords and their tokens, in YAML.

The whole schema is here::

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

A token without ``full: true`` is restricted: it reaches the endpoints it lists, and the memory-segment endpoints
for the segments it lists. Every problem in the file is reported at once, each with its line and key.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gitops.config.yamlload import UntrustedLoader
from gitops.core.endpoints import endpoint_key
from gitops.errors import ProblemsError, UsageError
from gitops.secrets import register
from gitops.standin.endpoints import SEGMENT_COUNT, SEGMENT_ENDPOINTS, TOKEN_ENDPOINTS

_USER_KEYS = ("username", "email", "password", "tokens")
_TOKEN_KEYS = ("value", "full", "endpoints", "websockets", "memory_segments")
_TOKEN_VALUE = re.compile(r"[!-~]{8,}")  # printable ASCII without spaces: it travels in a header and a URL
_USERNAME = re.compile(r"[A-Za-z0-9_-]{1,50}")


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

    def user(self, username: str) -> Account | None:
        return self._by_name.get(username.lower())

    def login(self, login: str, password: str) -> Account | None:
        """The account for HTTP Basic ``login:password``; the login is the e-mail or the username."""
        account = self._by_login.get(login.lower())
        if account is not None and account.password_matches(password):
            return account
        return None


def load_accounts(source: Path | Mapping[str, Any]) -> Accounts:
    """Read and check an accounts file (or an already parsed mapping); :class:`AccountsError` lists every problem."""
    if isinstance(source, Path):
        where = str(source)
        try:
            text = source.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise AccountsError(
                f"cannot read the accounts file {source}: {exc}",
                hint="Pass an existing YAML file with --accounts, or use --demo for a ready-made user and token.",
            ) from exc
        data, lines = _parse_yaml(text, where)
    else:
        where = "the accounts mapping"
        data, lines = source, {}
    problems: list[str] = []
    users = _check(data, lines, problems)
    if problems:
        raise AccountsError(
            f"{where} is invalid:", problems, hint="See 'gitops serve --help' and docs/serve.md for the format."
        )
    for account in users:
        for token in account.tokens:
            register(token.value)
        if account.password:
            register(account.password)
    return Accounts(users)


def _parse_yaml(text: str, where: str) -> tuple[Any, dict[str, int]]:
    """The document and the line (1-based) of every key path, so that problems can say where they are."""
    loader = UntrustedLoader(text)  # no aliases: one to itself made _construct recurse without end
    try:
        node = loader.get_single_node()
        lines: dict[str, int] = {}
        problems: list[str] = [
            f"line {r.line}, column {r.column}: YAML {'aliases' if r.kind == 'alias' else 'anchors'} are not "
            "supported in the accounts file; write the value out"
            for r in loader.refused
        ]
        if problems:
            raise AccountsError(f"{where} is invalid:", problems)
        data = _construct(loader, node, "", lines, problems) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise AccountsError(f"{where} is not valid YAML{at}: {getattr(exc, 'problem', None) or exc}") from exc
    finally:
        loader.dispose()
    if problems:
        raise AccountsError(f"{where} is invalid:", problems)
    return data, lines


def _construct(loader: yaml.SafeLoader, node: yaml.Node, path: str, lines: dict[str, int], problems: list[str]) -> Any:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            sub = f"{path}.{key}" if path else str(key)
            if key in out:
                problems.append(f"line {key_node.start_mark.line + 1}, {sub}: the key appears twice")
            out[key] = _construct(loader, value_node, sub, lines, problems)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_construct(loader, item, f"{path}[{i}]", lines, problems) for i, item in enumerate(node.value)]
    return loader.construct_object(node, deep=True)


def _check(data: Any, lines: dict[str, int], problems: list[str]) -> list[Account]:
    def problem(path: str, message: str) -> None:
        line = lines.get(path)
        problems.append(f"line {line}, {path}: {message}" if line else f"{path}: {message}")

    if not isinstance(data, Mapping):
        problem("(top)", "expected a mapping with the key 'users'")
        return []
    for key in data:
        if key != "users":
            problem(str(key), "unknown key; the file has only 'users'")
    raw_users = data.get("users")
    if not isinstance(raw_users, list) or not raw_users:
        problem("users", "expected a non-empty list of users")
        return []
    users: list[Account] = []
    seen_names: set[str] = set()
    seen_logins: set[str] = set()
    seen_tokens: set[str] = set()
    for i, raw in enumerate(raw_users):
        at = f"users[{i}]"
        if not isinstance(raw, Mapping):
            problem(at, "expected a mapping with 'username', 'email', 'password' and 'tokens'")
            continue
        for key in raw:
            if key not in _USER_KEYS:
                problem(f"{at}.{key}", f"unknown key; a user has {', '.join(_USER_KEYS)}")
        username = raw.get("username")
        if not isinstance(username, str) or not _USERNAME.fullmatch(username):
            problem(f"{at}.username", "required: 1 to 50 letters, digits, '_' or '-'")
            username = f"?{i}"
        elif username.lower() in seen_names:
            problem(f"{at}.username", f"the username {username!r} is used twice")
        seen_names.add(username.lower())
        email = raw.get("email")
        if email is not None and (not isinstance(email, str) or "@" not in email or email != email.strip()):
            problem(f"{at}.email", "expected an e-mail address such as alice@example.com")
            email = None
        if isinstance(email, str):
            if email.lower() in seen_logins:
                problem(f"{at}.email", f"the e-mail {email!r} is used twice")
            seen_logins.add(email.lower())
        password = raw.get("password")
        if password is not None and (not isinstance(password, str) or not password):
            problem(f"{at}.password", "expected a non-empty string (quote it if it looks like a number)")
            password = None
        tokens: list[Token] = []
        raw_tokens = raw.get("tokens", [])
        if raw_tokens is None:
            raw_tokens = []
        if not isinstance(raw_tokens, list):
            problem(f"{at}.tokens", "expected a list of tokens")
            raw_tokens = []
        for j, raw_token in enumerate(raw_tokens):
            value = raw_token.get("value") if isinstance(raw_token, Mapping) else None
            if isinstance(value, str) and value in seen_tokens:
                problem(f"{at}.tokens[{j}].value", "this token value is used twice")
                continue
            if isinstance(value, str):
                seen_tokens.add(value)
            token = _check_token(raw_token, f"{at}.tokens[{j}]", username, problem)
            if token is not None:
                tokens.append(token)
        user_id = hashlib.sha256(b"user\0" + username.lower().encode("utf-8")).hexdigest()[:24]
        users.append(Account(username, email, password, tuple(tokens), user_id))
    return users


def _check_token(raw: Any, at: str, username: str, problem: Callable[[str, str], None]) -> Token | None:
    if not isinstance(raw, Mapping):
        problem(at, "expected a mapping with 'value' and either 'full: true' or 'endpoints'")
        return None
    ok = True
    for key in raw:
        if key not in _TOKEN_KEYS:
            problem(f"{at}.{key}", f"unknown key; a token has {', '.join(_TOKEN_KEYS)}")
            ok = False
    value = raw.get("value")
    if not isinstance(value, str) or not _TOKEN_VALUE.fullmatch(value):
        problem(f"{at}.value", "required: a string of 8 or more printable characters without spaces (quote it)")
        ok = False
    full = raw.get("full", False)
    if not isinstance(full, bool):
        problem(f"{at}.full", "expected true or false")
        ok = False
    endpoints: set[str] = set()
    raw_endpoints = raw.get("endpoints", [])
    if not isinstance(raw_endpoints, list):
        problem(f"{at}.endpoints", "expected a list such as ['GET /api/user/code', 'POST /api/user/code']")
        raw_endpoints = []
        ok = False
    for k, entry in enumerate(raw_endpoints):
        key = _endpoint(entry)
        if key is None or key not in TOKEN_ENDPOINTS:
            problem(
                f"{at}.endpoints[{k}]",
                f"unknown endpoint {entry!r}; known: {', '.join(sorted(TOKEN_ENDPOINTS))}",
            )
            ok = False
        else:
            endpoints.add(key)
    websockets: list[str] = []
    raw_websockets = raw.get("websockets", [])
    if not isinstance(raw_websockets, list) or not all(isinstance(w, str) and w for w in raw_websockets):
        problem(f"{at}.websockets", "expected a list of event names such as ['console', 'memory']")
        ok = False
    else:
        websockets = list(dict.fromkeys(raw_websockets))
    segments: set[int] = set()
    raw_segments = raw.get("memory_segments", [])
    if not isinstance(raw_segments, list):
        problem(f"{at}.memory_segments", "expected a list of segment numbers such as [0, 1]")
        raw_segments = []
        ok = False
    for k, seg in enumerate(raw_segments):
        if isinstance(seg, bool) or not isinstance(seg, int) or not 0 <= seg < SEGMENT_COUNT:
            problem(f"{at}.memory_segments[{k}]", f"expected a segment number from 0 to {SEGMENT_COUNT - 1}")
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
