"""``gitops/core/rehearsalresult.py``: a rehearsal's result as data and back, pure (the file is
``edges/rehearsalfile.py``'s), each value out of what a rehearsal writes refused with its place."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from gitops.core.health import Thresholds, Tick
from gitops.core.rehearsal import compare, side
from gitops.core.rehearsalresult import (
    MAX_BRANCHES,
    RehearsalResult,
    ResultProblem,
    result_data,
    result_from_data,
)

BOOM = "Error: boom\n    at module.exports.loop (main:1:149)\n"


def _result() -> RehearsalResult:
    base = side("base", [Tick(log=("x",))] * 4, [1.0, 1.5, 1.0, 2.0], 10, Thresholds(ticks=4), ["main"])
    head = side("head", [Tick(errors=(BOOM,))] * 4, [3.0, 3.0, 3.5, 4.0], 12, Thresholds(ticks=4), ["main"])
    return RehearsalResult(4, "working tree", "ref main", (compare("local/main", head, base),))


def test_a_result_reads_back_from_its_json_as_it_was() -> None:
    original = _result()
    data = json.loads(json.dumps(result_data(original)))  # what the file holds
    back = result_from_data(data)
    assert back.result == original.result == "failing"
    assert (back.ticks, back.head_source, back.base_source) == (4, "working tree", "ref main")
    [c] = back.branches
    [o] = original.branches
    assert c.head.cpu_values == o.head.cpu_values == (3.0, 3.0, 3.5, 4.0)
    assert c.new_errors == o.new_errors
    assert c.new_errors  # the failure this result is about survives the trip
    assert result_data(back) == result_data(original)


def test_a_rehearsal_that_stopped_keeps_its_reason_and_exit_code() -> None:
    stopped = RehearsalResult(0, "working tree", None, (), error="the world could not start", error_code=14)
    back = result_from_data(result_data(stopped))
    assert (back.error, back.error_code, back.branches, back.base_source) == ("the world could not start", 14, (), None)
    assert back.result == stopped.result


def _branch0(data: dict[str, Any]) -> dict[str, Any]:
    branch: dict[str, Any] = data["branches"][0]
    return branch


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: d.update(exit_code=256), "has exit_code that is not a whole number from 0 to 255"),
        (lambda d: d.update(ticks=-1), "has ticks that is not a whole number from 0 to 10001"),
        (lambda d: d.update(branches=[{}] * (MAX_BRANCHES + 1)), "has 501 entries in branches, more than a rehearsal"),
        (lambda d: d.update(error=7), "has error that is not a text"),
        (lambda d: _branch0(d).update(cpu_change={"delta": "1", "low": 0, "high": 1}), "cpu_change.delta that is not"),
        (
            lambda d: _branch0(d).update(memory_change={"delta": 1, "low": 0, "high": 1, "floor": -1}),
            "branches[0].memory_change.floor that is not a finite number, 0 or more",
        ),
        (lambda d: _branch0(d).update(new_console_lines=["x"]), "branches[0].new_console_lines[0] that is not an obj"),
        (lambda d: _branch0(d)["new_errors"].append({"message": "m", "count": 1.5}), "new_errors[1].count that is"),
    ],
)
def test_what_a_rehearsal_does_not_write_is_refused_naming_the_place(
    change: Callable[[dict[str, Any]], None], words: str
) -> None:
    data = copy.deepcopy(result_data(_result()))
    change(data)
    with pytest.raises(ResultProblem) as refused:
        result_from_data(data)
    assert words in str(refused.value)
