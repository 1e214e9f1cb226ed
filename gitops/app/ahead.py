"""Reads asked ahead of need, beside a server's planning requests (issue 23).

Planning a server asks, one after another on one connection: the branch list, the download of each branch the
ledger cannot vouch for, and (before anything is written) the token query for the token's scope. On an internet
path each of those is a round trip. When the ledger shows that planning will ask some of them anyway, they are sent
at the start, each by a side client on a connection of its own, at the same time as the branch list:

- the token query (not rate limited), when the ledger has not learnt the token's scope (within a day);
- on the official server (whose branch list carries no code; elsewhere the list is the download), with
  ``--refresh=auto`` or ``always``, the download of each branch that the ledger knows nothing of (a first contact:
  planning downloads such a branch unless the branch list shows it missing), when those downloads fit what remains
  of ``GET /api/user/code`` (checked before any is sent, as planning checks its own). A branch the list then shows
  missing has cost one download of the 60 an hour that a plan asking one request at a time would not have spent;
  the ledger counts it.

Only for token logins: a password login signs in first, and the private server's branch list carries the code. At
most :data:`MOST` reads per server are sent ahead; the rest are asked in order as before. A fresh ledger's server
gets that many connections opened early too (:meth:`gitops.app.session.Session.connect_early`), so that their
handshakes run while the tool starts.

With ``apply --yes`` the compression probe (:meth:`gitops.app.session.Session.compression`), when it is due, is
sent the same way as soon as the branch list shows that its branch does not exist, beside the downloads, instead of
after the plan is shown: its answer is kept in the ledger, so a later deploy needs no probe even when this run
turns out to change nothing, and the plan says it was asked.

Each side client's observer is a :class:`~gitops.edges.service.DeferredObserver`: what a read teaches reaches the
ledger in the server's own thread, when its answer is taken (:meth:`Ahead.download`) or when planning the server
ends (:meth:`Ahead.finish`); a read nobody needed is still told to the ledger (its request counts). A download that
failed raises its error where the download would have been sent in order; a failed token query is left to planning,
which asks again if it needs the scope.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gitops.config.manifest import LoadedManifest, deployed_names
from gitops.core.codeset import CodeSet
from gitops.core.endpoints import is_official
from gitops.errors import BudgetError, GitopsError

if TYPE_CHECKING:
    from gitops.app.session import Session
    from gitops.edges.service import DeferredObserver, ServiceClient

#: The most reads sent ahead per server (and so side connections opened for it).
MOST = 3


class _Read:
    """One read in its own thread, by its own side client."""

    def __init__(self, client: ServiceClient, observer: DeferredObserver, work: Callable[[ServiceClient], Any]):
        from gitops.edges.threads import Background

        self.client = client
        self.observer = observer
        self.answer: Background[Any] = Background(lambda: work(client), name="gitops-ahead")

    def take(self) -> None:
        """Wait for the answer, tell the ledger what it taught, close the side client."""
        self.answer.join()
        try:
            self.observer.replay()
        finally:
            self.client.close()


class Ahead:
    """The reads of one server sent ahead (:func:`send_reads_ahead`); taken in the server's planning thread."""

    def __init__(self, s: Session, server: str) -> None:
        self._s = s
        self._server = server
        self._downloads: dict[str, _Read] = {}
        self._query: _Read | None = None
        self._probe: _Read | None = None

    def _side(self, work: Callable[[ServiceClient], Any]) -> _Read:
        from gitops.edges.service import DeferredObserver

        observer = DeferredObserver(self._s.ledger(self._server))
        return _Read(self._s.side_client(self._server, observer), observer, work)

    def send(self, downloads: list[str], *, query: bool) -> None:
        """Send the downloads of ``downloads`` and, with ``query``, the token query; each in its own thread."""
        clock = self._s.options.clock

        def fetch(name: str) -> Callable[[ServiceClient], tuple[CodeSet | None, float]]:
            return lambda client: (client.get_code(name), clock.now())

        for name in downloads:
            self._downloads[name] = self._side(fetch(name))
        if query:
            self._query = self._side(lambda client: client.query_token())
            self._s.mark_queried(self._server)  # learn_unlimited: the token was asked in this run

    def send_probe(self) -> None:
        """Send the compression probe (:meth:`gitops.edges.service.ServiceClient.probe_compression`): only once the
        branch list showed that its branch does not exist, and the activation fits the budget (the caller checks)."""
        self._probe = self._side(lambda client: client.probe_compression())

    def download(self, branch: str) -> tuple[CodeSet | None, float] | None:
        """The answer of ``branch``'s download sent ahead, with when it came (``None`` if none was sent); its error
        is raised here."""
        read = self._downloads.pop(branch, None)
        if read is None:
            return None
        read.take()
        code, at = read.answer.result()  # its error, if it failed
        return code, at

    def finish(self) -> None:
        """Take every read not taken yet (its error dropped: nobody needed its answer)."""
        probe = self._probe
        reads = [*self._downloads.values(), *(r for r in (self._query, probe) if r is not None)]
        self._downloads.clear()
        self._query = self._probe = None
        for read in reads:
            read.take()
            error = read.answer.error
            if read is probe and error is None:
                learnt = read.answer.result()
                self._s.ledger(self._server).record_compression(learnt)
                self._s.probed_ahead[self._server] = learnt
            if error is not None and self._s.options.log is not None:
                detail = error.message if isinstance(error, GitopsError) else type(error).__name__
                self._s.options.log(f"a read sent ahead to server '{self._server}' failed: {detail}")


def server_branches(loaded: LoadedManifest, server: str) -> list[str]:
    """The server's branches the manifest deploys to (standbys included), sorted."""
    return sorted({name for b in loaded.manifest.branches if b.server == server for name in deployed_names(b)})


def wanted(s: Session, server: str) -> tuple[bool, list[str]]:
    """What planning ``server`` will ask that can be asked ahead: the token query, and the branches to download."""
    from gitops.config.credentials import TokenAuth

    refresh = s.options.refresh
    if refresh == "never" or not s.has_credentials(server) or not isinstance(s.auth(server), TokenAuth):
        return False, []
    ledger = s.ledger(server)
    query = ledger.scope() is None
    names = server_branches(s.loaded, server)
    # Only where the branch list is known to carry no code: elsewhere (the stand-in) the list is the download.
    unknown = [name for name in names if not ledger.knows_branch(name)]
    downloads = unknown if is_official(s.loaded.manifest.servers[server].url) else []
    return query, downloads[: MOST - int(query)]


def send_reads_ahead(s: Session, server: str) -> Ahead | None:
    """Send ``server``'s reads ahead (see the module's docstring); ``None`` when there is nothing to send."""
    from gitops.app.planning import check_download_budget

    query, downloads = wanted(s, server)
    if downloads:
        try:
            check_download_budget(s, server, len(downloads))
        except BudgetError:
            downloads = []  # planning says so, with its own message, if it needs them
    if not query and not downloads:
        return None
    ahead = Ahead(s, server)
    ahead.send(downloads, query=query)
    return ahead
