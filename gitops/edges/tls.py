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
from collections.abc import Mapping


def trust_context(environ: Mapping[str, str] | None = None) -> ssl.SSLContext:
    """A new client TLS context that verifies servers (and their host names) against ``SSL_CERT_FILE`` (a PEM file)
    when set, else ``SSL_CERT_DIR`` (a folder of hashed certificates), else certifi's bundle: what httpx does by
    default. ``environ`` defaults to the process's environment."""
    env = os.environ if environ is None else environ
    if env.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=env["SSL_CERT_FILE"])
    if env.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=env["SSL_CERT_DIR"])
    import certifi  # installed with httpx

    return ssl.create_default_context(cafile=certifi.where())
