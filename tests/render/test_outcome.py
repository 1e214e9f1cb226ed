"""The one presenter (issue 45): what every front end shows of a run, in text and in Markdown.

The text is what the CLI printed before the presenter, byte for byte, for ordinary text; hostile text (the game's
errors, a server's detail) is redacted and inert on every way out, the rollback's included.
"""

from __future__ import annotations

import re

import click

from gitops.core.apply import Outcome
from gitops.core.deploys import UnsettledDeploy
from gitops.core.health import Health, Verification
from gitops.core.plan import Step
from gitops.inert import inert
from gitops.render.outcome import Consoles, Ended, MarkdownConsole, TextConsole
from gitops.render.plan import render_text
from gitops.secrets import HIDDEN, redact, register
from tests.core.factories import NOW
from tests.render.test_plan import mixed_plan

HOSTILE = "boom\x1b]0;pwned\x07 \u202etxt.js\n::add-mask::x"
SECRET = "s3cret-in-a-game-error-0001"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


class Seen:
    def __init__(self) -> None:
        self.out: list[str] = []
        self.err: list[str] = []

    def console(self, **options: object) -> TextConsole:
        return TextConsole(self.out.append, err=self.err.append, **options)  # type: ignore[arg-type]


def failing() -> Verification:
    health = Health("failing", f"1 of 3 ticks failed: {HOSTILE} {SECRET}", evidence=(f"TypeError: {HOSTILE}",))
    return Verification("local/main", health)


def test_the_plan_is_the_text_the_cli_printed_in_plain_and_in_colour() -> None:
    for color in (False, True):
        seen = Seen()
        seen.console(color=color).plan(mixed_plan(), now=NOW)
        assert "\n".join(seen.out) + "\n" == redact(render_text(mixed_plan(), now=NOW, color=color))
        assert color or click.unstyle(seen.out[0]) == seen.out[0]


def test_steps_verifications_and_unsettled_deploys_are_redacted_and_inert() -> None:
    register(SECRET)
    seen = Seen()
    console = seen.console()
    step = Step(kind="upload", request="POST /api/user/code")
    console.step(Outcome("local/main", step, "failed", f"the server said: {HOSTILE}"))
    note = UnsettledDeploy("local", "main", "failing", f"TypeError: {HOSTILE}", None, NOW)
    console.ended(Ended(False, "Applied: 1 branch(es) changed.", [failing()], [note]))
    text = "\n".join(seen.out)
    assert seen.out[1] == "Applied: 1 branch(es) changed."
    assert RAW.findall(text) == []
    assert SECRET not in text
    assert HIDDEN in text
    assert not [line for line in text.splitlines() if line.lstrip().startswith("::")]
    assert "  error: TypeError: boom\\u001b]0;pwned\\u0007 \\u202etxt.js" in seen.out
    assert seen.err == []


def test_a_cancellation_names_the_run_on_stderr() -> None:
    seen = Seen()
    seen.console(what="Rollback").ended(Ended(cancelled=True, applied_line="never shown"))
    assert (seen.out, seen.err) == ([], ["Rollback cancelled; nothing was changed."])


def test_the_action_tells_its_log_and_its_report_the_same_run() -> None:
    seen = Seen()
    report = MarkdownConsole()
    both = Consoles(seen.console(), report)
    step = Step(kind="upload", request="POST /api/user/code")
    both.step(Outcome("local/main", step, "done"))
    both.ended(Ended(False, "Applied: 1 branch(es) changed.", [failing()]))
    assert report.lines == ["done    local/main: " + step.describe(), "Applied: 1 branch(es) changed."]
    assert report.verifications == [failing()]
    markdown = "\n".join(report.sections(health="failing"))
    assert "#### Apply" in markdown
    assert "#### Verify: failing" in markdown
    assert RAW.findall(markdown) == []
    assert "\\u202etxt.js" in markdown
    assert seen.out[0] == inert(report.lines[0])
