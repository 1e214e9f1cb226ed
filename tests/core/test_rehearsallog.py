"""The bot's own console output (``gitops.core.rehearsallog``): caught errors and line patterns."""

from __future__ import annotations

from gitops.core.health import Tick
from gitops.core.rehearsallog import Caught, caught_errors, caught_in, log_patterns, new_patterns, normalise, place

MODULES = ("main", "role.harvester")


def test_an_error_line_or_a_stack_of_the_bots_is_a_caught_error() -> None:
    stack = (
        "[W1N1] TypeError: Cannot read properties of undefined (reading &#x27;x&#x27;)\n"
        "    at run (role.harvester:12:5)\n    at &#x3C;isolated-vm&#x3E;:1:1"
    )
    assert caught_in(stack, MODULES) == Caught(
        "TypeError: Cannot read properties of undefined (reading 'x')", "role.harvester:12"
    )
    assert caught_in("ReferenceError: foo is not defined", MODULES) == Caught(
        "ReferenceError: foo is not defined", None
    )
    assert caught_in("    at loop (main:3:1)", MODULES) == Caught("at loop (main:3:1)", "main:3")
    assert caught_in("tick 12: all fine", MODULES) is None
    assert caught_in("    at somewhere (<runtime>:3:1)", MODULES) is None  # no frame of the bot's


def test_per_tick_a_stack_logged_after_its_error_line_counts_once() -> None:
    ticks = [
        Tick(log=("Error: boom", "    at loop (main:3:1)", "ok")),
        Tick(log=("fine",)),
        Tick(log=("Error: boom\n    at loop (main:3:1)", "Error: boom\n    at loop (main:3:1)")),
    ]
    assert caught_errors(ticks, MODULES) == [
        frozenset({Caught("Error: boom", "main:3")}),
        frozenset(),
        frozenset({Caught("Error: boom", "main:3")}),
    ]


def test_lines_become_patterns_without_their_numbers_and_ids() -> None:
    assert normalise("tick 1234: creep 5e3f00aa0011bcd moved 2.5") == "tick N: creep ID moved N"
    assert normalise("room W12N3 &lt;ok&gt;") == "room WNNN <ok>"
    head = log_patterns([Tick(log=("tick 1\nnew line 3\n    at f (main:1:2)",)), Tick(log=("tick 2", "new line 4"))])
    assert head == {"tick N": 2, "new line N": 2}
    assert new_patterns(head, {"tick N": 5}) == (("new line N", 2),)
    assert place("Error: x\n    at f (main:4:2)", MODULES) == "main:4"
