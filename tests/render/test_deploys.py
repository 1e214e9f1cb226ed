"""``gitops/render/deploys.py``: ``gitops status`` and ``gitops history`` in text and versioned JSON, from values."""

from __future__ import annotations

import json

from gitops.core.deploys import BranchStatus, Deploy, VerifyRecord
from gitops.core.driftfinding import Drift
from gitops.render.deploys import STATE_FORMAT_VERSION, history_json, history_text, status_json, status_text

AT = 1_800_000_000.0  # 2027-01-15 08:00 UTC
COMMIT = "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"


def _row(**changes: object) -> BranchStatus:
    fields: dict[str, object] = {
        "server": "local",
        "branch": "main",
        "exists": True,
        "active": ("world",),
        "commit": COMMIT,
        "applied_at": AT,
        "digest": "ab" * 32,
        "verification": None,
        "drift": Drift(status="none"),
        "checked": "download",
        "checked_at": AT,
    }
    return BranchStatus(**{**fields, **changes})  # type: ignore[arg-type]


def test_a_branch_checked_now() -> None:
    assert status_text([_row()]) == (
        "local/main: 1a2b3c4d5e6f, applied 2027-01-15 08:00 UTC, active for world\n"
        "  on the server: that code (checked now by a download)\n"
        "  verification: not verified (no verify: or never recorded)\n"
    )


def test_drift_and_a_pending_verification_are_shouted() -> None:
    record = VerifyRecord("main", "pending", "ab" * 32, COMMIT, AT, AT)
    text = status_text([_row(drift=Drift(status="drifted", changed=["main"]), verification=record)])
    assert (
        "  on the server: DRIFTED: changed outside Git since it was applied (~ main); checked now by a download\n"
        in text
    )
    assert "  verification: PENDING (unverified: the watch never ended)\n" in text


def test_a_server_that_could_not_be_asked_is_the_ledgers_word_and_a_warning() -> None:
    row = _row(exists=None, checked=None, checked_at=None, drift=Drift(status="unknown"), problem="refused")
    text = status_text([row])
    assert "active: not known (branch list not read)" in text
    assert "not checked on the server (the server could not be asked); the ledger's word" in text
    assert text.endswith("warning: server 'local' could not be asked (refused)\n")


def test_no_rows_says_why() -> None:
    assert status_text([]) == "No branch of the manifest was deployed by this tool (the ledgers hold no record).\n"


def test_status_json_is_versioned_and_whole() -> None:
    document = json.loads(status_json([_row(active=())]))
    assert document["format_version"] == STATE_FORMAT_VERSION
    [branch] = document["branches"]
    assert branch["active"] == []
    assert branch["server_code"] == {
        "checked": True,
        "basis": "download",
        "checked_at": AT,
        "drift": "none",
        "added": [],
        "changed": [],
        "removed": [],
        "missing": False,
        "unchecked": None,
    }
    assert branch["verification"] is None


def test_history_newest_first_limited() -> None:
    deploys = [(Deploy(n, "main", None, COMMIT if n == 3 else None, AT + n, state=None), n == 3) for n in (3, 2, 1)]
    text = history_text({"local": deploys}, limit=2)
    assert text.splitlines() == [
        "local: 3 recorded deploy(s), newest first",
        "  #3    2027-01-15 08:00 UTC  main  1a2b3c4d5e6f  apply  not verified  (code kept)",
        "  #2    2027-01-15 08:00 UTC  main  -  apply  not verified  (digest only)",
        "  ... and 1 older (--limit N shows more)",
    ]
    assert history_text({}, limit=5) == "No deploys recorded.\n"
    document = json.loads(history_json({"local": deploys}, limit=2))
    assert [d["n"] for d in document["servers"]["local"]] == [3, 2]
    assert document["servers"]["local"][0]["code_kept"] is True
