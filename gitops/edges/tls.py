"""The certificate authorities the tool trusts, in one place for every connection it makes to a game server.

The HTTP client (httpx) and the game's websocket (websockets) would each make their own: httpx from certifi's
bundle unless ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` names another, websockets from the system's store. A machine
whose Python has no system store (python.org's macOS builds before "Install Certificates") would then deploy and
fail the verification that follows on the socket. :func:`trust_context` is httpx's own rule, given to both.
Verification is never turned off.
"""

from __future__ import annotations

import os
import ssl


def trust_context() -> ssl.SSLContext:
    """A new client TLS context that verifies servers (and their host names) against ``SSL_CERT_FILE`` (a PEM file)
    when set, else ``SSL_CERT_DIR`` (a folder of hashed certificates), else certifi's bundle: httpx's default,
    made by httpx itself (``httpx.create_ssl_context``, imported only here, when a TLS connection is made)."""
    import httpx  # noqa: PLC0415 (boundary: the HTTP client)

    return httpx.create_ssl_context()


def trust_context_early() -> ssl.SSLContext:
    """:func:`trust_context`'s context, made without importing httpx: the early connection's TLS handshake
    (:mod:`gitops.edges.early`) makes it first thing, and the client's pool then uses that very object. A plan that
    finds nothing changed never imports the HTTP client (issue 23); importing httpx only for its rule would cost such a
    run over ``https://`` the whole import of httpx. This is httpx's rule (``httpx.create_ssl_context()``, verify and
    trust_env on) written out; ``tests/edges/test_tls.py`` checks that the two make the same context in each of its
    three cases, so that an httpx that changes its rule fails there."""
    # httpx's own dependency, as its rule imports it; with importlib.resources it would cost every run that imports
    # the client over http:// (the private server, the stand-in), which never makes a TLS context.
    import certifi  # noqa: PLC0415 (boundary: certifi)

    if os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    if os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
    return ssl.create_default_context(cafile=certifi.where())
