"""The headers every request of the tool carries, in a module of the standard library only.

:class:`gitops.edges.client.ServiceClient` gives them to its HTTP client, and the branch list sent ahead on the early
connection (:func:`gitops.edges.early.request_head`) writes the same before the HTTP client is even imported.
"""

from __future__ import annotations

from gitops import __version__

#: The client's own headers (the HTTP client adds ``Host``, ``Connection`` and ``Accept-Encoding``).
CLIENT_HEADERS = {"User-Agent": f"screeps-gitops/{__version__}", "Accept": "application/json"}

#: The answer encodings the tool decodes (:func:`gitops.edges.http.send_bounded` asks for them).
ACCEPT_ENCODINGS = ("gzip", "deflate")
