"""What the client tells about what it learns: the :class:`Observer` it is given, and the two it makes itself.

The client never writes a file; what it learns (requests sent, rate-limit headers, branch states, the token's
unlimited period) goes to an observer the caller supplies, which saves it once per logical step (the ledger is one).
A client nobody listens to still paces its own requests (:class:`Unobserved`), and a client sending beside the main
one, in another thread, keeps what it learns for the observer's own thread (:class:`DeferredObserver`): the ledger
is not thread-safe. No httpx here: the protocol is what the rest of the tool types against.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Protocol

from gitops.config.manifest import ActiveName
from gitops.core.endpoints import MINUTE
from gitops.core.remote import BranchInfo, RemoteBranch
from gitops.edges.clock import Clock

__all__ = ["DeferredObserver", "Observer", "Unobserved"]


class Observer(Protocol):
    """What the client tells about what it learns, and the two facts it asks back to pace its requests.

    :class:`gitops.edges.ledger.Ledger` implements it (in memory; the session saves it). Every method is called
    synchronously, in the order the client learns things; ``record_sent`` comes before the request is sent.
    """

    def record_sent(self, endpoint: str) -> None:
        """One request to ``endpoint`` is about to be sent, now."""
        ...

    def record_unsent(self, endpoint: str) -> None:
        """The request to ``endpoint`` just recorded never reached the server (no connection was made)."""
        ...

    def record_response(self, endpoint: str, status: int, headers: Mapping[str, str]) -> None:
        """An answer to ``endpoint`` arrived with these headers (``X-RateLimit-*`` among them, or not)."""
        ...

    def remember_branch(self, branch: RemoteBranch) -> None:
        """The state of a branch, learnt by a download or by the tool's own upload."""
        ...

    def forget_branch(self, name: str) -> None:
        """What the branch holds is no longer known."""
        ...

    def remember_branch_list(self, branches: list[BranchInfo]) -> None:
        """The account's branch list with its active flags, as listed now."""
        ...

    def remember_clone(self, name: str) -> None:
        """The branch ``name`` was created (its content is the server's copy, unknown here)."""
        ...

    def remember_activation(self, name: str, which: ActiveName) -> None:
        """The branch ``name`` was made active for the world or the simulation."""
        ...

    def set_unlimited_until(self, until: float | None) -> None:
        """The token query's answer: the end of the unlimited period, or ``None``."""
        ...

    def sent_times(self, endpoint: str, seconds: float) -> list[float]:
        """When the requests of the last ``seconds`` to ``endpoint`` (or to any, for ``GLOBAL_KEY``) were sent."""
        ...

    @property
    def unlimited_until(self) -> float | None:
        """The end of the token's unlimited period as known (``None``: limited)."""
        ...


class Unobserved:
    """The observer of a client nobody listens to: it only remembers send times, to pace this run's requests."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._sent: list[float] = []

    def record_sent(self, endpoint: str) -> None:
        now = self._clock.now()
        self._sent = [t for t in self._sent if t > now - MINUTE]
        self._sent.append(now)

    def record_unsent(self, endpoint: str) -> None:
        if self._sent:
            self._sent.pop()

    def record_response(self, endpoint: str, status: int, headers: Mapping[str, str]) -> None:
        pass

    def remember_branch(self, branch: RemoteBranch) -> None:
        pass

    def forget_branch(self, name: str) -> None:
        pass

    def remember_branch_list(self, branches: list[BranchInfo]) -> None:
        pass

    def remember_clone(self, name: str) -> None:
        pass

    def remember_activation(self, name: str, which: ActiveName) -> None:
        pass

    def set_unlimited_until(self, until: float | None) -> None:
        pass

    def sent_times(self, endpoint: str, seconds: float) -> list[float]:
        since = self._clock.now() - seconds
        return [t for t in self._sent if t > since]

    @property
    def unlimited_until(self) -> float | None:
        return None


class DeferredObserver:
    """The observer of a side client (a request sent beside the main one, on a connection of its own:
    :mod:`gitops.app.headstart.sidereads`): it keeps what the request teaches and hands it to the real observer when
    :meth:`replay` is called, in the thread that owns that observer (the ledger is not thread-safe, and its owner
    saves it while the side request runs). The two facts a client asks back are read from the real observer: a
    side request's pacing so sees the main thread's requests, and the main thread sees the side request's once it is
    replayed (at most the few side requests of a run are paced a moment late)."""

    def __init__(self, real: Observer) -> None:
        self._real = real
        self._calls: list[tuple[str, tuple[Any, ...]]] = []
        self._lock = threading.Lock()

    def _keep(self, name: str, *args: Any) -> None:
        with self._lock:
            self._calls.append((name, args))

    def replay(self) -> None:
        """Tell the real observer everything kept so far, in order."""
        with self._lock:
            calls, self._calls = self._calls, []
        for name, args in calls:
            method = getattr(self._real, name, None)  # remember_scope: only the ledger has it
            if method is not None:
                method(*args)

    def record_sent(self, endpoint: str) -> None:
        self._keep("record_sent", endpoint)

    def record_unsent(self, endpoint: str) -> None:
        self._keep("record_unsent", endpoint)

    def record_response(self, endpoint: str, status: int, headers: Mapping[str, str]) -> None:
        self._keep("record_response", endpoint, status, dict(headers))

    def remember_branch(self, branch: RemoteBranch) -> None:
        self._keep("remember_branch", branch)

    def forget_branch(self, name: str) -> None:
        self._keep("forget_branch", name)

    def remember_branch_list(self, branches: list[BranchInfo]) -> None:
        self._keep("remember_branch_list", list(branches))

    def remember_clone(self, name: str) -> None:
        self._keep("remember_clone", name)

    def remember_activation(self, name: str, which: ActiveName) -> None:
        self._keep("remember_activation", name, which)

    def set_unlimited_until(self, until: float | None) -> None:
        self._keep("set_unlimited_until", until)

    def remember_scope(self, full: bool, endpoints: tuple[str, ...]) -> None:
        self._keep("remember_scope", full, endpoints)

    def sent_times(self, endpoint: str, seconds: float) -> list[float]:
        return self._real.sent_times(endpoint, seconds)

    @property
    def unlimited_until(self) -> float | None:
        return self._real.unlimited_until
