"""The game client: every request to a game server, and nothing else that talks to one over HTTP.

Importing this package imports httpx, which a plan whose lists were read ahead never needs:
so nothing on that path imports it at its top. The session opens its clients through one lazy import (the HTTP
client boundary of ``docs/architecture.md``); everything else imports it only when it sends a request anyway. The
modules: :mod:`.client` (the requests and their envelopes), :mod:`.auth` (one login per kind), :mod:`.failures`
(what goes wrong, in words), :mod:`.ratelimits` (pacing and 429s), :mod:`.retries` (tenacity, at the first failure),
:mod:`.inflight` (the writes a Ctrl-C may cut) and :mod:`.observer` (what is told of what the client learns).
"""

from __future__ import annotations

from gitops.core.tokens import TokenInfo
from gitops.edges.service.client import ReadOnlyClient, ServiceClient
from gitops.edges.service.failures import proxy_variable, transport_detail
from gitops.edges.service.observer import DeferredObserver, Observer

__all__ = [
    "DeferredObserver",
    "Observer",
    "ReadOnlyClient",
    "ServiceClient",
    "TokenInfo",
    "proxy_variable",
    "transport_detail",
]
