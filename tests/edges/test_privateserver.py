"""A world whose server stops answering (``gitops.edges.privateserver``): a rehearsal error, and a fresh world once.
No server runs here. (The install checks are ``tests/edges/test_serverinstall.py``'s.)"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from gitops.app.rehearsal import once_more_if_lost
from gitops.edges.privateserver import World, WorldLost
from gitops.errors import ExitCode, RehearsalError

ROOT = Path(__file__).resolve().parents[2]


def test_an_admin_cli_that_does_not_answer_is_a_rehearsal_error_not_a_crash() -> None:
    """A world whose server stopped (or never listened) refuses the CLI's connection: exit 14 with the port named,
    not "internal error (ConnectionRefusedError)" (seen once under load, bench/README.md)."""
    with socket.socket() as probe:  # a loopback port nobody listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        world = World.__new__(World)  # only the CLI's port is needed; starting a server is the private tests' job
        world.cli_port = probe.getsockname()[1]
        with pytest.raises(RehearsalError) as caught:
            world.cli("1 + 1", timeout=5.0)
    assert caught.value.exit_code == ExitCode.REHEARSAL_UNKNOWN
    assert f"admin CLI on 127.0.0.1:{world.cli_port} did not answer (ConnectionRefusedError)" in str(caught.value)


def test_a_lost_world_is_started_again_once_and_a_second_loss_is_the_verdict() -> None:
    """A world whose admin CLI stops answering is throwaway: the rehearsal starts fresh worlds once (saying so), and
    exits 14 when they are lost too."""
    said: list[str] = []
    attempts: list[int] = []

    def lost_then(result: str | None) -> Callable[[], str]:
        def run() -> str:
            attempts.append(1)
            if len(attempts) == 1 or result is None:
                raise WorldLost("the private server's admin CLI on 127.0.0.1:1 did not answer (ConnectionResetError)")
            return result

        return run

    assert once_more_if_lost(lost_then("ran"), said.append) == "ran"
    assert len(attempts) == 2
    assert said == [
        "rehearse: the private server's admin CLI on 127.0.0.1:1 did not answer (ConnectionResetError); starting "
        "fresh throwaway world(s), once"
    ]
    attempts.clear()
    with pytest.raises(WorldLost) as caught:
        once_more_if_lost(lost_then(None), said.append)
    assert len(attempts) == 2
    assert caught.value.exit_code == ExitCode.REHEARSAL_UNKNOWN
    other: list[int] = []

    def refused() -> str:  # any other failure of the world is not retried
        other.append(1)
        raise RehearsalError("the private server's world has no free room left for another bot")

    with pytest.raises(RehearsalError):
        once_more_if_lost(refused, said.append)
    assert other == [1]
