"""One presenter of what a run did: the plan, each step of an apply, how the apply (or a rollback) ended, each
verification, and deploy on save's lines, for every front end.

The idea is sqlmesh's Console, at a fraction of its size: a front end (``gitops apply``, ``gitops rollback``,
``gitops watch``, the Action's step) tells one interface what happened (:class:`Console`), and an implementation
decides how that looks: :class:`TextConsole` for a terminal and a job's log, :class:`MarkdownConsole` for the job
summary and the pull request comment, :class:`Consoles` for both at once. The words are written once, here, and
every way out takes the same care of the text that may be a server's or the game's (console lines, error bodies,
module and branch names): redacted (:func:`gitops.secrets.redact`), then made inert (:func:`gitops.inert.inert`),
or, in Markdown, escaped inside its fence (:func:`gitops.render.plan.md_fence`).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from gitops.core.apply import Outcome
from gitops.core.budget import EndpointBudget
from gitops.core.deploys import UnsettledDeploy
from gitops.core.endpoints import UPLOAD
from gitops.core.health import Verification
from gitops.core.plan import Plan
from gitops.inert import inert
from gitops.render.plan import md_fence, render_text
from gitops.secrets import redact

Write = Callable[[str], None]


@dataclass(frozen=True)
class Ended:
    """How an apply or a rollback ended, in core values (the pipeline's ``Applied`` and ``ApplyReport`` hold more).

    ``unsettled``: the deploys still unverified or failing that the run did not judge, when the plan shown before
    has not said them already.
    """

    cancelled: bool
    applied_line: str | None
    verifications: Sequence[Verification] = ()
    unsettled: Sequence[UnsettledDeploy] = ()


class Console(Protocol):
    """What a front end tells its presenter."""

    def plan(self, plan: Plan, *, now: float) -> None:
        """The plan, before anything is applied."""

    def step(self, outcome: Outcome) -> None:
        """One step of an apply, done, failed or not run."""

    def ended(self, ended: Ended) -> None:
        """How the apply ended: cancelled, or its applied line, each verification and what is still unsettled."""

    def say(self, line: str) -> None:
        """Any other line of the run (deploy on save's), which may quote a server."""


def line_shown(text: str) -> str:
    """A line (or lines) that may hold a server's, the game's or a file's text, safe for a terminal and a job log."""
    return inert(redact(text))


class TextConsole:
    """A terminal, or a job's log: each line redacted and inert, written by ``out`` (``err``: a cancellation).

    ``what`` names the run in its cancellation ("Apply", "Rollback"); ``color``/``full`` are the plan's options.
    """

    def __init__(
        self, out: Write, *, err: Write | None = None, what: str = "Apply", color: bool = False, full: bool = False
    ) -> None:
        self.out = out
        self.err = err or out
        self.what = what
        self.color = color
        self.full = full

    def plan(self, plan: Plan, *, now: float) -> None:
        # render_text makes every line inert before it styles it; inert again here would show the colours' escapes.
        text = redact(render_text(plan, now=now, color=self.color, full=self.full))
        self.out(text.removesuffix("\n") if self.color else inert(text).removesuffix("\n"))

    def step(self, outcome: Outcome) -> None:
        self.out(line_shown(outcome.line()))

    def ended(self, ended: Ended) -> None:
        if ended.cancelled:
            self.err(f"{self.what} cancelled; nothing was changed.")
            return
        if ended.applied_line is not None:
            self.out(line_shown(ended.applied_line))
        for verification in ended.verifications:
            for line in verification.lines():  # the game's error texts among them
                self.out(line_shown(line))
        for note in ended.unsettled:  # its reason may be the game's error text
            self.out(line_shown(note.line()))

    def say(self, line: str) -> None:
        self.out(line_shown(line))


class MarkdownConsole:
    """The job summary's and the pull request comment's view of a run: it keeps what it is told in ``lines`` and
    ``verifications`` (the Action's report holds both) and writes them as Markdown sections (:meth:`sections`).

    The plan itself is rendered by :func:`gitops.render.plan.render_markdown`, which cuts it to GitHub's size limits
    together with what the report puts around it; :meth:`plan` only keeps it.
    """

    def __init__(self, lines: list[str] | None = None, verifications: list[Verification] | None = None) -> None:
        self.lines = lines if lines is not None else []
        self.verifications = verifications if verifications is not None else []
        self.shown_plan: Plan | None = None

    def plan(self, plan: Plan, *, now: float) -> None:
        self.shown_plan = plan

    def step(self, outcome: Outcome) -> None:
        self.lines.append(outcome.line())

    def ended(self, ended: Ended) -> None:
        if ended.cancelled:
            self.lines.append("Cancelled; nothing was changed.")
            return
        if ended.applied_line is not None:
            self.lines.append(ended.applied_line)
        self.verifications.extend(ended.verifications)
        self.lines.extend(note.line() for note in ended.unsettled)

    def say(self, line: str) -> None:
        self.lines.append(line)

    def sections(self, health: str) -> list[str]:
        """``#### Apply`` and ``#### Verify: <health>``, each a fenced block (redacted by the report as a whole)."""
        return markdown_sections(self.lines, self.verifications, health)


def markdown_sections(lines: Sequence[str], verifications: Sequence[Verification], health: str) -> list[str]:
    """The apply's lines and the verifications' as Markdown: fenced, their control characters shown as escapes."""
    out: list[str] = []
    if lines:
        out.extend(["", "#### Apply", "", md_fence("\n".join(lines), "text")])
    if verifications:
        shown = [line for v in verifications for line in v.lines()]
        out.extend(["", f"#### Verify: {health}", "", md_fence("\n".join(shown), "text")])
    return out


class Consoles:
    """Several presenters told the same things (the Action: its log and its report)."""

    def __init__(self, *consoles: Console) -> None:
        self.consoles = consoles

    def plan(self, plan: Plan, *, now: float) -> None:
        for console in self.consoles:
            console.plan(plan, now=now)

    def step(self, outcome: Outcome) -> None:
        for console in self.consoles:
            console.step(outcome)

    def ended(self, ended: Ended) -> None:
        for console in self.consoles:
            console.ended(ended)

    def say(self, line: str) -> None:
        for console in self.consoles:
            console.say(line)


# --- deploy on save (``gitops watch``) ---------------------------------------------------------------------------


def clock_text(at: float) -> str:
    return datetime.datetime.fromtimestamp(at).strftime("%H:%M:%S")


def files_text(paths: Iterable[str], limit: int = 3) -> str:
    """``src/a.js, src/b.js, src/c.js and 2 more``."""
    every = sorted(paths)
    shown = every[:limit]
    more = len(every) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def watch_started(folder: Path, labels: Sequence[str], per_hour: int, debounce: float) -> str:
    return (
        f"Watching {folder} for {', '.join(labels)}: "
        f"at most {per_hour} upload(s) an hour, {debounce:g} s after the last change. Ctrl-C stops."
    )


WATCH_MANIFEST_CHANGED = "The manifest changed; it is loaded again."


def watch_waiting(pending: set[str], per_hour: int, slot: float, now: float) -> str:
    return (
        f"pending: {files_text(pending - {'(start)'}) or 'the first deploy'}; "
        f"{per_hour} upload(s) this hour are spent, the next may go at {clock_text(slot)} "
        f"(in {max(1, round((slot - now) / 60))} min)"
    )


def watch_nothing(changed: str) -> str:
    return f"{changed}: nothing to deploy (the servers hold it already)"


@dataclass(frozen=True)
class SaveDeployed:
    """One deploy on save: when, what it changed, the uploads it sent and what is left of the limits."""

    at: float
    labels: Sequence[str]
    changed: str
    sent: int
    budget: Sequence[EndpointBudget]
    not_rate_limited: Sequence[str]
    left_this_hour: int
    complete: bool


def watch_deployed(deployed: SaveDeployed) -> str:
    return (
        f"{clock_text(deployed.at)} deployed {', '.join(deployed.labels)} ({deployed.changed}): "
        f"{deployed.sent} upload(s); {_left_text(deployed)}; {deployed.left_this_hour} more "
        "this hour" + ("" if deployed.complete else " (incomplete)")
    )


def _left_text(deployed: SaveDeployed) -> str:
    """``local: 229 of 240 uploads left today`` (from the plan's budget rows, less what it spent); a count the
    server did not state is shown as the estimate it is (``~229 ... (estimated from this tool's own requests)``)."""
    parts = [
        f"{r.server}: {'~' if r.estimate else ''}{max(0, r.remaining - r.needed)} of {r.limit} uploads left today"
        + (" (estimated from this tool's own requests)" if r.estimate else "")
        for r in deployed.budget
        if r.endpoint == UPLOAD and r.remaining is not None
    ]
    parts.extend(f"{server}: not rate limited" for server in deployed.not_rate_limited)
    return ", ".join(parts) or "uploads left today unknown"


def watch_not_deployed(changed: str, message: str) -> str:
    return f"not deployed ({changed}): {message}"


def watch_retrying(message: str, backoff: float) -> str:
    return f"not deployed: {message} (retrying at the next change or in {backoff:g} s)"


def watch_stopped(deploys: int, uploads: int, failed_uploads: int) -> str:
    failed = f" ({failed_uploads} in deploys that failed)" if failed_uploads else ""
    return f"Stopped: {deploys} deploy(s), {uploads} upload attempt(s){failed}."


__all__ = [
    "Console",
    "Consoles",
    "Ended",
    "MarkdownConsole",
    "SaveDeployed",
    "TextConsole",
    "line_shown",
    "markdown_sections",
    "watch_deployed",
    "watch_not_deployed",
    "watch_nothing",
    "watch_retrying",
    "watch_started",
    "watch_stopped",
    "watch_waiting",
]
