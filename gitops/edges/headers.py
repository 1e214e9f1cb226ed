"""The headers every request of the tool carries, how long its connections are kept and how an answer's content coding
is undone, in a module of the standard library only.

Every request's headers are :func:`request_headers`' (asked through
:meth:`gitops.edges.service.outgoing.Outgoing.headers`): the game client hands them to httpx, and the branch list
sent ahead on the early connection (:func:`gitops.edges.early.request_head`) writes them before httpx is imported.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

from gitops import __version__

if TYPE_CHECKING:
    from zlib import _Decompress

#: The tool's own headers.
CLIENT_HEADERS = {"User-Agent": f"screeps-gitops/{__version__}", "Accept": "application/json"}

#: The answer encodings the tool decodes (:func:`gitops.edges.http.send_bounded` asks for them).
ACCEPT_ENCODINGS = ("gzip", "deflate")


def request_headers(login: Mapping[str, str]) -> dict[str, str]:
    """The headers of a request to a game server but ``Host`` (its URL's): the tool's own, the content codings it
    decodes, a kept-alive connection, and the ``login``'s."""
    return {**CLIENT_HEADERS, "Accept-Encoding": ", ".join(ACCEPT_ENCODINGS), "Connection": "keep-alive", **login}


#: zlib's window bits for each content coding the tool decodes (``x-gzip`` is gzip's old name).
_WINDOW_BITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
#: The content codings :func:`inflater` undoes.
INFLATED_CODINGS = frozenset(_WINDOW_BITS)


def inflater(coding: str, *, raw: bool = False) -> _Decompress:
    """A new inflater of an answer's ``coding`` (one of :data:`INFLATED_CODINGS`). ``deflate`` is zlib-wrapped by the
    standard and raw deflate from some servers: a caller whose first bytes fail to inflate asks again with ``raw``, for
    ``deflate`` only. Shared by the HTTP client's streaming decoder (:mod:`gitops.edges.http`) and the answer read on
    the early connection (:mod:`gitops.edges.early`)."""
    return zlib.decompressobj(-zlib.MAX_WBITS if raw else _WINDOW_BITS[coding])


#: How long an idle kept-alive connection is reused: a run's requests follow each other within a second or two (the
#: branch list, then the plan is built and printed, then the upload: a TLS handshake and a round trip saved); after a
#: rate-limit wait the next request opens a new connection. Servers drop theirs later (Node's default is 5 s).
KEEPALIVE_SECONDS = 3.0

#: The longest one request may take, retries included (the client's ``timeout``, which tests lower).
REQUEST_SECONDS = 30.0
