"""Fault injection: the next N requests to an endpoint fail in a chosen way, so clients can be tested against them.

Kinds:

- ``500``: status 500, plain text ``Internal Server Error``;
- ``drop``: the connection is closed without any answer;
- ``commit-drop``: the request is handled as usual (an upload takes effect), then the connection is closed without
  the answer: a client cannot tell whether its write happened;
- ``delay``: the answer comes ``delay_seconds`` late (real time), and the request is otherwise handled normally;
- ``html``: status 502 with an HTML error page, as a proxy in front of the service answers;
- ``badjson``: status 200, ``Content-Type: application/json``, and a body that is not valid JSON.

Except ``delay`` and ``commit-drop``, a faulted request is not handled: nothing changes and nothing counts against
rate limits (it still counts as received). Faults for one endpoint are used in the order they were injected.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Literal, cast, get_args

from gitops.core.endpoints import endpoint_key
from gitops.standin.bounds import MAX_FAULT_COUNT, MAX_FAULT_DELAY

FaultKind = Literal["500", "drop", "commit-drop", "delay", "html", "badjson"]
FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)

#: Inject for this key to affect every endpoint (faults for the exact endpoint are used first).
ANY_ENDPOINT = "*"


@dataclass(frozen=True, slots=True)
class Fault:
    """One pending fault."""

    kind: FaultKind
    delay_seconds: float = 0.0


def normalize_endpoint(endpoint: str) -> str:
    """``"POST /api/user/code"`` from ``"post /api/user/code/"``; ``ValueError`` if it is not ``"METHOD /path"``."""
    if endpoint == ANY_ENDPOINT:
        return endpoint
    parts = endpoint.split()
    if len(parts) != 2 or not parts[1].startswith("/"):
        raise ValueError(f"expected an endpoint such as 'POST /api/user/code', got {endpoint!r}")
    return endpoint_key(parts[0], parts[1])


class Faults:
    """Pending faults by endpoint key. Thread-safe: tests inject from their own thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, deque[Fault]] = {}

    def inject(self, endpoint_key: str, kind: str, count: int = 1, delay_seconds: float = 0.0) -> None:
        """Make the next ``count`` requests to ``endpoint_key`` (``"POST /api/user/code"`` or ``"*"``) fail."""
        key = normalize_endpoint(endpoint_key)
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; expected one of {', '.join(FAULT_KINDS)}")
        # Capped: the faults are queued one by one, so a huge count would be a huge list.
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_FAULT_COUNT:
            raise ValueError(f"count must be an integer from 1 to {MAX_FAULT_COUNT}")
        if not 0 <= delay_seconds <= MAX_FAULT_DELAY:  # also refuses NaN
            raise ValueError(f"delay must be between 0 and {MAX_FAULT_DELAY:g} seconds")
        fault = Fault(cast(FaultKind, kind), float(delay_seconds))
        with self._lock:
            self._pending.setdefault(key, deque()).extend([fault] * count)

    def take(self, endpoint_key: str) -> Fault | None:
        """The fault for this request, if one is pending (and use it up)."""
        if not self._pending:  # the common case, without taking the lock
            return None
        with self._lock:
            for key in (endpoint_key, ANY_ENDPOINT):
                queue = self._pending.get(key)
                if queue:
                    fault = queue.popleft()
                    if not queue:
                        del self._pending[key]
                    return fault
        return None

    def clear(self) -> None:
        with self._lock:
            self._pending.clear()
