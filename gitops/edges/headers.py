"""The headers every request of the tool carries, and how long its connections are kept, in a module of the standard
library only.

:class:`gitops.edges.client.ServiceClient` gives them to its HTTP client, and the branch list sent ahead on the early
connection (:func:`gitops.edges.early.request_head`) writes the same before the HTTP client is even imported.
"""

from __future__ import annotations

from gitops import __version__

#: The client's own headers (the HTTP client adds ``Host``, ``Connection`` and ``Accept-Encoding``).
CLIENT_HEADERS = {"User-Agent": f"screeps-gitops/{__version__}", "Accept": "application/json"}

#: The answer encodings the tool decodes (:func:`gitops.edges.http.send_bounded` asks for them).
ACCEPT_ENCODINGS = ("gzip", "deflate")

#: How long an idle kept-alive connection is reused: a run's requests follow each other within a second or two (the
#: branch list, then the plan is built and printed, then the upload: a TLS handshake and a round trip saved); after a
#: rate-limit wait the next request opens a new connection. Servers drop theirs later (Node's default is 5 s).
KEEPALIVE_SECONDS = 3.0

#: The longest one request may take, retries included (the client's ``timeout``, which tests lower).
REQUEST_SECONDS = 30.0
