"""The exit code and the words of one verification (``app.verifying.Verification``), issue 39: 10 only when the code
after the undo was judged healthy; an interrupted watch is 12; the bot's top frame is named."""

from __future__ import annotations

from gitops.core.health import Health, Verification, worst
from gitops.errors import ExitCode

FAILING = Health("failing", "3 of 3 ticks failed (threshold 50%)", 3, 3, 0, ("TypeError: x",), 0, "role.harvester:14")


def test_rolled_back_is_10_only_when_judged_healthy_after() -> None:
    def undone(after: Health | None) -> Verification:
        return Verification("local/main", FAILING, "restored", undo="the previous code was uploaded again", after=after)

    assert undone(Health("healthy", "3 ticks seen")).exit_code == ExitCode.ROLLED_BACK
    assert undone(Health("unknown", "no tick came within 30 s")).exit_code == ExitCode.UNHEALTHY
    assert undone(Health("failing", "3 of 3 ticks failed")).exit_code == ExitCode.UNHEALTHY
    assert undone(None).exit_code == ExitCode.UNHEALTHY


def test_an_interrupted_watch_is_unverified_and_says_what_to_do() -> None:
    partial = Health("unknown", "interrupted by SIGINT after 4 of 1000 ticks", 4)
    v = Verification("local/main", partial, interrupted=True)
    assert v.exit_code == ExitCode.UNVERIFIED
    lines = v.lines()
    assert lines[0] == (
        "verify local/main: INTERRUPTED after 4 tick(s), so far unknown: interrupted by SIGINT after 4 of 1000 ticks"
    )
    assert "'gitops apply --verify-again' judges it again, 'gitops rollback' undoes it" in lines[-1]
    assert v.document()["interrupted"] is True


def test_the_text_names_the_bots_top_frame() -> None:
    lines = Verification("local/main", FAILING).lines()
    assert "  at module role.harvester, line 14 (the top frame in the bot's own code)" in lines
    assert Verification("local/main", FAILING).document()["health"]["bot_frame"] == "role.harvester:14"  # type: ignore[index]


def test_the_most_serious_code_of_a_run_wins() -> None:
    assert worst([]) == 0
    assert worst([ExitCode.ROLLED_BACK, ExitCode.UNHEALTHY]) == ExitCode.UNHEALTHY
    assert worst([ExitCode.UNHEALTHY, ExitCode.UNVERIFIED]) == ExitCode.UNVERIFIED
    assert worst([ExitCode.UNVERIFIED, ExitCode.UNDO_FAILED, ExitCode.OK]) == ExitCode.UNDO_FAILED
