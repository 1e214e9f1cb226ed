"""The stand-in's bounds as a service: how large a request may be, how long its parts may take to arrive, and how
many connections it serves at once. A client that is slow, lies about its length or opens connections by the
thousand is cut off after a few seconds and never starves the others.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitops.core.endpoints import MAX_BODY_BYTES

#: The private server's body limit: body-parser with ``limit: '8mb'`` (8 MiB) in ``@screeps/backend``'s
#: ``lib/game/server.js``. A larger body is answered 413 before authentication, as there.
MAX_BODY = MAX_BODY_BYTES

#: Seconds a client has to send a request's whole header block (from the connection, or the end of the last answer).
HEADER_TIMEOUT = 5.0

#: Seconds a client has to send a request's whole body once its headers arrived (8 MiB on loopback takes ms).
BODY_TIMEOUT = 10.0

#: Seconds an idle keep-alive connection stays open (uvicorn's default).
KEEP_ALIVE_TIMEOUT = 5

#: Open connections served at once; a request arriving while this many are open is answered 503 at once.
MAX_CONNECTIONS = 256

#: Largest ``count`` of ``/__standin__/fault`` (a test that needs more injects again).
MAX_FAULT_COUNT = 1000

#: Largest ``delay`` of a ``delay`` fault, in seconds.
MAX_FAULT_DELAY = 600.0

#: Largest step of ``/__standin__/advance``: ten years, far beyond any rate-limit window or grant.
MAX_ADVANCE_SECONDS = 10 * 366 * 24 * 3600


@dataclass(frozen=True, slots=True)
class ServiceBounds:
    """The bounds of one stand-in; tests shorten the timeouts to show them in a second."""

    max_body: int = MAX_BODY
    header_timeout: float = HEADER_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    keep_alive_timeout: int = KEEP_ALIVE_TIMEOUT
    max_connections: int = MAX_CONNECTIONS
