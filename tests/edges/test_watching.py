"""``gitops/edges/watching.py``: the file changes of a real folder, as deploy on save reads them."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from gitops.edges.watching import file_changes


def test_a_written_file_is_seen_and_a_quiet_wait_ends_with_nothing(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    with file_changes(tmp_path, timeout=0.5) as source:
        assert source.changes(0.5) == set()  # nothing happened: the wait ends at the timeout
        target = tmp_path / "src" / "main.js"
        target.write_text("x", encoding="utf-8")
        seen: set[Path] = set()
        deadline = time.monotonic() + 10
        while target not in seen and time.monotonic() < deadline:
            seen |= source.changes(0.5)
        assert target in seen


def test_a_stopped_watch_returns_nothing_and_stays_stopped(tmp_path: Path) -> None:
    stop = threading.Event()
    with file_changes(tmp_path, timeout=0.2, stop=stop) as source:
        stop.set()
        assert source.changes(0.2) == set()
        assert stop.is_set()
