"""``gitops init``'s question to a private server: how does it sign in?

A private server that answers ``GET /api/version`` says whether it takes a user name and password
(screepsmod-auth); init writes the manifest's sign-in from that answer. The question goes out only for a server
that is not the official one and when no way to sign in was named, so the HTTP library is imported by init only
then (this module is imported by ``gitops init`` where it asks). No credentials are sent, and a server that does
not answer in time or answers too much is treated as one that said nothing.
"""

from __future__ import annotations

import time

import httpx

from gitops.edges.http import AnswerTooLarge, send_bounded
from gitops.edges.tls import trust_context

#: How long ``gitops init`` waits for a server's ``/api/version`` (it only helps to guess how the server signs in):
#: the whole exchange, connecting to the last byte of the body.
PROBE_SECONDS = 2.0
#: The largest ``/api/version`` answer read, decoded (a real one is a few hundred bytes).
PROBE_CAP = 64 * 1024


def probe_version(url: str) -> dict[str, object] | None:
    """The JSON object a server answers to ``GET /api/version`` (no credentials are sent), or ``None`` when it
    cannot be reached, does not answer whole in :data:`PROBE_SECONDS` (a byte at a time), answers more than
    :data:`PROBE_CAP` decoded bytes (a gzip bomb), or answers something else. One request, no retry, no redirect."""
    deadline = time.monotonic() + PROBE_SECONDS
    try:
        # No proxy and no .netrc (trust_env=False), as every connection of the tool; but the same authorities as
        # the client's (SSL_CERT_FILE/SSL_CERT_DIR), which trust_env=False would drop.
        verify = trust_context() if url.lower().startswith("https://") else True
        with httpx.Client(timeout=PROBE_SECONDS, follow_redirects=False, trust_env=False, verify=verify) as client:
            request = client.build_request("GET", url.rstrip("/") + "/api/version")
            answer = send_bounded(client, request, cap=PROBE_CAP, deadline=deadline)
            if answer.status_code != 200:
                return None
            data = answer.json()
    except (httpx.HTTPError, ValueError, AnswerTooLarge):
        return None
    return data if isinstance(data, dict) else None
