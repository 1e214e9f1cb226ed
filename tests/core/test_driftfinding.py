"""``gitops/core/driftfinding.py``: the drift finding a plan carries, and the words it gives of the changed modules."""

from __future__ import annotations

from gitops.core.driftfinding import Drift


def test_only_the_drifted_status_is_drift() -> None:
    assert Drift(status="drifted", changed=["main"]).drifted
    for status in ("none", "no-record", "unknown"):
        assert not Drift(status=status).drifted


def test_the_changed_modules_are_listed_changed_added_removed() -> None:
    drift = Drift(status="drifted", added=["hack"], changed=["main"], removed=["role/x"])
    assert drift.modules_text() == "~ main, + hack, - role/x"


def test_a_limit_names_that_many_and_counts_the_rest() -> None:
    drift = Drift(status="drifted", changed=["a", "b"], added=["c", "d"], removed=["e"])
    assert drift.modules_text(limit=2) == "~ a, ~ b and 3 more"
    assert drift.modules_text(limit=5) == "~ a, ~ b, + c, + d, - e"


def test_a_deleted_branch_says_so_instead_of_its_modules() -> None:
    assert Drift(status="drifted", missing=True, removed=["main"]).modules_text() == "the branch was deleted"
