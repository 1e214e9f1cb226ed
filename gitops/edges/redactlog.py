"""One logging filter that scrubs every record of a library's logger: httpx logs each request's URL (a token query
carries the token), the websockets library each frame (``auth`` carries it). Known secrets are redacted
(:func:`gitops.secrets.redact`), then the logger's own rule hides what only it knows; the arguments are folded into
the message first, so that no record carries them unscrubbed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from gitops.secrets import redact


class RedactingFilter(logging.Filter):
    """Scrubs every record it sees: known secrets redacted, then ``scrub`` (the logger's own rule, if any)."""

    def __init__(self, scrub: Callable[[str], str] | None = None) -> None:
        super().__init__()
        self._scrub = scrub

    def filter(self, record: logging.LogRecord) -> bool:
        text = redact(record.getMessage())
        record.msg = self._scrub(text) if self._scrub is not None else text
        record.args = None
        return True


def scrub_logger(name: str, scrub: Callable[[str], str] | None = None) -> None:
    """Put a :class:`RedactingFilter` on the logger ``name``, once (a module imported again adds none)."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, RedactingFilter) for f in logger.filters):
        logger.addFilter(RedactingFilter(scrub))
