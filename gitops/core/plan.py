"""The plan: per branch, what ``apply`` will do, the requests it will spend, and whether they fit the budget.

:func:`build_plan` is a pure function of (manifest, local code, what is known of the servers, budget facts, time):
no HTTP, git or clock inside. A :class:`Plan` is a frozen dataclass; ``gitops plan --out FILE`` saves it (with the exact
module content to upload) and ``gitops apply FILE`` carries it out. Renderers (``gitops.render.plan``) and ``apply``
(``gitops.core.apply``) are two readers of the same steps, so they cannot disagree.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from gitops.config.manifest import ActiveName, BranchConfig, LoadedManifest, VerifyConfig, deployed_names
from gitops.core.budget import BudgetFacts, EndpointBudget, assess
from gitops.core.codeset import CodeSet, Module, WireModule, code_length, upload_body_length
from gitops.core.deploys import UnsettledDeploy
from gitops.core.diff import MAX_DIFF_LINES, BranchDiff, ModuleChange, diff_branch, text_diff
from gitops.core.driftfinding import Drift
from gitops.core.endpoints import ACTIVATE, CLONE, MAX_BODY_BYTES, MAX_BRANCHES, MAX_CODE_LENGTH, UPLOAD
from gitops.core.health import VerifyOverrides
from gitops.core.local import LocalBranch, LocalCode
from gitops.core.remote import Basis, ModuleFacts, RemoteBranch, RemoteView
from gitops.errors import ServiceError, SourceError

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

    A payload is not rendered, so a reviewer never sees it: :func:`seal_problems` checks it against what the plan
    shows (the branch's changes and their digests, the count of unchanged modules, ``upload_digest``)."""

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
    #: checks (:func:`seal_problems`).
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

    @property
    def failure_code(self) -> int | None:
        """The worst (highest) exit code among the failed servers, or ``None`` when none failed."""
        return max((f.exit_code for f in self.failed), default=None)


def build_plan(
    *,
    loaded: LoadedManifest,
    local: LocalCode,
    remote: Mapping[str, RemoteView],
    budgets: Mapping[str, BudgetFacts],
    refresh: str,
    now: float,
    extra_needs: Mapping[str, Mapping[str, int]] | None = None,
    verify: VerifyOverrides | None = None,
) -> Plan:
    """Decide, per branch of the manifest, what apply must do to make the server hold the local code.

    ``extra_needs`` (per server, per endpoint) are requests apply sends besides the branches' steps, counted in the
    budget too (the compression probe, say)."""
    configs = {(b.server, b.branch): b for b in loaded.manifest.branches}
    overrides = verify or VerifyOverrides()
    branches: list[BranchPlan] = []
    payloads: list[Payload] = []
    rollbacks: list[Payload] = []
    warnings = list(local.warnings)
    for entry in local.branches:
        view = remote.get(entry.server) or RemoteView(entry.server, None, {})
        planned = _plan_entry(entry, configs[(entry.server, entry.branch)], view, overrides)
        branches.append(planned.plan)
        if planned.payload is not None:
            payloads.append(planned.payload)
        if planned.rollback is not None:
            rollbacks.append(planned.rollback)
        warnings += planned.warnings
    _check_branch_count(branches, remote)
    budget, not_limited = _plan_budget(branches, budgets, extra_needs or {}, now)
    return Plan(
        created_at=float(now),
        manifest_path=str(loaded.path),
        manifest_digest=loaded.digest,
        source={
            "kind": local.source.kind,
            "ref": local.source.ref,
            "commit": local.source.commit,
            "dirty": local.source.dirty,
        },
        refresh=refresh,
        branches=branches,
        budget=budget,
        not_rate_limited=not_limited,
        warnings=warnings,
        payloads=payloads,
        rollbacks=rollbacks,
    )


@dataclass(frozen=True)
class _PlannedBranch:
    """One branch of the manifest, planned: its plan, its upload, the code a rollback would restore, and warnings."""

    plan: BranchPlan
    payload: Payload | None
    rollback: Payload | None
    warnings: list[str]


def _plan_entry(
    entry: LocalBranch, config: BranchConfig, view: RemoteView, overrides: VerifyOverrides
) -> _PlannedBranch:
    """Plan one branch of the manifest: which branch receives the code (the idle one of a blue/green pair), its
    steps, and its verification and rollback when it is verified."""
    enabled = config.verify is not None and overrides.enabled
    config, pair = _deploy_target(config, entry.code, view) if enabled else (config, None)
    seen_branch = view.branches.get(config.branch)
    branch_plan, payload = _plan_branch(config, entry.code, view, seen_branch)
    rollback: Payload | None = None
    warnings: list[str] = []
    if config.verify is not None and enabled and branch_plan.steps:
        step, previous = _verify_step(config.verify, overrides, branch_plan, seen_branch)
        if pair is not None:
            step = _standby_step(step, config, entry.branch, pair[1])
        branch_plan = dataclasses.replace(branch_plan, verify=step)
        if previous is not None:
            rollback = Payload(server=config.server, branch=config.branch, modules=previous)
        if step.note:
            warnings.append(f"{branch_plan.label}: on_failure: rollback cannot be done: {step.note}")
    warnings += _branch_warnings(branch_plan, entry.branch, view)
    return _PlannedBranch(branch_plan, payload, rollback, warnings)


def _deploy_target(
    config: BranchConfig, code: CodeSet, view: RemoteView
) -> tuple[BranchConfig, tuple[str, str | None] | None]:
    """The branch a verified deploy goes to, and its blue/green pair (:func:`_blue_green`) when it deploys to the
    idle one. When the active one of the pair holds the code already, nothing is deployed: the plan is the active
    branch's, without a pair."""
    pair = _blue_green(config, view)
    if pair is None:
        return config, None
    if pair[1] is not None:
        running = dataclasses.replace(config, branch=pair[1])
        if not _plan_branch(running, code, view, view.branches.get(pair[1]))[0].steps:
            return running, None
    return dataclasses.replace(config, branch=pair[0]), pair


def _branch_warnings(branch_plan: BranchPlan, name: str, view: RemoteView) -> list[str]:
    """What the plan says of a branch it knows nothing of, or creates while the server has one of a close name."""
    warnings: list[str] = []
    if branch_plan.remote.how == "unknown":
        warnings.append(
            f"{branch_plan.label}: nothing is known of this branch on the server (no download, empty ledger); "
            "the plan assumes it does not exist"
        )
    if branch_plan.action == "create" and view.branch_list is not None:
        similar = similar_branch(name, [b.name for b in view.branch_list])
        if similar is not None:
            warnings.append(
                f"{branch_plan.label}: no branch of that name on the server, so it is created; the server has "
                f"'{similar}': if that is the one meant, fix branch: in the manifest"
            )
    return warnings


def _plan_budget(
    branches: list[BranchPlan],
    budgets: Mapping[str, BudgetFacts],
    extra_needs: Mapping[str, Mapping[str, int]],
    now: float,
) -> tuple[list[EndpointBudget], list[str]]:
    """The budget rows of every rate-limited server (what the steps and ``extra_needs`` spend, with what a rollback
    holds back), and the servers that are not rate limited."""
    budget: list[EndpointBudget] = []
    not_limited: list[str] = []
    for server in sorted({b.server for b in branches}):
        facts = budgets.get(server) or BudgetFacts({})
        if not facts.limited:
            not_limited.append(server)
            continue
        mine = [b for b in branches if b.server == server]
        needs = requests_needed(mine)
        for endpoint, count in extra_needs.get(server, {}).items():
            needs[endpoint] = needs.get(endpoint, 0) + count
        reserve = dict(facts.reserve or {})
        held = {UPLOAD: rollback_uploads(mine), ACTIVATE: rollback_activations(mine)}
        rows = assess(server, needs, facts.windows, reserve=reserve, unlimited_until=facts.unlimited_until, now=now)
        budget.extend(
            dataclasses.replace(row, for_rollback=held[row.endpoint]) if held.get(row.endpoint) else row for row in rows
        )
    return budget, not_limited


def _verify_step(
    config: VerifyConfig, overrides: VerifyOverrides, plan: BranchPlan, seen: RemoteBranch | None
) -> tuple[VerifyStep, dict[str, WireModule] | None]:
    """The branch's verify step and, for ``rollback: restore``, the code to restore (``None`` when not known)."""
    note: str | None = None
    previous: dict[str, WireModule] | None = None
    if config.on_failure == "rollback" and config.rollback == "restore":
        if not any(s.kind == "upload" for s in plan.steps):
            note = "the branch is new or only activated, so there is no previous code of it to restore"
        elif seen is None or seen.modules is None:
            note = "the plan does not know the server's code of the branch; plan with --refresh=always"
        elif any(f.is_binary or f.text is None for f in seen.modules.values()):
            note = (
                "the plan does not hold the server's code of the branch (binary modules, or known only by digest); "
                "plan with --refresh=always"
            )
        else:
            previous = {name: f.text for name, f in sorted(seen.modules.items()) if f.text is not None}
    step = VerifyStep(
        ticks=overrides.ticks or config.ticks,
        error_share=float(config.error_share),
        timeout=float(overrides.timeout or config.timeout),
        on_failure=config.on_failure,
        rollback=config.rollback,
        fail_on=list(config.fail_on),
        restore_ready=previous is not None,
        note=note,
    )
    return step, previous


def _blue_green(config: BranchConfig, view: RemoteView) -> tuple[str, str | None] | None:
    """For ``rollback: standby``: the branch to deploy to (whichever of the pair is not active) and the one to
    switch back to (the active one; ``None`` when neither is, or which is active is not known). ``None`` for other
    branches."""
    verify = config.verify
    if verify is None or verify.rollback != "standby" or verify.standby is None:
        return None
    if view.branch_list is None or not config.activate:
        return config.branch, None
    which = config.activate[0]
    own, other = view.info(config.branch), view.info(verify.standby)
    if own is not None and own.is_active(which):
        return verify.standby, config.branch
    if other is not None and other.is_active(which):
        return config.branch, verify.standby
    return config.branch, None


def _standby_step(step: VerifyStep, config: BranchConfig, manifest_branch: str, back: str | None) -> VerifyStep:
    note = step.note if step.on_failure == "rollback" and back is None else None
    if step.on_failure == "rollback" and back is None:
        note = "neither the branch nor its standby is known to be active, so there is nothing to switch back to"
    return dataclasses.replace(
        step,
        restore_ready=False,
        switch_back=back,
        switch_for=list(config.activate) if back is not None else [],
        pair_of=manifest_branch if config.branch != manifest_branch else None,
        note=note,
    )


def rollback_activations(branches: list[BranchPlan]) -> int:
    """Activations the plan reserves to switch back (``rollback: standby``)."""
    return sum(b.verify.reserved_activations for b in branches if b.verify is not None)


def rollback_uploads(branches: list[BranchPlan]) -> int:
    """Uploads the plan reserves to restore failing branches (one per branch with ``rollback: restore``)."""
    return sum(1 for b in branches if b.verify is not None and b.verify.reserves_upload)


def similar_branch(name: str, existing: list[str]) -> str | None:
    """A branch of ``existing`` whose name is close to ``name`` (a typo: ``defualt`` for ``default``, another case),
    or ``None``."""
    if name in existing:
        return None
    folded = {n.casefold(): n for n in existing}
    if name.casefold() in folded:
        return folded[name.casefold()]
    close = difflib.get_close_matches(name, existing, n=1, cutoff=0.75)
    return close[0] if close else None


def _plan_branch(
    config: BranchConfig, code: CodeSet, view: RemoteView, seen: RemoteBranch | None
) -> tuple[BranchPlan, Payload | None]:
    """One branch's plan: its diff against what the server is known to hold, its steps, and its upload."""
    exists = seen.exists if seen is not None else None
    code, diff, ignored = _branch_diff(config, code, seen)
    # A new branch is created holding its modules (clone-branch with defaultModules): no upload follows, and no
    # empty branch is left behind if the budget runs out between two requests.
    upload_needed = bool(exists) and diff.has_changes
    writes = not exists or upload_needed
    info = view.info(config.branch)
    activate: list[ActiveName] = [
        which for which in config.activate if not exists or info is None or not info.is_active(which)
    ]
    steps, action = _steps(exists=bool(exists), upload_needed=upload_needed, activate=activate)
    upload_modules, missing_kept = _upload_set(code, diff, seen)
    # Without modules kept from the server the upload is exactly `code`, whose lengths the read computed already.
    whole = not diff.kept
    length = code.server_length() if whole else code_length(upload_modules)
    if writes:
        _check_upload_size(config, code, upload_modules, whole, length=length, kept=len(diff.kept))
    plan = BranchPlan(
        server=config.server,
        branch=config.branch,
        action=action,
        remote=_remote_seen(seen),
        modules=[*diff.added, *diff.changed, *diff.removed, *diff.kept],
        unchanged=diff.unchanged,
        activate=activate,
        module_count=len(upload_modules) + len(missing_kept),
        upload_length=length,
        upload_digest=_upload_digest(code, upload_modules, diff, missing_kept),
        steps=steps,
        ignored=ignored,
    )
    payload = None
    if writes:
        payload = Payload(server=config.server, branch=config.branch, modules=upload_modules, missing_kept=missing_kept)
    return plan, payload


def _branch_diff(
    config: BranchConfig, code: CodeSet, seen: RemoteBranch | None
) -> tuple[CodeSet, BranchDiff, list[str]]:
    """The code as the server would store it, its diff against the server's modules (when known), and the modules
    left out of the upload because only ignored lines differ."""
    server_has_main = seen is not None and seen.modules is not None and "main" in seen.modules
    if not (config.remote_only == "keep" and server_has_main):
        # With remote_only: keep, the server's own main is kept instead (never replaced by an empty one).
        code = as_server_stores(code)
    if seen is not None and seen.exists and seen.modules is not None:
        diff = diff_branch(code, seen.modules, remote_only=config.remote_only, ignore_lines=config.ignore_lines)
    else:
        diff = diff_branch(code, None, remote_only=config.remote_only)
    diff, ignored = settle_ignored(diff)
    return code, diff, ignored


def _steps(*, exists: bool, upload_needed: bool, activate: list[ActiveName]) -> tuple[list[Step], Action]:
    """The branch's requests in order (create, upload, activations) and the action they add up to."""
    steps: list[Step] = []
    if not exists:
        steps.append(Step(kind="clone-branch", request=CLONE))
    if upload_needed:
        steps.append(Step(kind="upload", request=UPLOAD))
    steps.extend(Step(kind="activate", request=ACTIVATE, which=which) for which in activate)
    action: Action
    if not exists:
        action = "create"
    elif upload_needed:
        action = "update"
    elif activate:
        action = "activate"
    else:
        action = "none"
    return steps, action


def _check_upload_size(
    config: BranchConfig, code: CodeSet, upload_modules: dict[str, WireModule], whole: bool, *, length: int, kept: int
) -> None:
    """Refuse an upload over the server's 5 MB (as it counts) or its request body limit. The sources check the
    repository's part; modules kept from the server can push the upload over."""
    if length > MAX_CODE_LENGTH:
        raise SourceError(
            f"{config.server}/{config.branch}: the upload would be {length:,} characters as the server counts "
            f"them, over its limit of {MAX_CODE_LENGTH:,} (5 MB), with {kept} module(s) kept from the "
            "server (remote_only: keep)",
            hint="Remove modules from the branch, or use remote_only: remove so that server-only modules go.",
        )
    if (body := _body_length(config.branch, code, upload_modules, whole)) > MAX_BODY_BYTES:
        raise SourceError(
            f"{config.server}/{config.branch}: the upload would be {body:,} bytes of JSON (UTF-8), over the server's "
            f"request body limit of {MAX_BODY_BYTES:,} (8 MiB), though under 5 MB as the server counts characters",
            hint="Remove modules from the branch, or use remote_only: remove so that server-only modules go.",
        )


def _remote_seen(seen: RemoteBranch | None) -> RemoteSeen:
    """How the plan knows the server's branch, as the plan states it."""
    if seen is None:
        return RemoteSeen(
            how="unknown", learnt_at=None, exists=None, digest=None, verified=False, basis="unknown", checked_at=None
        )
    return RemoteSeen(
        how=seen.how,
        learnt_at=_seconds(seen.learnt_at),
        exists=seen.exists,
        digest=seen.digest,
        verified=seen.verified,
        basis=seen.current_basis,
        checked_at=_seconds(seen.checked_at),
    )


def settle_ignored(diff: BranchDiff) -> tuple[BranchDiff, list[str]]:
    """The diff as the plan uses it, and the modules not uploaded because only ignored lines differ.

    A module whose only differences are lines ``ignore_lines`` matches (``diff.ignored``) is unchanged when nothing
    else of the branch changed: no upload for a time stamp. When something else changed, the upload sends the whole
    branch as built, so it is a ``changed`` row like any other (with its diff), and the plan shows what is sent."""
    if not diff.ignored:
        return diff, []
    if diff.has_changes:
        changed = tuple(sorted([*diff.changed, *diff.ignored], key=lambda m: m.name))
        return dataclasses.replace(diff, changed=changed, ignored=()), []
    names = [m.name for m in diff.ignored]
    return dataclasses.replace(diff, unchanged=diff.unchanged + len(names), ignored=()), names


def _body_length(branch: str, code: CodeSet, upload_modules: dict[str, WireModule], whole: bool) -> int:
    """Bytes of the upload's body: ``code``'s own (computed once per set) when the upload is exactly ``code``."""
    return code.upload_body_length(branch) if whole else upload_body_length(branch, upload_modules)


def _seconds(at: float | None) -> float | None:
    """A time as a float: a record read from JSON may hold a whole number, and the plan's JSON writes times as
    floats (``1800000000.0``), as it did when pydantic coerced them."""
    return None if at is None else float(at)


def _upload_digest(
    code: CodeSet, upload_modules: dict[str, WireModule], diff: BranchDiff, missing_kept: list[str]
) -> str | None:
    """The digest of what the upload holds: the local set's own when no server module is kept (the upload is then
    exactly ``code``, whose modules are hashed already), ``None`` when kept modules are not known."""
    if missing_kept:
        return None
    if not diff.kept:
        return code.digest
    return CodeSet.from_wire(upload_modules).digest


def as_server_stores(code: CodeSet) -> CodeSet:
    """The code set as the server will store it: it adds ``main: ""`` when a branch has no ``main``.

    Planning against this form is what makes a branch without ``main`` converge: otherwise the server's empty
    ``main`` would show as a removal on every download. (Names the server drops are refused earlier, by the
    sources.)
    """
    if "main" in code.modules:
        return code
    return CodeSet({**code.modules, "main": Module("main", text="")})


def _upload_set(code: CodeSet, diff: BranchDiff, seen: RemoteBranch | None) -> tuple[dict[str, WireModule], list[str]]:
    """The modules the upload sends: the local ones, plus server-only modules kept by ``remote_only: keep``."""
    modules = code.wire()
    missing: list[str] = []
    for kept in diff.kept:
        facts = seen.modules.get(kept.name) if seen is not None and seen.modules is not None else None
        if facts is not None and facts.text is not None and not facts.is_binary:
            modules[kept.name] = facts.text
        else:
            missing.append(kept.name)
    return dict(sorted(modules.items())), missing


def _check_branch_count(branches: list[BranchPlan], remote: Mapping[str, RemoteView]) -> None:
    for server, view in remote.items():
        if view.branch_list is None:
            continue
        creating = sum(1 for b in branches if b.server == server and b.action == "create")
        if creating and len(view.branch_list) + creating > MAX_BRANCHES:
            raise ServiceError(
                f"server '{server}': the plan creates {creating} branch(es) but the account already has "
                f"{len(view.branch_list)} of at most {MAX_BRANCHES}",
                hint="Delete unused branches in the game's script editor, or deploy to existing branches.",
            )


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


# --- the seal of a saved plan ------------------------------------------------------------------------------------


def seal_problems(plan: Plan) -> list[str]:
    """What in a saved plan's payloads does not match the plan's reviewed content (one line per problem, naming
    the branch); empty when every payload is exactly what the plan was made with.

    The reviewed content of a branch is what the plan renders: each changed module with its ``new_digest``, the
    removed ones, the kept ones and the number left unchanged; ``upload_digest`` covers the whole set held.
    Checking each module against its own row (not only the one stored digest) catches an edit of a module in
    ``payloads``, a module added or dropped, a payload moved to another branch, and an edit of ``upload_digest``
    along with the payload. It is integrity against edits by hand, not a signature: whoever rewrites the reviewed
    rows too (consistently) is not caught here, and the modules planned as unchanged, and the diffs shown, can only be
    compared with the server (:func:`server_problems`, once ``apply`` has downloaded the branch).
    """
    problems: list[str] = []
    uploading = {(b.server, b.branch): b for b in plan.branches if b.writes_code}
    seen: set[tuple[str, str]] = set()
    for payload in plan.payloads:
        key = (payload.server, payload.branch)
        label = f"{payload.server}/{payload.branch}"
        branch = uploading.get(key)
        if branch is None:
            problems.append(
                f"{label}: the plan holds modules to upload to it, but the reviewed plan has no upload there"
            )
            continue
        if key in seen:
            problems.append(f"{label}: the plan holds two sets of modules to upload to it")
            continue
        seen.add(key)
        problems += [f"{label}: {p}" for p in _payload_problems(branch, payload)]
    for key, branch in uploading.items():
        if key not in seen:
            problems.append(f"{branch.label}: the reviewed plan uploads to it, but the plan holds no modules for it")
    by_key = {(b.server, b.branch): b for b in plan.branches}
    for rollback in plan.rollbacks:
        label = f"{rollback.server}/{rollback.branch}"
        target = by_key.get((rollback.server, rollback.branch))
        if target is None or target.verify is None or not target.verify.reserves_upload:
            problems.append(f"{label}: the plan holds code to restore, but the reviewed plan has no rollback there")
            continue
        try:
            digest = CodeSet.from_wire(rollback.modules, strict=True).digest
        except ValueError as exc:
            problems.append(f"{label}: the code to restore: {exc}")
            continue
        if digest != target.remote.digest:
            problems.append(f"{label}: the code to restore is not the code the plan saw on the server")
    return problems


def _payload_problems(branch: BranchPlan, payload: Payload) -> list[str]:
    try:
        held = CodeSet.from_wire(payload.modules, strict=True)
    except ValueError as exc:
        return [str(exc)]
    problems: list[str] = []
    missing = set(payload.missing_kept)
    listed: set[str] = set()
    for row in branch.modules:
        listed.add(row.name)
        module = held.modules.get(row.name)
        if row.change == "removed":
            if module is not None or row.name in missing:
                problems.append(f"module {row.name!r} is to be removed, but the plan uploads it")
        elif row.change == "kept" and row.name in missing:
            if module is not None:
                problems.append(f"module {row.name!r} is both held and to be downloaded before the upload")
        elif module is None:
            problems.append(f"module {row.name!r} ({row.change}) is not in the upload")
        elif module.digest != row.new_digest or module.size != row.new_size:
            problems.append(f"module {row.name!r} ({row.change}) is not the reviewed content")
    kept_names = {row.name for row in branch.modules if row.change == "kept"}
    problems += [
        f"module {name!r} is to be downloaded, but the plan keeps no such module" for name in missing - kept_names
    ]
    unlisted = [name for name in held.names() if name not in listed]
    if len(unlisted) != branch.unchanged:
        problems.append(
            f"the upload holds {len(unlisted)} module(s) the plan shows no change for, but the plan has "
            f"{branch.unchanged} unchanged"
        )
    if branch.upload_digest is None:
        # Unknown only while kept modules are to be downloaded; apply then compares every module the plan shows as
        # unchanged with the server's (server_problems).
        if not missing:
            problems.append("the plan's upload_digest is missing")
    elif held.digest != branch.upload_digest:
        problems.append("the modules to upload do not match the plan's upload_digest")
    if len(held) + len(missing) != branch.module_count or code_length(dict(payload.modules)) != branch.upload_length:
        problems.append("the modules to upload do not match the plan's module count and upload length")
    return problems


def server_problems(branch: BranchPlan, payload: Payload, server: CodeSet) -> list[str]:
    """What in ``payload`` the branch as downloaded shows was edited in the plan file (one line per module, naming
    the branch). ``server`` must be what the plan was made from (``apply`` checks its digest first).

    The rest of the seal (:func:`seal_problems`) cannot see two things that the server's copy can: the modules the
    plan shows as unchanged must be the server's, and each changed text module's diff, as the plan shows it (what a
    reviewer reads), must be the diff from the server's module to the one uploaded; so an edit of a module and of
    its digests is still caught unless the shown diff was rewritten too.
    """
    rows = {row.name: row for row in branch.modules}
    try:
        held = CodeSet.from_wire(payload.modules, strict=True)
    except ValueError:  # pragma: no cover - seal_problems refused it when the plan file was loaded
        return [f"{branch.label}: the modules to upload are not modules"]
    problems: list[str] = []
    for module in held:
        old = server.modules.get(module.name)
        row = rows.get(module.name)
        if row is None:
            if old is None or old.digest != module.digest:
                problems.append(
                    f"{branch.label}: module {module.name!r} is shown as unchanged, but differs from the server's"
                )
        elif row.change == "changed" and old is not None and row.diff is not None:
            facts = ModuleFacts(old.name, old.digest, old.size, old.is_binary, old.text)
            if text_diff(facts, module, MAX_DIFF_LINES) != (row.diff, row.note):
                problems.append(f"{branch.label}: module {module.name!r} is not what the plan's diff shows")
    return problems


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
