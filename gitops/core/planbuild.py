"""Building a plan: per branch of the manifest, what apply must do to make the server hold the local code.

:func:`build_plan` is a pure function of (manifest, local code, what is known of the servers, budget facts, time):
no HTTP, git or clock inside. It decides each branch's diff, steps, upload, verification and rollback, refuses an
upload the server would not take, and fills the frozen values of :mod:`gitops.core.plan`.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from gitops.config.manifest import ActiveName, BranchConfig, LoadedManifest, VerifyConfig
from gitops.core.budget import BudgetFacts, EndpointBudget, assess
from gitops.core.codeset import CodeSet, Module, WireModule, code_length, upload_body_length
from gitops.core.diff import BranchDiff, diff_branch
from gitops.core.endpoints import ACTIVATE, CLONE, MAX_BODY_BYTES, MAX_BRANCHES, MAX_CODE_LENGTH, UPLOAD
from gitops.core.health import VerifyOverrides
from gitops.core.local import LocalBranch, LocalCode
from gitops.core.plan import (
    Action,
    BranchPlan,
    Payload,
    Plan,
    RemoteSeen,
    Step,
    VerifyStep,
    requests_needed,
    rollback_activations,
    rollback_uploads,
)
from gitops.core.remote import RemoteBranch, RemoteView
from gitops.errors import ServiceError, SourceError


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
