"""The one logging filter that scrubs a library's records (``gitops/edges/redactlog.py``)."""

from __future__ import annotations

import logging

import pytest

from gitops.edges.redactlog import RedactingFilter, scrub_logger
from gitops.secrets import register


def test_a_record_loses_known_secrets_and_what_the_loggers_own_rule_hides(caplog: pytest.LogCaptureFixture) -> None:
    register("tok-REDACTLOG-0123456789")
    name = "gitops.test.redactlog"
    scrub_logger(name, lambda text: text.replace("frame-secret", "<frame>"))
    scrub_logger(name)  # a second call (a module imported again) adds no second filter
    logger = logging.getLogger(name)
    assert sum(isinstance(f, RedactingFilter) for f in logger.filters) == 1
    with caplog.at_level(logging.DEBUG, logger=name):
        logger.debug("GET /api?token=%s and %s", "tok-REDACTLOG-0123456789", "frame-secret")
    (record,) = [r for r in caplog.records if r.name == name]
    assert "tok-REDACTLOG-0123456789" not in record.getMessage()
    assert "frame-secret" not in record.getMessage()
    assert "<frame>" in record.getMessage()
    assert record.args is None  # folded in and scrubbed: no argument is left to format unscrubbed


def test_the_http_and_socket_loggers_are_scrubbed() -> None:
    import gitops.edges.service.failures
    import gitops.edges.socket  # noqa: F401 - each puts its filter on import

    for name in ("httpx", "gitops.socket.wire"):
        assert any(isinstance(f, RedactingFilter) for f in logging.getLogger(name).filters), name
