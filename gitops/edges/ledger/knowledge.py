"""What the ledger knows of one server account, kept between runs: the client's observer.

The HTTP client tells the ledger what it learns (the ledger is its observer, ``gitops.edges.service.Observer``):
each request sent, the last ``X-RateLimit-*`` headers of each endpoint, and the end of an unlimited period; the
last known state of each branch (module digests and sizes, never module text, with when and how it was learnt);
the branch list with its active flags; and, kept apart, what this tool last applied to each branch (drift is
measured against it), an upload not yet known to have landed, and each deploy's verification state and history.
With it a plan can budget its requests without spending any (the window arithmetic is ``gitops.core.budget``'s),
and ``--refresh=auto`` can skip downloading a branch the tool uploaded itself a moment ago. The session saves it
once per logical step; the file is the store's (``store.py``), its form the format's (``format.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from gitops.config.manifest import ActiveName
from gitops.core.applied import AppliedRecord
from gitops.core.budget import (
    WindowState,
    headers_outlived,
    sent_after,
    sent_kept_for,
    sent_since,
    sent_to,
    window_states,
)
from gitops.core.deploys import Deploy, VerifyRecord, add_deploy, with_state
from gitops.core.endpoints import header_number, reset_time
from gitops.core.remote import BranchInfo, ModuleFacts, RemoteBranch
from gitops.edges.clock import Clock
from gitops.edges.ledger.format import (
    BranchEntry,
    BranchListEntry,
    HeadersEntry,
    ListedBranch,
    ModuleEntry,
    applied_entry,
    applied_record,
    deploy_entries,
    deploys,
    module_entries,
    module_facts,
    verify_entry,
    verify_record,
)
from gitops.edges.ledger.seal import SealKey
from gitops.edges.ledger.store import LedgerStore

__all__ = ["Ledger"]


class Ledger(LedgerStore):
    """What is known of one server account's rate limits and branches; see the module docstring.

    Open it with :meth:`open`; nothing is written until :meth:`save`.
    """

    def __init__(
        self, path: Path, server_url: str, fingerprint: str | None, *, clock: Clock, seal: SealKey | None = None
    ) -> None:
        super().__init__(path, server_url, fingerprint, clock=clock, seal=seal)
        #: remembered_branch's module facts, by branch, with the record's module map they were built from.
        self._facts: dict[str, tuple[dict[str, ModuleEntry], dict[str, ModuleFacts]]] = {}

    def _prune(self) -> None:
        # Keep a request only as long as a window it counts in can still need it.
        now = self._clock.now()
        for endpoint in list(self._data.sent):
            keep = sent_kept_for(endpoint)
            kept = [entry for entry in self._data.sent[endpoint] if entry[0] > now - keep]
            if kept:
                self._data.sent[endpoint] = kept
            else:
                del self._data.sent[endpoint]
        for endpoint, record in list(self._data.headers.items()):
            if headers_outlived(record, now):
                del self._data.headers[endpoint]

    # --- rate limits -----------------------------------------------------------------------------------------

    def record_sent(self, endpoint: str) -> None:
        """Count one request to ``endpoint`` (``"METHOD /path"``), sent now."""
        self._data.seq += 1
        self._data.sent.setdefault(endpoint, []).append((float(self._clock.now()), self._data.seq))

    def record_unsent(self, endpoint: str) -> None:
        """The last request recorded to ``endpoint`` never left (no connection): it is not counted."""
        sent = self._data.sent.get(endpoint)
        if sent:
            sent.pop()
            if not sent:
                del self._data.sent[endpoint]

    @property
    def sequence(self) -> int:
        """The number of the last request recorded (each :meth:`record_sent` counts one up)."""
        return self._data.seq

    def sent_after(self, endpoint: str, sequence: int) -> int:
        """How many requests to ``endpoint`` were recorded after request number ``sequence``."""
        return sent_after(self._data.sent.get(endpoint, ()), sequence)

    def record_response(self, endpoint: str, status: int, headers: Mapping[str, str]) -> None:
        """Keep the ``X-RateLimit-*`` headers of a response, if it carried all three as sane numbers.

        ``X-RateLimit-Reset`` is read by :func:`reset_time` (epoch seconds or milliseconds, or seconds from now,
        at most a day ahead); a value that is not a finite number makes the three headers be ignored.

        A response's ``Accept-Encoding`` naming ``deflate`` (RFC 7694: the content codings the server reads in
        requests, which the stand-in sends) is remembered as the compression probe's answer would be.
        """
        if self._data.compression != "accepted" and _advertises_deflate(_header(headers, "Accept-Encoding")):
            self.record_compression(True)
        limit = _int(_header(headers, "X-RateLimit-Limit"))
        remaining = _int(_header(headers, "X-RateLimit-Remaining"))
        reset = header_number(_header(headers, "X-RateLimit-Reset"))
        if limit is None or remaining is None or reset is None or limit < 0:
            return
        now = float(self._clock.now())
        reset_at = float(reset_time(float(int(reset)), now))
        self._data.headers[endpoint] = HeadersEntry(
            limit=limit, remaining=remaining, reset=reset_at, learnt_at=now, status=status, seq=self._data.seq
        )

    def sent_times(self, endpoint: str, seconds: float) -> list[float]:
        """When the requests of the last ``seconds`` to ``endpoint`` (or to any, for ``GLOBAL_KEY``) were sent."""
        return sent_since(sent_to(self._data.sent, endpoint), self._clock.now() - seconds)

    def windows(self) -> dict[str, WindowState]:
        """What is known to remain now of the global window and of every endpoint window in the limits table
        (:func:`gitops.core.budget.window_states`)."""
        return window_states(self._data.headers, self._data.sent, self._clock.now())

    @property
    def unlimited_until(self) -> float | None:
        """UTC epoch second at which the token's unlimited period ends (``None``: not known to be unlimited)."""
        return self._data.unlimited_until

    def set_unlimited_until(self, until: float | None) -> None:
        """Record the end of the token's unlimited period (from the token query), or ``None`` for none."""
        self._data.unlimited_until = None if until is None else float(until)

    #: How long the token query's scope is believed before it is asked again (a token's scope rarely changes).
    SCOPE_SECONDS = 86400.0

    def remember_scope(self, full: bool, endpoints: tuple[str, ...]) -> None:
        """Record what the token may use (the token query's answer)."""
        self._data.scope_full = full
        self._data.scope_endpoints = sorted(endpoints)
        self._data.scope_at = float(self._clock.now())

    def scope(self) -> tuple[bool, frozenset[str]] | None:
        """Full access, or the endpoints the token may use, as learnt less than :attr:`SCOPE_SECONDS` ago."""
        at = self._data.scope_at
        if self._data.scope_full is None or at is None or self._clock.now() - at > self.SCOPE_SECONDS:
            return None
        return self._data.scope_full, frozenset(self._data.scope_endpoints)

    #: How long a refusal of compressed bodies is believed before the server is asked again (it may be upgraded).
    COMPRESSION_REFUSAL_DAYS = 30

    def compression(self) -> bool | None:
        """Whether the server is known to read compressed bodies; ``None`` when it has not been asked (or a refusal
        is older than :attr:`COMPRESSION_REFUSAL_DAYS`)."""
        state, at = self._data.compression, self._data.compression_at
        if state == "accepted":
            return True
        if state == "refused" and at is not None and self._clock.now() - at < self.COMPRESSION_REFUSAL_DAYS * 86400:
            return False
        return None

    def record_compression(self, accepted: bool | None) -> None:
        """Remember the probe's answer (``None`` forgets it: the next run that uploads asks again)."""
        self._data.compression = None if accepted is None else ("accepted" if accepted else "refused")
        self._data.compression_at = None if accepted is None else float(self._clock.now())

    # --- branches --------------------------------------------------------------------------------------------

    def remember_branch(self, branch: RemoteBranch) -> None:
        """Keep what is known of a branch: module digests and sizes, never their text."""
        modules = None if branch.modules is None else module_entries(branch.modules)
        self._data.branches[branch.name] = BranchEntry(
            exists=branch.exists,
            digest=branch.digest,
            modules=modules,
            learnt_at=float(branch.learnt_at),
            how=branch.how,
            stamp=branch.stamp,
        )

    def stamp_branch(self, name: str, stamp: str | None) -> None:
        """Set the server's modification stamp of the branch's record (listed just before it was downloaded)."""
        record = self._data.branches.get(name)
        if record is not None:
            record.stamp = stamp

    def forget_branch(self, name: str) -> None:
        """Drop what is known of a branch (its state changed in a way the tool cannot reproduce)."""
        self._data.branches.pop(name, None)

    def remembered_branch(self, name: str) -> RemoteBranch | None:
        """The last known state of a branch, with when and how it was learnt; module facts carry no text."""
        record = self._data.branches.get(name)
        if record is None:
            return None
        if not record.exists or record.modules is None:
            return RemoteBranch.missing(name, record.learnt_at, record.how, record.stamp)
        made = self._facts.get(name)
        if made is None or made[0] is not record.modules:
            # Built once per record: a plan asks for the same branch several times. A record's modules are never
            # changed in place (remember_branch makes a new record), and the cache holds the map it was built from,
            # so the identity check cannot match another map.
            made = (record.modules, module_facts(record.modules))
            self._facts[name] = made
        return RemoteBranch(name, made[1], record.digest, record.learnt_at, record.how, record.stamp)

    def knows_branch(self, name: str) -> bool:
        """Whether the ledger has a record of the branch (that it exists, or that it did not): as
        ``remembered_branch(name) is not None``, without building its module facts."""
        return name in self._data.branches

    def remembered_digest(self, name: str) -> str | None:
        """The digest of the code the branch was last known to hold (:attr:`CodeSet.digest`); ``None`` when it is
        not known or the branch did not exist. As :meth:`remembered_branch` without building its module facts."""
        record = self._data.branches.get(name)
        if record is None or not record.exists or record.modules is None:
            return None
        return record.digest

    def remember_branch_list(self, branches: list[BranchInfo]) -> None:
        """Keep the account's branch list with its active flags, as learnt now."""
        self._data.branch_list = BranchListEntry(
            learnt_at=float(self._clock.now()),
            branches=[
                ListedBranch(name=b.name, active_world=b.active_world, active_sim=b.active_sim) for b in branches
            ],
        )

    def remember_clone(self, name: str) -> None:
        """The tool created branch ``name``: what it holds is the server's copy (the next plan downloads it, or
        apply uploads), and the known branch list gains it."""
        self.forget_branch(name)
        known = self.remembered_branch_list()
        if known is not None and all(b.name != name for b in known[0]):
            self.remember_branch_list([*known[0], BranchInfo(name)])

    def remember_activation(self, name: str, which: ActiveName) -> None:
        """The tool made ``name`` the active branch for the world or the simulation.

        For a token without ``GET /api/user/branches`` this record is all the tool will know of activation, and the
        list may hold only what the tool itself cloned or activated: the branch is added when it is missing.
        """
        known = self.remembered_branch_list()
        branches = list(known[0]) if known is not None else []
        if all(b.name != name for b in branches):
            branches.append(BranchInfo(name))
        self.remember_branch_list(
            [
                BranchInfo(
                    b.name,
                    b.name == name if which == "world" else b.active_world,
                    b.name == name if which == "sim" else b.active_sim,
                )
                for b in branches
            ]
        )

    # --- what this tool last applied (drift) -------------------------------------------------------------------

    def record_applied(self, record: AppliedRecord) -> None:
        """This tool made the branch hold ``record`` (an upload that succeeded, or a plan that found the server
        equal to the repository); a pending upload of the branch is settled by it."""
        self._data.applied[record.branch] = applied_entry(record)
        self._data.pending.pop(record.branch, None)

    def record_pending(self, record: AppliedRecord) -> None:
        """An upload of ``record`` is about to be sent: if its answer is lost, finding it on the server is no
        drift."""
        self._data.pending[record.branch] = applied_entry(record)

    def applied(self, name: str) -> AppliedRecord | None:
        """The last applied record of branch ``name``, or ``None`` when this tool never applied it."""
        return applied_record(name, self._data.applied.get(name))

    def pending(self, name: str) -> AppliedRecord | None:
        """The set of an upload to ``name`` whose outcome is not known, or ``None``."""
        return applied_record(name, self._data.pending.get(name))

    # --- deployment state (issue 39) ---------------------------------------------------------------------------

    def record_verification(self, record: VerifyRecord) -> None:
        """The verification state of ``record.branch``'s last deploy (replacing the one before; saved by the
        caller at once). The newest deploy of the branch in the history takes the same state."""
        self._data.verifications[record.branch] = verify_entry(record)
        self._set_history(with_state(self.history(), record.branch, record.state))

    def forget_verification(self, branch: str) -> None:
        """A new deploy of ``branch`` replaces its verification state (one without ``verify:`` leaves none)."""
        self._data.verifications.pop(branch, None)

    def verification(self, branch: str) -> VerifyRecord | None:
        stored = self._data.verifications.get(branch)
        if stored is None:
            return None
        return verify_record(branch, stored)

    def verifications(self) -> list[VerifyRecord]:
        """Every branch's verification record, by branch name."""
        return [r for name in sorted(self._data.verifications) if (r := self.verification(name)) is not None]

    def record_deploy(self, deploy: Deploy) -> Deploy:
        """Add ``deploy`` to the history (numbered next; the oldest dropped past the limit); the numbered one."""
        history = add_deploy(self.history(), deploy)
        self._set_history(history)
        return history[-1]

    def history(self) -> list[Deploy]:
        """The recorded deploys, oldest first."""
        return deploys(self._data.history)

    def _set_history(self, history: list[Deploy]) -> None:
        self._data.history = deploy_entries(history)

    def remembered_branch_list(self) -> tuple[list[BranchInfo], float] | None:
        """The last known branch list and when it was learnt, or ``None``."""
        record = self._data.branch_list
        if record is None:
            return None
        return [BranchInfo(b.name, b.active_world, b.active_sim) for b in record.branches], record.learnt_at


def _header(headers: Mapping[str, str], name: str) -> str | None:
    lower = name.lower()
    for key, value in headers.items():
        if key.lower() == lower:
            return value
    return None


def _advertises_deflate(value: str | None) -> bool:
    codings = [part.split(";", 1)[0].strip().lower() for part in (value or "").split(",")]
    return "deflate" in codings


def _int(value: str | None) -> int | None:
    number = header_number(value)
    return None if number is None else int(number)
