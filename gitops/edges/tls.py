"""The certificate authorities the tool trusts, in one place for every connection it makes to a game server.

The HTTP client (httpx) and the game's websocket (websockets) would each make their own: httpx from certifi's
bundle unless ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` names another, websockets from the system's store. A machine
whose Python has no system store (python.org's macOS builds before "Install Certificates") would then deploy and
fail the verification that follows on the socket. :func:`trust_context` is httpx's own rule, given to both.
Verification is never turned off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ssl


def trust_context() -> ssl.SSLContext:
    """A new client TLS context that verifies servers (and their host names) against ``SSL_CERT_FILE`` (a PEM file)
    when set, else ``SSL_CERT_DIR`` (a folder of hashed certificates), else certifi's bundle: httpx's default,
    made by httpx itself (``httpx.create_ssl_context``, imported only here, when a TLS connection is made)."""
    import httpx

    return httpx.create_ssl_context()
