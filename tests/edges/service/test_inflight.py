"""``gitops/edges/service/inflight.py``: the writes sent and not answered, which a Ctrl-C names once."""

from __future__ import annotations

import pytest

from gitops.edges.service.inflight import in_flight, writes_in_flight


def test_a_write_is_in_flight_only_while_it_is_sent() -> None:
    assert writes_in_flight() == []
    with in_flight("upload of local/main"):
        assert writes_in_flight() == ["upload of local/main"]
    assert writes_in_flight() == []


def test_a_write_cut_by_ctrl_c_is_named_once() -> None:
    def cut() -> None:
        with in_flight("upload of local/main"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cut()
    assert writes_in_flight() == ["upload of local/main"]
    assert writes_in_flight() == []


def test_another_failure_is_not_a_cut() -> None:
    def fails() -> None:
        with in_flight("activation of main"):
            raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        fails()
    assert writes_in_flight() == []
