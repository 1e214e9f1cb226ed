"""Requests, responses and the error envelope of the stand-in, independent of the ASGI plumbing."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from gitops.standin.accounts import Account, Token

JSON_TYPE = b"application/json; charset=utf-8"
TEXT_TYPE = b"text/plain; charset=utf-8"
HTML_TYPE = b"text/html; charset=utf-8"

_NO_BODY = object()


def _reject_constant(name: str) -> Any:
    # JavaScript's JSON.parse refuses NaN and Infinity; so does the stand-in.
    raise ValueError(f"{name} is not valid JSON")


class Reject(Exception):
    """Answer the request with ``{"error": message, **extra}`` and ``status`` (200 for the real server's logical
    errors)."""

    def __init__(self, message: str, status: int = 200, **extra: object) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.extra = extra


@dataclass(slots=True)
class Request:
    """One HTTP request, authenticated (``account``/``token``) once the app has checked the credentials."""

    method: str
    path: str
    key: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes = b""
    account: Account | None = None
    token: Token | None = None
    _json: Any = field(default=_NO_BODY, repr=False)

    @property
    def user(self) -> Account:
        """The authenticated account (only called by handlers of endpoints that require one)."""
        assert self.account is not None
        return self.account

    def json(self) -> Any:
        """The body as JSON; :class:`Reject` (400) if it is not JSON, (415) if it is not sent as JSON."""
        if self._json is _NO_BODY:
            text = self._text()
            try:
                self._json = json.loads(text, parse_constant=_reject_constant)
            except (ValueError, RecursionError) as exc:
                raise Reject(f"the request body is not valid JSON: {_short(exc)}", status=400) from None
        return self._json

    def _text(self) -> str:
        """The body as text, read as the private server's body parser (express ``body-parser.json``) reads it.

        Only the media type ``application/json`` is JSON (``application/vnd.api+json`` is not: the real server leaves
        such a body unread); the charset must be a UTF one (``charset=iso-8859-1`` is 415 there too), UTF-8 when
        none is named; a byte order mark at the start is skipped (iconv-lite strips it).
        """
        media, _, params = self.headers.get("content-type", "").partition(";")
        media = media.strip().lower()
        if media != "application/json":
            raise Reject(
                "send the body as JSON with 'Content-Type: application/json; charset=utf-8'"
                f" (got {media or 'no Content-Type'!r})",
                status=415,
            )
        charset = _charset(params) or "utf-8"
        codec = _UTF_CODECS.get(charset)
        if codec is None:
            raise Reject(f"unsupported charset {charset.upper()!r}; send the body as UTF-8", status=415)
        try:
            text = self.body.decode(codec)
        except UnicodeDecodeError as exc:
            raise Reject(f"the request body is not valid JSON: not {charset} ({_short(exc)})", status=400) from None
        return text.removeprefix("\ufeff")

    def json_object(self) -> dict[str, Any]:
        """The body as a JSON object; ``{"error": "invalid params: ..."}`` for any other JSON value."""
        data = self.json()
        if not isinstance(data, dict):
            raise Reject("invalid params: the body must be a JSON object")
        return data


#: The charsets the real server's body parser decodes (iconv-lite's UTF family), with Python's codec for each.
_UTF_CODECS = {
    "utf-8": "utf-8",
    "utf8": "utf-8",
    "utf-16": "utf-16",
    "utf-16le": "utf-16-le",
    "utf-16be": "utf-16-be",
    "utf-32": "utf-32",
    "utf-32le": "utf-32-le",
    "utf-32be": "utf-32-be",
}


def _charset(params: str) -> str | None:
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"').lower() or None
    return None


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "..."


@dataclass(slots=True)
class Response:
    """An answer: status, body, content type and extra headers (lower-case names)."""

    status: int
    body: bytes
    content_type: bytes = JSON_TYPE
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)


def dump(value: object) -> bytes:
    """Compact JSON as bytes (ASCII: any text, even lone surrogates, survives)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def ok(**fields: object) -> Response:
    """``{"ok": 1, ...}`` with status 200."""
    return Response(200, dump({"ok": 1, **fields}))


def error(message: str, status: int = 200, **extra: object) -> Response:
    """``{"error": message, ...}``; status 200 is the real server's answer to logical errors."""
    return Response(status, dump({"error": message, **extra}))
