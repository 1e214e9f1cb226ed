"""Compressed request bodies, read as the private server's body parser reads them.

express ``body-parser`` (``inflate: true`` by default, which ``@screeps/backend`` keeps) takes a body sent with
``Content-Encoding: deflate`` (zlib format) or ``gzip``, inflates it as it arrives, and applies its ``8mb`` limit to
the **inflated** size: a small compressed body that inflates past the limit is refused with the same 413. Any other
encoding is 415 (``unsupported content encoding "br"``); a body that does not inflate is 400.
"""

from __future__ import annotations

import zlib

from gitops.standin.wire import Reject

#: zlib's ``wbits`` per encoding: the zlib wrapper for deflate (as Node's ``createInflate``), the gzip one for gzip.
_WBITS = {"deflate": zlib.MAX_WBITS, "gzip": 16 + zlib.MAX_WBITS}

#: How much compressed input is inflated per step, so that the output can be checked against the limit as it grows.
_STEP = 64 * 1024


class TooLarge(Exception):
    """The inflated body is over the limit."""


def inflate(encoding: str | None, body: bytes, limit: int) -> bytes:
    """``body`` decoded for its ``Content-Encoding`` (``None`` or ``identity``: as it is); :class:`TooLarge` once the
    inflated size passes ``limit``; :class:`Reject` (415, 400) for an encoding it does not take or a broken body."""
    name = (encoding or "identity").strip().lower()
    if name == "identity":
        return body
    wbits = _WBITS.get(name)
    if wbits is None:
        raise Reject(f'unsupported content encoding "{name}"; send the body as it is, or with deflate or gzip', 415)
    decoder = zlib.decompressobj(wbits)
    out: list[bytes] = []
    size = 0
    try:
        for start in range(0, len(body), _STEP):
            pending = body[start : start + _STEP]
            while pending:
                chunk = decoder.decompress(pending, limit + 1 - size)
                size += len(chunk)
                if size > limit:
                    raise TooLarge
                out.append(chunk)
                pending = decoder.unconsumed_tail
        tail = decoder.flush()
    except zlib.error as exc:
        raise Reject(f"the request body does not inflate as {name}: {exc}", 400) from None
    size += len(tail)
    if size > limit:
        raise TooLarge
    if not decoder.eof:
        raise Reject(f"the request body does not inflate as {name}: it ends early", 400)
    out.append(tail)
    return b"".join(out)
