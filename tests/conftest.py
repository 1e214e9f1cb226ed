"""Fixtures shared by the whole test suite. Keep it small; add fixtures with targeted edits."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gitops.server.testing import DEMO_ACCOUNTS, StandIn, running_standin


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[StandIn]:
    """The stand-in service on an ephemeral loopback port, with ``DEMO_ACCOUNTS``, a fresh SQLite file and a
    ``ManualClock`` (``standin.clock.advance(3600)`` moves it an hour)."""
    data = tmp_path / "standin"
    data.mkdir()
    with running_standin(DEMO_ACCOUNTS, data / "standin.sqlite3") as service:
        yield service
