"""The game client: every request to a game server, and nothing else that talks to one over HTTP.

This package file imports nothing, so that the parts without httpx can be imported alone: the head start writes a
branch list before httpx is imported, with the very code that makes every request (:mod:`.outgoing`). The modules:
:mod:`.client` (the client: its requests and their envelopes; importing it imports httpx, which a plan whose lists
were read ahead never needs, so the session imports it lazily, the HTTP client boundary of
``docs/architecture.md``), :mod:`.outgoing` (a request before the wire: headers, login, pacing, the ledger's count,
an answer's effects), :mod:`.auth` (one login per kind), :mod:`.ratelimits` (pacing and 429s), :mod:`.observer`
(what is told of what the client learns), :mod:`.transport` (the connection pool and the early connection),
:mod:`.requestbodies` (request bodies), :mod:`.failures` (what goes wrong, in words), :mod:`.retries` (tenacity, at
the first failure), :mod:`.inflight` (the writes a Ctrl-C may cut) and :mod:`.colonyread` (a colony's reads).
"""
