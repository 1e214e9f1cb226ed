"""The plan: per branch, what ``apply`` will do, the requests it will spend, and whether they fit the budget.

This module holds the plan's values: a :class:`Plan` is a frozen dataclass, made by
:func:`gitops.core.planbuild.build_plan` (a pure function of the manifest, the local code, what is known of the
servers, budget facts and the time), and read by what the plan says of itself (:func:`requests_needed`, the parts a
saved plan is narrowed to). ``gitops plan --out FILE`` saves it (with the exact module content to upload) and ``gitops
apply FILE`` carries it out once :mod:`gitops.core.planseal` has checked it. Renderers (``gitops.render.plan``) and
``apply`` (``gitops.core.apply``) are two readers of the same steps, so they cannot disagree.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from gitops.config.manifest import ActiveName, LoadedManifest, deployed_names
from gitops.core.budget import EndpointBudget
from gitops.core.codeset import WireModule
from gitops.core.deploys import UnsettledDeploy
from gitops.core.diff import ModuleChange
from gitops.core.driftfinding import Drift
from gitops.core.endpoints import ACTIVATE, UPLOAD
from gitops.core.remote import Basis

PLAN_FORMAT_VERSION: Literal[1] = 1


Action = Literal["create", "update", "activate", "none"]
Seen = Literal["download", "own-upload", "ledger", "unknown"]


# The plan's models are frozen stdlib dataclasses, made without validation: ``build_plan`` fills them from typed
# values, and a plan is made on every run, where pydantic's import and model building cost more than the rest of
# planning. A saved plan file is untrusted input: ``gitops.edges.planfile`` validates it with
# pydantic (a ``TypeAdapter`` of :class:`Plan`, imported only there), and ``__pydantic_config__`` makes it refuse
# unknown fields at every level. Fields are keyword-only, in the order of the plan file's JSON.


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteSeen:
    """How the plan knows the server's branch: downloaded now, from its own recent upload, or from the ledger; and
    whether this run verified it on the server (``basis``: a download or the branch list) or states it from a record
    it did not check (``own-upload``, ``ledger``) or from nothing (``unknown``)."""

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}

    how: Seen
    learnt_at: float | None
    exists: bool | None
    digest: str | None
    verified: bool = False
    basis: Basis = "unknown"
    #: When this run verified it (the download or the branch list), if it did.
    checked_at: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One request that ``apply`` makes."""

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}

    kind: Literal["clone-branch", "upload", "activate"]
    request: str
    which: ActiveName | None = None

    def describe(self) -> str:
        """``upload (POST /api/user/code)``, ``activate for world (POST /api/user/set-active-branch)``."""
        if self.kind == "activate":
            return f"activate for {self.which} ({self.request})"
        return f"{self.kind} ({self.request})"


@dataclass(frozen=True, slots=True, kw_only=True)
class Payload:
    """The exact modules to upload to one branch (or to create it with). ``missing_kept`` names server-only modules
    to keep whose content the plan does not hold (planned from the ledger): apply downloads them before uploading.

    A payload is not rendered, so a reviewer never sees it: :func:`gitops.core.planseal.seal_problems` checks it
    against what the plan shows (the branch's changes and their digests, the count of unchanged modules,
    ``upload_digest``)."""

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}

    server: str
    branch: str
    modules: dict[str, WireModule]
    missing_kept: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyStep:
    """After the branch's steps: watch the console and judge the deploy (``gitops.core.health``); on failure, with
    ``on_failure: rollback`` and ``restore_ready``, upload the code the server held before (``Plan.rollbacks``),
    whose upload the plan reserves in its budget."""

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}

    ticks: int
    error_share: float
    timeout: float
    on_failure: Literal["report", "rollback"]
    rollback: Literal["restore", "standby"] = "restore"
    fail_on: list[str] = field(default_factory=list)
    #: The plan holds the previous code, and reserves an upload to restore it.
    restore_ready: bool = False
    #: ``rollback: standby``: the branch that runs now, activated again on failure (for each of ``switch_for``).
    switch_back: str | None = None
    switch_for: list[ActiveName] = field(default_factory=list)
    #: ``rollback: standby``: the manifest's branch this one takes turns with.
    pair_of: str | None = None
    #: Why a rollback asked for cannot be done (the failure is then reported and the code left in place).
    note: str | None = None

    def describe(self) -> str:
        """``verify: watch 10 ticks (at most 120 s), failing at 50% failed ticks -> restore the previous code``."""
        head = f"verify: watch {self.ticks} tick(s) (at most {self.timeout:g} s), failing at {self.error_share:.0%} "
        head += "failed ticks"
        if self.on_failure == "rollback" and self.restore_ready:
            return head + " -> restore the previous code (1 upload reserved)"
        if self.on_failure == "rollback" and self.switch_back is not None:
            n = len(self.switch_for)
            return head + f" -> switch back to {self.switch_back} ({n} activation(s) reserved)"
        if self.on_failure == "rollback":
            return head + f" -> report only: {self.note}"
        return head + " -> report (the code stays)"

    @property
    def reserves_upload(self) -> bool:
        return self.on_failure == "rollback" and self.restore_ready

    @property
    def reserved_activations(self) -> int:
        return len(self.switch_for) if self.on_failure == "rollback" and self.switch_back is not None else 0


@dataclass(frozen=True, slots=True, kw_only=True)
class BranchPlan:
    """What the plan does to one branch."""

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}

    server: str
    branch: str
    action: Action
    remote: RemoteSeen
    modules: list[ModuleChange]
    unchanged: int
    activate: list[ActiveName]
    module_count: int
    upload_length: int
    #: The digest (:attr:`CodeSet.digest`) of the modules the upload sends; ``None`` when it keeps server-only
    #: modules whose content the plan does not hold (``Payload.missing_kept``), so it is unknown until apply has
    #: them. With ``modules`` (each change's ``new_digest``) and ``unchanged``, part of the seal that ``apply FILE``
    #: checks (:func:`gitops.core.planseal.seal_problems`).
    upload_digest: str | None
    steps: list[Step]
    #: Whether the server's code differs from what this tool last applied there (``gitops.core.drift``); ``None``
    #: when the plan was made without drift findings (an older plan file, or a plan that did not look).
    drift: Drift | None = None
    #: The health check after apply (``verify:`` in the manifest), ``None`` when off or nothing changes.
    verify: VerifyStep | None = None
    #: Modules that differ from the server's only in lines ``ignore_lines`` matches, when nothing else of the
    #: branch changed: counted in ``unchanged`` and not uploaded. (With other changes they are ``changed`` rows,
    #: sent as built.)
    ignored: list[str] = field(default_factory=list)

    def names(self, change: str) -> list[str]:
        return [m.name for m in self.modules if m.change == change]

    @property
    def has_changes(self) -> bool:
        return self.action != "none"

    @property
    def uploads(self) -> int:
        """``POST /api/user/code`` requests (a new branch gets its modules with the clone-branch: none)."""
        return sum(1 for s in self.steps if s.kind == "upload")

    @property
    def writes_code(self) -> bool:
        """Whether apply sends modules to the branch (the clone-branch of a new one, or the upload)."""
        return any(s.kind in ("clone-branch", "upload") for s in self.steps)

    @property
    def label(self) -> str:
        return f"{self.server}/{self.branch}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerFailure:
    """A server the plan could not learn (unreachable, credentials refused, an error answer, a download that would
    not fit the budget): its branches are left out of the plan and it is reported with its error instead."""

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}

    server: str
    branches: list[str]
    message: str
    exit_code: int

    def __post_init__(self) -> None:
        # An ExitCode member is stored as the plain number it is, as in the plan file (and as pydantic stored it).
        object.__setattr__(self, "exit_code", int(self.exit_code))


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """A whole plan. ``payloads`` hold the content to upload; they are written to plan files but never rendered."""

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}

    format_version: Literal[1] = PLAN_FORMAT_VERSION
    created_at: float
    manifest_path: str
    manifest_digest: str
    source: dict[str, str | bool | None]
    refresh: str
    branches: list[BranchPlan]
    budget: list[EndpointBudget]
    #: Servers whose requests are not rate limited (a password login on a private server).
    not_rate_limited: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    payloads: list[Payload] = field(default_factory=list)
    #: Servers whose planning failed (``plan`` reports the others; ``apply`` needs ``--keep-going``).
    failed: list[ServerFailure] = field(default_factory=list)
    #: The code each verified branch held before, for ``rollback: restore`` (never rendered; sealed by the branch's
    #: ``remote.digest``).
    rollbacks: list[Payload] = field(default_factory=list)
    #: Branches whose last deploy is unverified or failing, from the ledgers (issue 39; exit code 12).
    unsettled: list[UnsettledDeploy] = field(default_factory=list)

    def rollback(self, server: str, branch: str) -> Payload | None:
        for p in self.rollbacks:
            if p.server == server and p.branch == branch:
                return p
        return None

    @property
    def has_changes(self) -> bool:
        return any(b.has_changes for b in self.branches)

    @property
    def uploads_needed(self) -> int:
        return sum(b.uploads for b in self.branches)

    @property
    def fits_budget(self) -> bool:
        return all(row.fits for row in self.budget)

    def payload(self, server: str, branch: str) -> Payload | None:
        for p in self.payloads:
            if p.server == server and p.branch == branch:
                return p
        return None

    def servers(self) -> list[str]:
        return sorted({b.server for b in self.branches})

    def requests_on(self, server: str) -> dict[str, int]:
        """Requests per endpoint that applying this plan makes on ``server`` (:func:`requests_needed`)."""
        return requests_needed([b for b in self.branches if b.server == server])

    @property
    def failure_code(self) -> int | None:
        """The worst (highest) exit code among the failed servers, or ``None`` when none failed."""
        return max((f.exit_code for f in self.failed), default=None)


def requests_needed(branches: list[BranchPlan]) -> dict[str, int]:
    """Requests per endpoint that applying these branch plans makes."""
    needs: dict[str, int] = {}
    for branch in branches:
        for step in branch.steps:
            needs[step.request] = needs.get(step.request, 0) + 1
    held = rollback_uploads(branches)
    if held:
        needs[UPLOAD] = needs.get(UPLOAD, 0) + held
    switches = rollback_activations(branches)
    if switches:
        needs[ACTIVATE] = needs.get(ACTIVATE, 0) + switches
    return needs


def rollback_activations(branches: list[BranchPlan]) -> int:
    """Activations the plan reserves to switch back (``rollback: standby``)."""
    return sum(b.verify.reserved_activations for b in branches if b.verify is not None)


def rollback_uploads(branches: list[BranchPlan]) -> int:
    """Uploads the plan reserves to restore failing branches (one per branch with ``rollback: restore``)."""
    return sum(1 for b in branches if b.verify is not None and b.verify.reserves_upload)


def narrow_plan(plan: Plan, loaded: LoadedManifest) -> Plan:
    """A saved plan restricted to the branches of ``loaded`` (the manifest as :func:`gitops.app.targets.select`
    narrowed it): its other branches, payloads and budget rows are left out, and so never applied."""
    keep = {(b.server, name) for b in loaded.manifest.branches for name in deployed_names(b)}
    servers = {server for server, _ in keep}
    return dataclasses.replace(
        plan,
        branches=[b for b in plan.branches if (b.server, b.branch) in keep],
        payloads=[p for p in plan.payloads if (p.server, p.branch) in keep],
        rollbacks=[p for p in plan.rollbacks if (p.server, p.branch) in keep],
        budget=[r for r in plan.budget if r.server in servers],
        not_rate_limited=[s for s in plan.not_rate_limited if s in servers],
        failed=[f for f in plan.failed if f.server in servers],
    )


def plan_for_server(plan: Plan, server: str) -> Plan:
    """The part of ``plan`` on one server (``apply --keep-going`` applies server by server)."""
    return dataclasses.replace(
        plan,
        branches=[b for b in plan.branches if b.server == server],
        payloads=[p for p in plan.payloads if p.server == server],
        budget=[r for r in plan.budget if r.server == server],
        not_rate_limited=[x for x in plan.not_rate_limited if x == server],
        failed=[],
    )
