"""The pure judge of a deploy's health: ticks, errors, thresholds; never healthy without ticks."""

from __future__ import annotations

import random
import tracemalloc

import pytest

from gitops.core.health import (
    CPU_LIMIT_TEXT,
    EVIDENCE_LINES,
    ConsoleEvent,
    Frame,
    Thresholds,
    Tick,
    TickTally,
    frames,
    group_ticks,
    judge_ticks,
    runs_no_code,
    unknown,
)


def _log(*lines: str) -> ConsoleEvent:
    return ConsoleEvent(log=tuple(lines))


def _err(text: str) -> ConsoleEvent:
    return ConsoleEvent(error=text)


def test_an_error_belongs_to_the_open_tick_or_is_a_tick_of_its_own() -> None:
    ticks = group_ticks([_err("early"), _log("a"), _err("e1"), _err("e2"), _log(), _log("b"), _err("late")])
    assert ticks == [
        Tick((), ("early",)),
        Tick(("a",), ("e1",)),
        Tick((), ("e2",)),
        Tick((), ()),
        Tick(("b",), ("late",)),
    ]
    assert group_ticks([_err("alone")]) == [Tick((), ("alone",))]
    assert group_ticks([]) == []


def test_terminated_runs_send_only_errors_and_still_count_as_ticks() -> None:
    cpu = "Script execution has been terminated: CPU limit reached"
    health = judge_ticks(group_ticks([_err(cpu)] * 4), Thresholds(ticks=3))
    assert (health.status, health.ticks_seen, health.cpu_terminations) == ("failing", 4, 4)


def test_healthy_needs_the_ticks_and_few_failures() -> None:
    ticks = [Tick(("ok",))] * 9 + [Tick((), ("TypeError: once",))]
    health = judge_ticks(ticks, Thresholds(ticks=10, error_share=0.5))
    assert health.status == "healthy"
    assert (health.ticks_seen, health.failed_ticks) == (10, 1)
    assert health.evidence == ("TypeError: once",)


def test_failing_at_the_share_with_evidence_and_cpu_terminations() -> None:
    boom = "TypeError: Cannot read property 'x' of undefined\n    at loop (main:3:5)\n    at a\n    at b\n    at c"
    ticks = [Tick((), (boom,))] * 3 + [Tick((), ("Script execution has been terminated: CPU limit reached",))] * 2
    ticks += [Tick()] * 5
    health = judge_ticks(ticks, Thresholds(ticks=10, error_share=0.5))
    assert health.status == "failing"
    assert health.failed_ticks == 5
    assert health.cpu_terminations == 2
    assert health.evidence[0].count("\n") == 3  # message and the top of the stack, not all of it
    assert "CPU limit" in health.evidence[1]


def test_zero_ticks_is_never_healthy() -> None:
    for share in (0.0, 0.5, 1.0):
        health = judge_ticks([], Thresholds(ticks=0, error_share=share), timeout=5)
        assert health.status == "unknown"
        assert "no tick" in health.reason


def test_too_few_ticks_is_unknown_unless_the_failures_already_decide() -> None:
    slow = judge_ticks([Tick()] * 2, Thresholds(ticks=10), timeout=30)
    assert slow.status == "unknown"
    assert slow.reason == "only 2 of 10 ticks came within 30 s"
    decided = judge_ticks([Tick((), ("x",))] * 5, Thresholds(ticks=10, error_share=0.5), timeout=30)
    assert decided.status == "failing"


def test_a_problem_makes_unknown_and_fail_on_patterns_count() -> None:
    assert judge_ticks([], Thresholds(), problem="auth failed").reason == "auth failed"
    assert unknown("socket refused").status == "unknown"
    ticks = [Tick(("[ERROR] caught: spawn failed",))] * 10
    assert judge_ticks(ticks, Thresholds(ticks=10)).status == "healthy"
    caught = judge_ticks(ticks, Thresholds(ticks=10, fail_on=(r"^\[ERROR\]",)))
    assert caught.status == "failing"
    assert caught.evidence == ("[ERROR] caught: spawn failed",)


def test_zero_share_fails_on_any_error_only() -> None:
    assert judge_ticks([Tick()] * 3, Thresholds(ticks=3, error_share=0.0)).status == "healthy"
    assert judge_ticks([Tick()] * 2 + [Tick((), ("x",))], Thresholds(ticks=3, error_share=0.0)).status == "failing"


# --- blame only what is the bot's (issue 39) ----------------------------------------------------------------------

#: The private server's own failure when its driver's V8 snapshot is broken (docs: service-facts): every tick, for a
#: bot that only logs. As the driver sends it: ``<`` escaped, the stack entirely the server's runtime.
SERVER_FAULT = (
    "ReferenceError: _ is not defined\n"
    "    at &lt;runtime&gt;:20211:24\n"
    "    at &lt;runtime&gt;:31458:5\n"
    "    at Object.exports.make (/srv/screeps/node_modules/@screeps/driver/lib/runtime/make.js:168:57)\n"
    "    at processTicksAndRejections (node:internal/process/task_queues:95:5)"
)
BOT_FAULT = (
    "TypeError: Cannot read property 'moveTo' of null\n"
    "    at Object.run (role.harvester:14:15)\n"
    "    at Object.module.exports.loop (main:7:22)\n"
    "    at __mainLoop:1:52\n"
    "    at &lt;runtime&gt;:20211:24"
)
BOT = frozenset({"main", "role.harvester"})


def test_frames_are_read_with_the_servers_escapes() -> None:
    assert frames(SERVER_FAULT)[:3] == [
        Frame("<runtime>", 20211),
        Frame("<runtime>", 31458),
        Frame("/srv/screeps/node_modules/@screeps/driver/lib/runtime/make.js", 168),
    ]
    assert frames("Error: thrown without a stack") == []


def test_an_error_with_no_frame_of_the_bot_is_the_servers_and_unknown_never_failing() -> None:
    ticks = [Tick(("only console.log",), (SERVER_FAULT,))] * 10
    health = judge_ticks(ticks, Thresholds(ticks=10), bot_modules=BOT)
    assert health.status == "unknown"
    assert (health.failed_ticks, health.server_failed_ticks) == (0, 10)
    assert health.reason.startswith("10 of 10 ticks failed in the server's own code, not the bot's")
    assert health.reason.endswith("ReferenceError: _ is not defined")
    assert health.bot_frame is None
    # Before it was known which modules are the bot's, the same ticks condemned it (the wrong rollback).
    assert judge_ticks(ticks, Thresholds(ticks=10)).status == "failing"


def test_the_bots_own_error_is_failing_and_names_its_top_frame() -> None:
    ticks = [Tick((), (BOT_FAULT,))] * 3
    health = judge_ticks(ticks, Thresholds(ticks=3), bot_modules=BOT)
    assert (health.status, health.failed_ticks, health.bot_frame) == ("failing", 3, "role.harvester:14")
    # A stack through the runtime into the bot is still the bot's; a frameless error (CPU, a thrown string) too.
    assert judge_ticks([Tick((), ("Error: boom",))] * 3, Thresholds(ticks=3), bot_modules=BOT).status == "failing"


def test_a_few_server_hiccups_beside_healthy_ticks_stay_healthy() -> None:
    ticks = [Tick((), (SERVER_FAULT,))] + [Tick(("ok",))] * 9
    health = judge_ticks(ticks, Thresholds(ticks=10, error_share=0.5), bot_modules=BOT)
    assert (health.status, health.server_failed_ticks) == ("healthy", 1)


# --- the tally: events counted as they come, never kept (issue 37) -------------------------------------------------


@pytest.mark.parametrize("seed", range(40))
def test_the_tally_judges_as_the_ticks_of_all_the_events_would(seed: int) -> None:
    rng = random.Random(seed)
    events = [
        rng.choice([_log("ok"), _log("[ERROR] x"), _err(f"e{rng.randrange(9)}"), _err(CPU_LIMIT_TEXT)])
        for _ in range(rng.randrange(0, 40))
    ]
    thresholds = Thresholds(ticks=rng.randrange(1, 12), error_share=rng.choice([0.2, 0.5]), fail_on=(r"^\[ERROR\]",))
    skip = rng.randrange(0, 3)
    tally = TickTally(thresholds, skip=skip, limit=thresholds.ticks)
    for event in events:
        tally.add(event)
    expected = judge_ticks(group_ticks(events)[skip:][: thresholds.ticks], thresholds, timeout=5)
    assert tally.judge_counted(timeout=5) == expected
    assert tally.opened == len(group_ticks(events))


def test_an_endless_console_stream_is_counted_in_bounded_memory() -> None:
    """A hostile server's stream of large, distinct errors: the tally keeps counts and the first distinct lines,
    not the events (the watch used to hold every event: memory toward gigabytes)."""
    tally = TickTally(Thresholds(ticks=10**9), skip=2)
    tracemalloc.start()
    try:
        for n in range(5000):
            tally.add(_log(f"{n}" + "x" * 20_000))
            tally.add(_err(f"TypeError {n}: " + "y" * 20_000))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000  # the events were 200 MB
    health = tally.judge_counted(timeout=1)
    assert (health.ticks_seen, health.failed_ticks) == (4998, 4998)  # the first two settle; the open one counts
    assert len(health.evidence) == EVIDENCE_LINES
    assert health.evidence[0].startswith("TypeError 2: ")


@pytest.mark.parametrize(
    ("version", "runs"),
    [
        ({"ok": 1, "standin": True, "runsCode": False, "console": "empty"}, False),  # gitops serve
        ({"ok": 1, "standin": True}, False),  # an older stand-in: it never ran code either
        ({"ok": 1, "standin": True, "runsCode": False, "console": "simulated"}, True),  # --testing: rules decide
        ({"ok": 1, "protocol": 14, "serverData": {"shards": ["shard0"]}}, True),  # the private server
        ({"ok": 1, "standin": "yes"}, True),  # not the stand-in's marker
        (None, True),  # no answer: the watch decides
    ],
)
def test_a_server_that_runs_no_code_is_named_from_its_version_answer(
    version: dict[str, object] | None, runs: bool
) -> None:
    reason = runs_no_code(version)
    assert (reason is None) == runs
    if reason is not None:
        assert "stand-in (gitops serve), which runs no code" in reason
