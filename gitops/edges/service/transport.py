"""The game client's transport, the one seam between the client and the network: the connection pool, with the
connection the head start opened early as its first connection.

httpx's model: one client, and the transport the only seam. The client's requests, the branch list the head start
sent ahead among them, go through the transport made here (:func:`pool`); a test gives its own transport instead.
"""

from __future__ import annotations

import ssl

import httpx

from gitops.edges.early import EarlyConnection
from gitops.edges.earlypool import use_early
from gitops.edges.headers import KEEPALIVE_SECONDS
from gitops.edges.http import Connections
from gitops.edges.tls import trust_context

__all__ = ["EARLY_CONTEXT_SECONDS", "pool"]

#: The longest a client waits for the TLS context its early connection makes first thing (the trust store); past
#: it, it makes its own, and its pool then shakes hands itself on a new connection.
EARLY_CONTEXT_SECONDS = 5.0


def pool(base_url: str, early: EarlyConnection | None, connections: Connections) -> httpx.BaseTransport:
    """The connection pool of a client of ``base_url``: TLS only for ``https://``, ``early`` (when given) as its
    first connection; each connection's socket is told to ``connections`` (the deadline's watchdog)."""
    # An idle connection is dropped after a few seconds, before servers drop theirs (Node's default is 5 s), so
    # that a request never races the server closing the connection it reuses.
    limits = httpx.Limits(keepalive_expiry=KEEPALIVE_SECONDS)
    if base_url.lower().startswith("http://"):
        # A plain-HTTP server (a private server, the stand-in) needs no TLS: httpx's default transport would
        # load the whole CA bundle into an SSL context for nothing. This context has no trust store, so the
        # client could not speak TLS to anyone even if a request went to https://.
        transport = httpx.HTTPTransport(verify=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), limits=limits)
    else:
        # httpx's own default, made where the game socket makes its own too (one rule for both); the very
        # context the early connection's TLS handshake used, when it made one (gitops.edges.early).
        made = early.ssl_context(EARLY_CONTEXT_SECONDS) if early is not None else None
        transport = httpx.HTTPTransport(verify=made or trust_context(), limits=limits)
    if early is not None:
        use_early(transport, early, connections.remember)
    return transport
