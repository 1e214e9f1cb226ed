"""Reads asked ahead of need, beside a server's planning requests.

Planning a server asks one thing after another on one connection: the branch list, the download of each branch the
ledger cannot vouch for, the token query for the token's scope; on an internet path each is a round trip. When the
ledger shows planning will ask some of them anyway (a first contact), they are sent at the start, each by a side
client on its own connection, beside the branch list: the token query when the scope is not known, and on the
official server (whose list carries no code) the downloads of branches the ledger knows nothing of, when they fit
the budget. With ``apply --yes`` the compression probe goes the same way once the list shows its branch is free.
Only for rate-limited logins, at most :data:`gitops.core.early.MOST` per server
(:func:`gitops.core.early.reads_ahead`). What a read teaches reaches the ledger in the server's own
thread (a deferred observer, replayed when its answer is taken or planning the server ends); a download that
failed raises its error where it would have been sent in order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gitops.app.session import Session
from gitops.config.manifest import LoadedManifest, deployed_names
from gitops.core.codeset import CodeSet
from gitops.core.early import reads_ahead
from gitops.core.endpoints import is_official
from gitops.edges.early import EarlyConnection
from gitops.edges.service.observer import DeferredObserver
from gitops.edges.threads import Background
from gitops.errors import BudgetError, GitopsError

if TYPE_CHECKING:
    from gitops.edges.service.client import ServiceClient

#: A budget gate (:func:`gitops.app.budgetgates.check_download_budget`): raises BudgetError when ``count`` downloads
#: from ``server`` would not fit.
DownloadCheck = Callable[[str, int], None]


class _Read:
    """One read in its own thread, by its own side client."""

    def __init__(self, client: ServiceClient, observer: DeferredObserver, work: Callable[[ServiceClient], Any]):
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


class SideReads:
    """The reads of one server sent ahead on side connections (:func:`send_side_reads`); taken in the server's
    planning thread. ``spare``: the side connections opened early for the server, used first."""

    def __init__(
        self,
        session: Session,
        server: str,
        spare: list[EarlyConnection] | None,
        probed: dict[str, bool | None],
    ) -> None:
        self._session = session
        self._server = server
        self._spare = spare if spare is not None else []
        #: Where the compression probe's answer is told (the head start's record of the probes sent ahead).
        self._probed = probed
        self._downloads: dict[str, _Read] = {}
        self._query: _Read | None = None
        self._probe: _Read | None = None

    def _side(self, work: Callable[[ServiceClient], Any]) -> _Read:
        observer = DeferredObserver(self._session.ledger(self._server))
        early = self._spare.pop() if self._spare else None
        return _Read(self._session.side_client(self._server, observer, early), observer, work)

    def send(self, downloads: list[str], *, query: bool) -> None:
        """Send the downloads of ``downloads`` and, with ``query``, the token query; each in its own thread."""
        clock = self._session.options.clock

        def fetch(name: str) -> Callable[[ServiceClient], tuple[CodeSet | None, float]]:
            return lambda client: (client.get_code(name), clock.now())

        for name in downloads:
            self._downloads[name] = self._side(fetch(name))
        if query:
            self._query = self._side(lambda client: client.query_token())
            self._session.mark_queried(self._server)  # learn_unlimited: the token was asked in this run

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
                self._session.ledger(self._server).record_compression(learnt)
                self._probed[self._server] = learnt
            if error is not None and self._session.options.log is not None:
                detail = error.message if isinstance(error, GitopsError) else type(error).__name__
                self._session.options.log(f"a read sent ahead to server '{self._server}' failed: {detail}")


def server_branches(loaded: LoadedManifest, server: str) -> list[str]:
    """The server's branches the manifest deploys to (standbys included), sorted."""
    return sorted({name for b in loaded.manifest.branches if b.server == server for name in deployed_names(b)})


def wanted(session: Session, server: str) -> tuple[bool, list[str]]:
    """What planning ``server`` will ask that can be asked ahead: the token query, and the branches to download."""
    refresh = session.options.refresh
    login = session.login(server)
    if refresh == "never" or login is None or not login.rate_limited:
        return False, []  # nothing asked of the ledger
    ledger = session.ledger(server)
    return reads_ahead(
        refresh=refresh,
        rate_limited=login.rate_limited,
        scope_known=ledger.scope() is not None,
        unknown=[name for name in server_branches(session.loaded, server) if not ledger.knows_branch(name)],
        official=is_official(session.loaded.manifest.servers[server].url),
    )


def send_side_reads(
    session: Session,
    server: str,
    check_downloads: DownloadCheck,
    spare: list[EarlyConnection] | None,
    probed: dict[str, bool | None],
) -> SideReads | None:
    """Send ``server``'s reads ahead (see the module's docstring); ``None`` when there is nothing to send."""
    query, downloads = wanted(session, server)
    if downloads:
        try:
            check_downloads(server, len(downloads))
        except BudgetError:
            downloads = []  # planning says so, with its own message, if it needs them
    if not query and not downloads:
        return None
    reads = SideReads(session, server, spare, probed)
    reads.send(downloads, query=query)
    return reads
