"""The lines an apply's outcome is told in (``gitops/core/planlines.py``), shared by the plan's renderers and the
apply report: pure text from the plan's values."""

from __future__ import annotations

from gitops.core.plan import Plan
from gitops.core.planlines import NOT_CHECKED, age, applied_line, no_changes_line
from gitops.core.remote import Provenance
from tests.core.factories import NOW, branch, listed, local, manifest, on_server, plan, view

SAME = {"main": "same\n"}


def _from_records(*names: str, how: Provenance, ago: float) -> Plan:
    """Branches unchanged since a record this run did not check (no branch list: nothing verified now)."""
    return plan(
        manifest(*(branch(name=n) for n in names)),
        local(*(("local", n, SAME) for n in names)),
        view("local", *(on_server(n, SAME, how=how, ago=ago) for n in names)),
    )


def test_age_reads_in_the_unit_a_person_would_say() -> None:
    assert [age(s) for s in (-3, 42, 89.4, 600, 5399, 7200, 3 * 86400)] == [
        "0 s ago",
        "42 s ago",
        "89 s ago",
        "10 min ago",
        "90 min ago",
        "2.0 h ago",
        "3.0 days ago",
    ]


def test_no_changes_says_what_it_rests_on() -> None:
    own = _from_records("main", how="own-upload", ago=180)
    assert no_changes_line(own, now=NOW, head="No changes") == (
        f"No changes since this tool's upload 3 min ago ({NOT_CHECKED})."
    )
    assert no_changes_line(own, now=NOW, head="Nothing to apply") == (
        f"Nothing to apply since this tool's upload 3 min ago ({NOT_CHECKED})."
    )
    two = _from_records("main", "next", how="ledger", ago=7200)
    assert no_changes_line(two, now=NOW, head="No changes") == (
        f"No changes since what this tool last knew ({NOT_CHECKED}: local/main: the ledger's record of 2.0 h ago; "
        "local/next: the ledger's record of 2.0 h ago)."
    )


def test_a_plan_verified_now_says_the_servers_hold_the_repository() -> None:
    verified = plan(
        manifest(branch()),
        local(("local", "main", SAME)),
        view("local", on_server("main", SAME), listed=listed("main")),
    )
    assert no_changes_line(verified, now=NOW, head="No changes") == (
        "No changes: the servers hold what the repository holds."
    )
    assert no_changes_line(verified, now=NOW, head="Nothing to apply") == "Nothing to apply."


def test_the_applied_line_counts_the_changed_branches_and_the_uploads() -> None:
    fresh = plan(
        manifest(branch()), local(("local", "main", {"main": "new\n"})), view("local", on_server("main", SAME))
    )
    assert applied_line(fresh) == (
        "Applied: 1 branch(es) changed with 1 upload(s); the servers now hold what the plan holds."
    )
