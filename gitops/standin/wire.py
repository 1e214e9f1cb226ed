"""Requests, responses and the error envelope of the stand-in, independent of the ASGI plumbing.

The handlers answer as the real server does (``{"ok": 1, ...}``, and HTTP 200 with ``{"error": "..."}`` for a
logical error), and they are easier to read and test as functions from a :class:`Request` to a :class:`Response`
than as ASGI callables. So the request is parsed once here (its JSON read as JavaScript's ``JSON.parse`` would,
refusing ``NaN``), and a handler refuses a request by raising :class:`Reject`, which the app turns into the envelope.
"""

from __future__ import annotations

import json
import math
import re
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
        """The body as JSON, read as the private server's body parser (express ``body-parser.json``, strict) reads it.

        :class:`Reject` 415 if it is not sent as JSON (or in a charset that parser refuses), 400 if it is not JSON or
        not an object or array. An empty body is ``{}``; a number beyond the double range (``1e400``) is ``None``, as
        ``JSON.stringify(Infinity)`` writes it; nesting deeper than Python's parser goes is answered with the error
        Node gives for deeper nesting (``docs/serve.md``, "Differences").
        """
        if self._json is _NO_BODY:
            text = self._text()
            if not text:
                self._json = {}
                return self._json
            if text.lstrip(" \t\n\r")[:1] not in ("{", "["):
                raise Reject("the request body is not valid JSON: strict JSON is an object or an array", status=400)
            try:
                self._json = json.loads(text, parse_constant=_reject_constant, parse_float=_js_float, parse_int=_js_int)
            except RecursionError:
                raise Reject("RangeError: Maximum call stack size exceeded") from None
            except ValueError as exc:
                raise Reject(f"the request body is not valid JSON: {_short(exc)}", status=400) from None
        return self._json

    def _text(self) -> str:
        """The body as text, read as the private server's body parser (express ``body-parser.json``) reads it.

        Only the media type ``application/json`` is JSON (``application/vnd.api+json`` is not: the real server leaves
        such a body unread, as it leaves a malformed ``Content-Type`` such as ``application/json; charset``); the
        charset must be UTF-8 (the default) or UTF-16LE: ``utf8``, ``utf-32`` and the rest are 415 there, ``utf-16``
        and ``utf-16be`` 403 (Node's "Unknown encoding"). Bytes that are not UTF-8 are read as U+FFFD, as Node reads
        them; a byte order mark at the start is skipped (iconv-lite strips it).
        """
        media, params = _content_type(self.headers.get("content-type", ""))
        if media != "application/json":
            got = "a malformed Content-Type" if media is None else repr(media or "no Content-Type")
            raise Reject(
                f"send the body as JSON with 'Content-Type: application/json; charset=utf-8' (got {got})", status=415
            )
        charset = params.get("charset", "utf-8")
        codec = _UTF_CODECS.get(charset)
        if codec is None:
            status = 403 if charset in _UNKNOWN_TO_NODE else 415
            raise Reject(f"unsupported charset {charset.upper()!r}; send the body as UTF-8", status=status)
        return self.body.decode(codec, errors="replace").removeprefix("\ufeff")

    def json_object(self) -> dict[str, Any]:
        """The body as a JSON object; ``{"error": "invalid params: ..."}`` for any other JSON value."""
        data = self.json()
        if not isinstance(data, dict):
            raise Reject("invalid params: the body must be a JSON object")
        return data


#: The charsets the real server's body parser decodes, with Python's codec for each (body-parser lower-cases it).
_UTF_CODECS = {"utf-8": "utf-8", "utf-16le": "utf-16-le"}

#: ``utf-*`` charsets that body-parser passes on and Node then refuses with 403 ("Unknown encoding").
_UNKNOWN_TO_NODE = frozenset({"utf-16", "utf-16be"})

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_PARAM = re.compile(r'\s*;\s*([!#$%&\'*+.^_`|~0-9A-Za-z-]+)=("(?:[^"\\]|\\.)*"|[!#$%&\'*+.^_`|~0-9A-Za-z-]+)')


def _content_type(header: str) -> tuple[str | None, dict[str, str]]:
    """The media type (lower case) and parameters of a ``Content-Type``, as npm ``content-type`` parses it; a media
    type of ``None`` for a header it refuses (a parameter without ``=value``, a trailing ``;``), which the body
    parser then leaves unread. ``""`` when there is no header."""
    if not header.strip():
        return "", {}
    media, sep, rest = header.partition(";")
    media = media.strip().lower()
    if "/" not in media or not all(_TOKEN.fullmatch(part) for part in media.split("/", 1)):
        return None, {}
    params: dict[str, str] = {}
    rest = sep + rest
    position = 0
    while position < len(rest.rstrip()):
        found = _PARAM.match(rest, position)
        if found is None:
            return None, {}
        value = found.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        params[found.group(1).lower()] = value.lower() if found.group(1).lower() == "charset" else value
        position = found.end()
    return media, params


def _js_int(text: str) -> int | float | None:
    """A JSON integer; beyond the double range ``None``, as :func:`_js_float` (and never ``int()`` of 5,000 digits)."""
    return int(text) if len(text) <= 300 else _js_float(text)


def _js_float(text: str) -> float | None:
    """A JSON number with a fraction or exponent; ``None`` beyond the double range (JavaScript's ``Infinity``,
    which ``JSON.stringify`` writes as ``null``)."""
    value = float(text)
    return value if math.isfinite(value) else None


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
