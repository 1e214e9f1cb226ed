"""The pure rules of deployment state (issue 39): recorded states, the bounded history, which code is kept, and which
deploy a rollback restores."""

from __future__ import annotations

import pytest

from gitops.core.deploys import (
    Deploy,
    UnsettledDeploy,
    VerifyRecord,
    add_deploy,
    kept_digests,
    outcome_state,
    rollback_target,
    short_reason,
    with_state,
)


def test_outcomes_are_recorded_as_states_and_interrupted_wins() -> None:
    assert outcome_state("healthy", None, interrupted=False) == "healthy"
    assert outcome_state("unknown", None, interrupted=False) == "unknown"
    assert outcome_state("unhealthy", None, interrupted=False) == "failing"
    assert outcome_state("undo-failed", None, interrupted=False) == "rollback-failed"
    assert outcome_state("rolled-back", "healthy", interrupted=False) == "rolled-back"
    # Undone, but the code after the undo was not judged healthy: still failing as far as anyone knows.
    assert outcome_state("rolled-back", "unknown", interrupted=False) == "failing"
    assert outcome_state("rolled-back", None, interrupted=False) == "failing"
    assert outcome_state("healthy", None, interrupted=True) == "interrupted"


def test_unsettled_is_unverified_or_failing() -> None:
    def record(state: str) -> VerifyRecord:
        return VerifyRecord("main", state, "d", None, 1.0, 2.0)  # type: ignore[arg-type]

    unsettled = {s for s in ("pending", "interrupted", "healthy", "unknown", "failing", "rolled-back",
                              "rollback-failed") if record(s).unsettled}  # fmt: skip
    assert unsettled == {"pending", "interrupted", "failing", "rollback-failed"}


def test_the_history_is_numbered_on_and_bounded() -> None:
    history: list[Deploy] = []
    for i in range(7):
        history = add_deploy(history, Deploy(0, "main", f"d{i}", None, float(i)), limit=5)
    assert [d.n for d in history] == [3, 4, 5, 6, 7]
    assert [d.digest for d in history] == ["d2", "d3", "d4", "d5", "d6"]
    marked = with_state(history, "main", "healthy")
    assert [d.state for d in marked] == [None, None, None, None, "healthy"]
    assert with_state(history, "other", "healthy") == history


def test_the_code_of_the_last_few_deploys_per_branch_and_of_each_undo_is_kept() -> None:
    history = [Deploy(i + 1, "main" if i % 2 else "sim", f"d{i}", None, float(i)) for i in range(10)]
    history.append(Deploy(11, "main", "d9", None, 11.0))  # the same code again counts once
    records = [VerifyRecord("main", "pending", "d9", None, 1.0, 1.0, undo="restore", restore_digest="old")]
    kept = kept_digests(history, records, per_branch=2)
    assert kept == {"d9", "d7", "d8", "d6", "old"}


def test_the_deploy_a_rollback_restores() -> None:
    history = [
        Deploy(1, "main", "a", "c1", 1.0),
        Deploy(2, "sim", "s", "c2", 2.0),
        Deploy(3, "main", "b", "c3", 3.0),
        Deploy(4, "main", "b", "c3", 4.0),
    ]
    assert rollback_target(history, "main", None, "b").n == 1  # the newest whose code differs from what runs
    assert rollback_target(history, "main", 3, "b").n == 3
    assert rollback_target(history, "main", None, "b", restore="a").n == 1
    before_the_tool = rollback_target(history, "main", None, "b", restore="z")
    assert (before_the_tool.n, before_the_tool.digest) == (0, "z")
    with pytest.raises(ValueError, match="there is no deploy 9 in the history"):
        rollback_target(history, "main", 9, "b")
    with pytest.raises(ValueError, match="deploy 2 went to branch sim, not main"):
        rollback_target(history, "main", 2, "b")
    with pytest.raises(ValueError, match="no earlier code of main"):
        rollback_target(history[:1], "main", None, "a")


def test_a_note_says_what_to_do_and_a_reason_is_one_short_line() -> None:
    note = UnsettledDeploy("local", "main", "interrupted", "by SIGINT", "0123456789abcdef", 1.0, "restore")
    assert note.line() == (
        "local/main: deploy 0123456789ab UNVERIFIED: its watch was interrupted: by SIGINT; judge it again with "
        "'gitops apply --verify-again' or undo it with 'gitops rollback (restores the code kept for it)'"
    )
    assert short_reason("first\nsecond") == "first"
    assert len(short_reason("x" * 1000)) == 300
