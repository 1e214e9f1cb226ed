"""Text and JSON of ``gitops status`` and ``gitops history`` (issue 39).

What runs where, and what this tool deployed before: read from the ledgers by :mod:`gitops.app.deploys`, shown here
without deciding anything. The JSON documents are versioned (``format_version``) like the plan's, so that scripts
and dashboards can rely on them.
"""

from __future__ import annotations

import json
from typing import Any

from gitops.core.budget import utc
from gitops.core.deploys import BranchStatus, Deploy, VerifyRecord

STATE_FORMAT_VERSION = 1


def _verification_text(record: VerifyRecord | None) -> str:
    if record is None:
        return "not verified (no verify: or never recorded)"
    what = {"pending": "PENDING (unverified: the watch never ended)", "interrupted": "INTERRUPTED (unverified)"}
    text = what.get(record.state, record.state.upper())
    return text + (f": {record.reason}" if record.reason else "")


_BASIS = {"download": "a download", "branch-list": "the branch list"}


def _held_text(row: BranchStatus) -> str | None:
    """What the server holds, as ``status`` found it: checked now, drifted, or the ledger's word labelled."""
    drift = row.drift
    if drift is None:
        return None
    if row.checked is None:
        why = row.unchecked or ("the server could not be asked" if row.problem else "the server was not asked")
        return f"not checked on the server ({why}); the ledger's word"
    checked = f"checked now by {_BASIS.get(row.checked, row.checked)}"
    if drift.drifted:
        return f"DRIFTED: changed outside Git since it was applied ({drift.modules_text(limit=10)}); {checked}"
    return f"that code ({checked})"


def status_text(rows: list[BranchStatus]) -> str:
    if not rows:
        return "No branch of the manifest was deployed by this tool (the ledgers hold no record).\n"
    out: list[str] = []
    problems: dict[str, str] = {}
    for row in rows:
        commit = row.commit[:12] if row.commit else "unknown commit"
        when = utc(row.applied_at) if row.applied_at is not None else "never by this tool"
        if row.exists is None:
            active = "active: not known (branch list not read)"
        elif not row.exists:
            active = "not on the server"
        else:
            active = "active for " + " and ".join(row.active) if row.active else "not active"
        out.append(f"{row.server}/{row.branch}: {commit}, applied {when}, {active}")
        held = _held_text(row)
        if held is not None:
            out.append(f"  on the server: {held}")
        out.append(f"  verification: {_verification_text(row.verification)}")
        if row.problem:
            problems[row.server] = row.problem
    out.extend(f"warning: server '{server}' could not be asked ({problem})" for server, problem in problems.items())
    return "\n".join(out) + "\n"


def _held_json(row: BranchStatus) -> dict[str, Any] | None:
    drift = row.drift
    if drift is None:
        return None
    return {
        "checked": row.verified,
        "basis": row.checked or "ledger",
        "checked_at": row.checked_at,
        "drift": drift.status,
        "added": drift.added,
        "changed": drift.changed,
        "removed": drift.removed,
        "missing": drift.missing,
        "unchecked": row.unchecked,
    }


def _record_json(record: VerifyRecord | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return {
        "state": record.state,
        "unsettled": record.unsettled,
        "reason": record.reason,
        "recorded_at": record.recorded_at,
        "undo": record.undo,
        "standby": record.standby,
    }


def status_json(rows: list[BranchStatus]) -> str:
    document = {
        "format_version": STATE_FORMAT_VERSION,
        "branches": [
            {
                "server": r.server,
                "branch": r.branch,
                "exists": r.exists,
                "active": list(r.active),
                "commit": r.commit,
                "applied_at": r.applied_at,
                "digest": r.digest,
                "server_code": _held_json(r),
                "verification": _record_json(r.verification),
                "problem": r.problem,
            }
            for r in rows
        ],
    }
    return json.dumps(document, indent=2) + "\n"


def history_text(history: dict[str, list[tuple[Deploy, bool]]], limit: int) -> str:
    out: list[str] = []
    for server, deploys in history.items():
        out.append(f"{server}: {len(deploys)} recorded deploy(s), newest first")
        for deploy, kept in deploys[:limit]:
            commit = deploy.commit[:12] if deploy.commit else "-"
            state = deploy.state or "not verified"
            code = "code kept" if kept else "digest only"
            out.append(
                f"  #{deploy.n:<4} {utc(deploy.applied_at)}  {deploy.branch}  {commit}  {deploy.how}  {state}  ({code})"
            )
        if len(deploys) > limit:
            out.append(f"  ... and {len(deploys) - limit} older (--limit N shows more)")
    return "\n".join(out) + "\n" if out else "No deploys recorded.\n"


def history_json(history: dict[str, list[tuple[Deploy, bool]]], limit: int) -> str:
    document = {
        "format_version": STATE_FORMAT_VERSION,
        "servers": {
            server: [
                {
                    "n": d.n,
                    "branch": d.branch,
                    "digest": d.digest,
                    "commit": d.commit,
                    "applied_at": d.applied_at,
                    "how": d.how,
                    "state": d.state,
                    "code_kept": kept,
                }
                for d, kept in deploys[:limit]
            ]
            for server, deploys in history.items()
        },
    }
    return json.dumps(document, indent=2) + "\n"


__all__ = ["history_json", "history_text", "status_json", "status_text"]
