"""Fixtures for the suite that runs against the real npm Screeps private server (``tests/private/harness.py``).

``private_server`` starts one server per test session (about 2 s once installed), pauses its world (no test of it
needs ticks), registers a user and stops the server's whole process group at the end, also when tests fail.
``private_user`` registers a fresh user on that server for tests that must not see each other's branches (a user
has at most 30).

A missing install fails these tests (it does not skip them): run ``bash scripts/private-server.sh install``.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from tests.private.harness import Credentials, PrivateServer, PrivateServerError, ServerUser, install_problem

PRIVATE_FIXTURES = frozenset({"private_server", "private_user", "ticking_server"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Every test that uses the real server carries the marker, so `-m "not private_server"` leaves them out.
    for item in items:
        if PRIVATE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.private_server)


@pytest.fixture(scope="session")
def private_server() -> Iterator[PrivateServer]:
    """The running private server, with a registered default user (``username``, ``email``, ``password``)."""
    problem = install_problem()
    if problem:
        pytest.fail(problem, pytrace=False)
    try:
        server = PrivateServer.start()
    except PrivateServerError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        # No test of this shared server needs the world to run (those that do start a ticking server of their own),
        # and a running world's engine once crashed the server's storage ("TypeError: fun is not a function" in
        # lokijs, under load, during a registration), failing every later test of the session: it is paused.
        server.cli("system.pauseSimulation()")
        server.register(Credentials("GitopsTester", "gitops-tester@example.invalid", secrets.token_urlsafe(12)))
        yield server
    finally:
        server.stop()


@pytest.fixture
def private_user(private_server: PrivateServer) -> ServerUser:
    """A user of its own on the session's private server (only the ``default`` branch, active for both)."""
    return private_server.register()
