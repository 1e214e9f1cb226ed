"""Whether a server's uploads go compressed: one rule, asked by the session before an upload and by the head start
before the branch list is even read. Pure: what is known is given.

The manifest's ``compress`` decides, and ``auto`` decides from what is known of the server: the ledger's record (of
the compression probe, or of an answer that said ``Accept-Encoding: deflate``), else a password sign-in (the npm
private server with screepsmod-auth, whose body parser inflates ``deflate`` and ``gzip`` bodies), else the probe,
when the branch list shows that the probe's branch name is free.
"""

from __future__ import annotations

from typing import Literal

#: What is decided: compressed, not, or not known until the probe answers.
Compression = Literal["on", "off", "probe"]


def upload_compression(
    mode: Literal["auto", "always", "never"], known: bool | None, *, signs_in: bool, probe_free: bool | None
) -> Compression:
    """Whether uploads go compressed. ``known``: the ledger's record (``None``: nothing recorded); ``signs_in``: the
    login is a private server's sign-in; ``probe_free``: whether the probe's branch name is free on the server, as
    its branch list shows (``None``: no list is known, and so no probe can be sent safely)."""
    if mode != "auto":
        return "on" if mode == "always" else "off"
    if known is not None:
        return "on" if known else "off"
    if signs_in:
        return "on"
    return "probe" if probe_free else "off"


def may_compress(mode: Literal["auto", "always", "never"], known: bool | None, *, signs_in: bool) -> bool:
    """Whether uploads may go compressed, before the branch list is read (the head start deflates their bodies
    ahead only then): whether :func:`upload_compression` may say other than ``off`` whatever the list shows."""
    return any(upload_compression(mode, known, signs_in=signs_in, probe_free=free) != "off" for free in (True, False))
