"""The rehearsal's figures and its comparison (``gitops.core.rehearsal``): pure, on made-up ticks and cpu numbers."""

from __future__ import annotations

import pytest

from gitops.core.health import Thresholds, Tick
from gitops.core.rehearsal import (
    ErrorSite,
    batch_medians,
    bot_frame,
    change,
    compare,
    cpu_stats,
    distinct_errors,
    memory_floor,
    overall,
    percentile,
    side,
)
from gitops.core.sourcemap import SourceMap

BOOM = (
    "Error: boom\n"
    "    at module.exports.loop (main:1:149)\n"
    "    at __mainLoop:1:52\n"
    "    at exports.evalCode (&lt;isolated-vm>:15381:76)\n"
)
SERVER_FAULT = "ReferenceError: _ is not defined\n    at <runtime>:20:1\n    at Object.run (@screeps/driver:3:1)\n"
MODULES = ("main", "role.harvester")


def test_percentile_is_the_nearest_rank_value() -> None:
    values = [float(v) for v in range(1, 21)]  # 1..20
    assert percentile(values, 95) == 19.0
    assert percentile(values, 100) == 20.0
    assert percentile([5.0], 95) == 5.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    with pytest.raises(ValueError, match="no values"):
        percentile([], 95)


def test_cpu_stats_mean_p95_and_max() -> None:
    stats = cpu_stats([1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 21])
    assert stats is not None
    assert stats.samples == 20
    assert stats.mean == pytest.approx(2.05)  # (18 + 2 + 21) / 20
    assert stats.p95 == 2.0
    assert stats.max == 21.0
    assert cpu_stats([]) is None


def test_the_bots_top_frame_is_found_and_the_runtimes_frames_are_not() -> None:
    assert bot_frame(BOOM, MODULES) == "main:1"
    assert bot_frame(SERVER_FAULT, MODULES) is None
    nested = "TypeError: x\n    at harvest (role.harvester:12:3)\n    at loop (main:4:5)\n"
    assert bot_frame(nested, MODULES) == "role.harvester:12"
    # A source-mapped stack (the TypeScript starter's ErrorMapper) names the source file.
    mapped = "Error: no\n    at loop (src/main.ts:7:11)\n    at __mainLoop:1:52\n"
    assert bot_frame(mapped, MODULES) == "src/main.ts:7"
    # The first line is the message, never a frame, even when it looks like one.
    assert bot_frame("main:3:1 went wrong", MODULES) is None


def test_distinct_errors_are_counted_by_message_and_place_most_frequent_first() -> None:
    ticks = [Tick(errors=(BOOM,)), Tick(errors=(SERVER_FAULT,)), Tick(errors=(BOOM,)), Tick(log=("ok",))]
    assert distinct_errors(ticks, MODULES) == (
        ErrorSite("Error: boom", "main:1", 2),
        ErrorSite("ReferenceError: _ is not defined", None, 1),
    )


def test_a_side_is_judged_by_the_verify_judge_with_cpu_terminations_and_memory() -> None:
    ticks = [Tick(log=("a",)), Tick(log=("b",), errors=(BOOM,)), Tick(errors=("CPU limit reached",))] + [
        Tick(log=("c",))
    ] * 7
    result = side(
        "head", ticks, [1.0, 2.0, None, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 10.0], 42, Thresholds(ticks=10), MODULES
    )
    assert result.status == "healthy"  # 2 of 10 failed: under the default 50 %
    assert (result.ticks, result.failed_ticks, result.cpu_terminations, result.memory_bytes) == (10, 2, 1, 42)
    assert result.cpu is not None
    assert result.cpu.samples == 9
    assert result.cpu.max == 10.0
    doc = result.to_json()
    assert {"ticks", "failed_ticks", "errors", "cpu"} <= doc.keys()
    assert doc["errors"] == [
        {"message": "Error: boom", "where": "main:1", "count": 1},
        {"message": "CPU limit reached", "where": None, "count": 1},
    ]


def test_a_side_that_throws_every_tick_is_failing_and_one_without_ticks_is_unknown() -> None:
    failing = side("head", [Tick(log=(), errors=(BOOM,))] * 5, [1.0] * 5, None, Thresholds(ticks=5), MODULES)
    assert failing.status == "failing"
    empty = side("head", [], [], None, Thresholds(ticks=5), MODULES, problem="the world ran too slowly")
    assert empty.status == "unknown"
    assert empty.cpu is None


def test_compare_names_the_errors_the_base_did_not_have_and_the_cpu_change() -> None:
    base = side("base", [Tick(log=("x",), errors=(SERVER_FAULT,))] + [Tick(log=("x",))] * 3, [1.0] * 4, 10,
                Thresholds(ticks=4), MODULES)  # fmt: skip
    head = side("head", [Tick(log=("x",), errors=(BOOM,)), Tick(log=("x",), errors=(SERVER_FAULT,))]
                + [Tick(log=("x",))] * 2, [2.0, 3.0, 2.0, 3.0], 12, Thresholds(ticks=4), MODULES)  # fmt: skip
    comparison = compare("local/main", head, base)
    assert comparison.new_errors == (ErrorSite("Error: boom", "main:1", 1),)
    assert comparison.cpu_change == pytest.approx(1.5)
    # The server's fault (no frame of the bot's) is not the bot's (issue 39's blame rule): 1 of 4 ticks is the
    # bot's, under the 50 % threshold.
    assert head.failed_ticks == 1
    assert comparison.result == "healthy"
    doc = comparison.to_json()
    assert doc["base"] is not None
    assert doc["cpu_mean_change"] == 1.5
    alone = compare("local/main", head, None)
    assert alone.base is None
    assert alone.new_errors == ()
    assert alone.cpu_change is None


def test_overall_is_the_worst_branch() -> None:
    assert overall(["healthy", "healthy"]) == "healthy"
    assert overall(["healthy", "unknown"]) == "unknown"
    assert overall(["unknown", "failing", "healthy"]) == "failing"
    assert overall([]) == "unknown"


CAUGHT = "room W1N1 failed: TypeError: Cannot read properties of undefined (reading 'x')\n    at main:7:57\n"


def test_caught_errors_fail_a_side_alone_at_the_error_share() -> None:
    ticks = [Tick(log=(CAUGHT, "tick 5"))] * 3 + [Tick(log=("tick 9",))]
    result = side("head", ticks, [1.0] * 4, 10, Thresholds(ticks=4), MODULES)
    assert result.status == "failing"  # 3 of 4 ticks: the uncaught judge alone said healthy
    assert result.uncaught is not None
    assert result.uncaught.status == "healthy"
    assert result.health.reason == "3 of 4 ticks logged caught errors (threshold 50%); no uncaught error"
    assert result.caught_ticks == 3
    assert result.caught == (ErrorSite("TypeError: Cannot read properties of undefined (reading 'x')", "main:7", 3),)
    assert result.to_json()["caught_error_ticks"] == 3
    # Under the share: healthy, the caught errors still listed.
    few = side("head", ticks[:1] + ticks[3:] * 3, [1.0] * 4, 10, Thresholds(ticks=4), MODULES)
    assert few.status == "healthy"
    assert few.caught_ticks == 1


def test_with_a_base_only_new_caught_errors_count_against_the_head() -> None:
    same = [Tick(log=(CAUGHT,))] * 4
    other = "Error: the new code broke\n    at run (role.harvester:3:1)"
    base = side("base", same, [1.0] * 4, 10, Thresholds(ticks=4), MODULES)
    head = side("head", same, [1.0] * 4, 10, Thresholds(ticks=4), MODULES)
    assert base.status == head.status == "failing"  # alone, each fails
    known = compare("local/main", head, base)
    assert known.result == "healthy"  # the pull request did not make it worse
    assert known.new_caught == ()
    assert known.gone_caught == ()
    worse = side("head", [Tick(log=(CAUGHT, other))] * 4, [1.0] * 4, 10, Thresholds(ticks=4), MODULES)
    comparison = compare("local/main", worse, base)
    assert comparison.result == "failing"
    assert "4 of 4 ticks logged new caught errors (not in the base)" in comparison.head.health.reason
    assert comparison.new_caught == (ErrorSite("Error: the new code broke", "role.harvester:3", 4),)
    fixed = compare("local/main", side("head", [Tick(log=("ok",))] * 4, [1.0] * 4, 1, Thresholds(ticks=4),
                                       MODULES), base)  # fmt: skip
    assert fixed.result == "healthy"
    assert [e.where for e in fixed.gone_caught] == ["main:7"]


def test_the_console_diff_is_by_pattern_so_counters_are_not_new() -> None:
    base = side("base", [Tick(log=(f"tick {n}",)) for n in range(4)], [1.0] * 4, 1, Thresholds(ticks=4), MODULES)
    head = side("head", [Tick(log=(f"tick {n + 7}", f"creep 5e3f00aa0011bc{n} stuck")) for n in range(4)],
                [1.0] * 4, 1, Thresholds(ticks=4), MODULES)  # fmt: skip
    comparison = compare("local/main", head, base)
    assert comparison.new_lines == (("creep ID stuck", 4),)
    assert comparison.to_json()["new_console_lines"] == [{"pattern": "creep ID stuck", "ticks": 4}]


def test_a_change_has_its_noise_band_and_is_significant_only_outside_it() -> None:
    noisy = change([1.0, 3.0, 1.0, 3.0, 2.0, 2.0], [1.5, 3.5, 1.5, 3.5, 2.5, 2.5])
    assert noisy is not None
    assert noisy.delta == pytest.approx(0.5)
    assert noisy.low < 0 < noisy.high
    assert not noisy.significant
    base = [1.0, 1.2, 0.8, 1.1, 0.9, 1.3, 0.7] * 6
    clear = change(base, [v + 2 for v in base[3:] + base[:3]])
    assert clear is not None
    assert clear.significant
    assert 1.5 < clear.low < 2.0 < clear.high < 2.5
    assert clear.to_json()["significant"] is True
    assert change([1.0, 2.0, 3.0, 4.0, 5.0], [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]) is None  # one batch: too few to weigh
    assert batch_medians([5.0, 1.0, 3.0, 2.0, 9.0, 4.0, 7.0]) == [3.0, 4.0]  # runs of 3, the 7th left over
    assert batch_medians([float(i) for i in range(40)]) == [4 * i + 1.5 for i in range(10)]  # 10 runs of 4
    # A spike (a garbage collection, the machine's other work) is one value of its run: it moves neither side.
    spiky = change([2.0, 3.0] * 20, [2.0, 3.0] * 19 + [2.0, 90.0])
    assert spiky is not None
    assert not spiky.significant
    assert spiky.delta == pytest.approx(0.0)
    same = change([5.0] * 6, [5.0] * 6)
    assert same is not None
    assert not same.significant


def test_terminations_are_counted_from_every_text_of_the_servers() -> None:
    texts = [
        "Script execution timed out.",
        "Script execution has been terminated: CPU bucket is empty",
        "Script execution timed out: CPU time limit reached",
        "CPU limit reached",
        "Error: boom",
    ]
    result = side("head", [Tick(errors=(t,)) for t in texts], [None] * 5, None, Thresholds(ticks=5), MODULES)
    assert result.cpu_terminations == 4
    assert result.status == "failing"


def test_the_bots_frame_goes_through_its_source_map() -> None:
    source_map = SourceMap.parse(TSC_MAP)
    error = "Error: mapped failure\n    at Object.loop (main:8:15)\n    at __mainLoop:1:52\n"
    assert bot_frame(error, MODULES, {"main.js.map": source_map}) == "src/main.ts:9"
    assert bot_frame(error, MODULES) == "main:8"  # no map: the bundle's line
    assert bot_frame(error, MODULES, {"other.js.map": source_map}) == "main:8"
    ticks = [Tick(log=("caught: " + error,))]
    result = side("head", ticks, [1.0], 1, Thresholds(ticks=1), MODULES, maps={"main.js.map": source_map})
    assert result.caught[0].where == "src/main.ts:9"


# What tsc 5 (--sourceMap --module commonjs --target es2019) wrote for a loop that throws at src/main.ts line 9
# (its bundle's line 8, column 15).
TSC_MAP = (
    '{"version":3,"file":"main.js","sourceRoot":"","sources":["../../src/main.ts"],"names":[],"mappings":";;;AAIA,'
    "SAAgB,IAAI;IAClB,MAAM,MAAM,GAAI,UAAkB,CAAC,MAAiB,CAAC;IACrD,MAAM,CAAC,IAAI,GAAG,CAAC,MAAM,CAAC,IAAI,IAAI,CAAC,CAAC,GAAG,CAAC,CAAC;"
    'IACrC,IAAI,MAAM,CAAC,IAAI,GAAG,CAAC,EAAE;QACnB,MAAM,IAAI,KAAK,CAAC,gBAAgB,CAAC,CAAC;KACnC;AACH,CAAC;AAND,oBAMC"}'
)


def test_a_memory_change_counts_only_from_its_floor() -> None:
    assert memory_floor([1000.0] * 4) == 64.0
    assert memory_floor([12_000.0] * 4) == pytest.approx(120.0)
    # Main against main on a large bot: 75 bytes of 11.9 kB, every tick: outside the interval, under the floor.
    small = change([11_843.0] * 40, [11_918.0] * 40, floor=memory_floor([11_843.0] * 40))
    assert small is not None
    assert small.low > 0
    assert not small.significant
    grown = change([11_843.0] * 40, [13_000.0] * 40, floor=memory_floor([11_843.0] * 40))
    assert grown is not None
    assert grown.significant
