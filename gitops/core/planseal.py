"""The seal of a saved plan: whether the content ``apply FILE`` would upload is what the plan shows.

A plan file holds the exact modules to upload (``payloads``) and the code a rollback restores, which are never
rendered, so a reviewer never sees them. :func:`seal_problems` checks them against the plan's reviewed rows when the
file is loaded (``gitops.edges.planfile``); :func:`server_problems` checks what only the server's copy can tell, once
``apply`` has downloaded the branch (``gitops.core.apply``).
"""

from __future__ import annotations

from gitops.core.codeset import CodeSet, code_length
from gitops.core.diff import MAX_DIFF_LINES, text_diff
from gitops.core.plan import BranchPlan, Payload, Plan
from gitops.core.remote import ModuleFacts


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
