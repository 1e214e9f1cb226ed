"""Judging a deploy by what the game's console said after the new code landed (pure: no I/O, no clock).

The socket edge (``edges/socket.py``) turns the console channel into :class:`ConsoleEvent` values, already redacted;
:func:`group_ticks` groups them into ticks, and :meth:`TickTally.judge_counted` (or :func:`judge_ticks`, over ticks
already grouped) weighs the ticks against the branch's thresholds: **healthy** when enough ticks came and fewer than
``error_share`` of them failed; **failing** when that share failed (an uncaught error, a "CPU limit" termination, a
log line matching ``fail_on``), with the first error lines as evidence; **unknown** when the socket could not be
used, too few ticks came, or the ticks failed in the server's own code (:func:`blame`). There is no path to
"healthy" without ticks, and nothing is ever rolled back for an error that is not the bot's.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from gitops.errors import SEVERITY, ExitCode, worst
from gitops.secrets import redact

Status = Literal["healthy", "failing", "unknown"]

#: How many error lines a result keeps as evidence, and how long each may be.
EVIDENCE_LINES = 5
EVIDENCE_CHARS = 500
#: The text of the server's termination of a tick that ran out of CPU (the official servers' words).
CPU_LIMIT_TEXT = "CPU limit"
#: Every text by which a server terminates a tick for its CPU: the official servers' ``CPU limit``, and the npm
#: server's driver (``@screeps/driver`` 4.x, ``lib/runtime``): ``Script execution timed out.`` (isolated-vm's own
#: words when a tick ran past its limit; the driver rewrites them to ``... CPU time limit reached`` on one path),
#: ``Script execution has been terminated: CPU bucket is empty`` (the tick was not run) and ``Script execution
#: timed out ungracefully, restarting virtual machine``.
CPU_LIMIT_TEXTS = (CPU_LIMIT_TEXT, "CPU time limit reached", "CPU bucket is empty", "Script execution timed out")


def is_cpu_termination(error: str) -> bool:
    """Whether ``error`` is a server's termination of a tick for its CPU (:data:`CPU_LIMIT_TEXTS`)."""
    return any(text in error for text in CPU_LIMIT_TEXTS)


@dataclass(frozen=True, slots=True)
class VerifyOverrides:
    """The command line's say over the manifest's ``verify:`` (``--no-verify``, ``--verify-ticks``, ...)."""

    enabled: bool = True
    ticks: int | None = None
    timeout: float | None = None


@dataclass(frozen=True, slots=True)
class Thresholds:
    """What a branch's ``verify:`` asks (the manifest's settings, after command-line overrides)."""

    ticks: int = 10
    error_share: float = 0.5
    fail_on: tuple[str, ...] = ()


#: Ticks ignored at the start of a watch (verify's) or a rehearsal: the tick in progress when the watch began may
#: still run the old code, and a rehearsal's first tick is still the world's start.
SETTLE_TICKS = 1


@dataclass(frozen=True, slots=True)
class ConsoleEvent:
    """One console message: a tick's ``log`` lines, or an ``error`` (exactly one of the two is set)."""

    log: tuple[str, ...] | None = None
    error: str | None = None


def console_text(raw: object) -> str:
    """A console line as the game's client shows it, redacted: the server sends it HTML-encoded (``&#x22;`` for
    every quote, ``&lt;`` for ``<``) and the client decodes the entities. Decoded before the redaction, so that a
    token written as entities is hidden too; printing still makes it inert (``gitops.inert``) after."""
    return redact(html.unescape(str(raw)))


def console_event(data: Any) -> ConsoleEvent | None:
    """A console channel's message as the judge reads it (texts decoded and redacted: :func:`console_text`), or
    ``None`` if it is neither shape."""
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("error"), str):
        return ConsoleEvent(error=console_text(data["error"]))
    messages = data.get("messages")
    if isinstance(messages, dict):
        lines = messages.get("log")
        log_lines = tuple(console_text(x) for x in lines) if isinstance(lines, list) else ()
        return ConsoleEvent(log=log_lines)
    return None


@dataclass(frozen=True, slots=True)
class Tick:
    log: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Health:
    """The verdict on one branch, with what it rests on."""

    status: Status
    reason: str
    ticks_seen: int = 0
    failed_ticks: int = 0
    cpu_terminations: int = 0
    evidence: tuple[str, ...] = field(default_factory=tuple)
    #: Ticks that failed in the server's own code only (no frame of the bot's modules in any error's stack).
    server_failed_ticks: int = 0
    #: ``main:12``: the module and line of the top frame in the bot's own modules of the first error that has one.
    bot_frame: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "status": self.status,
            "reason": self.reason,
            "ticks_seen": self.ticks_seen,
            "failed_ticks": self.failed_ticks,
            "cpu_terminations": self.cpu_terminations,
            "evidence": list(self.evidence),
            "server_failed_ticks": self.server_failed_ticks,
            "bot_frame": self.bot_frame,
        }


#: A stack frame line: ``at fn (where:line:col)`` or ``at where:line:col``; ``where`` is a module name for the bot's
#: code (``main``, ``role.harvester``), a path or ``<runtime>`` for the server's (``<`` may come escaped as ``&lt;``).
_FRAME = re.compile(r"^\s*at (?:.*? \()?(?P<where>[^()]+?):(?P<line>\d+)(?::\d+)?\)?\s*$")


@dataclass(frozen=True, slots=True)
class Frame:
    where: str
    line: int


def frames(error: str) -> list[Frame]:
    """The stack frames of an error text, top first (``&lt;``/``&gt;`` read as ``<``/``>``)."""
    found: list[Frame] = []
    for text in error.splitlines()[1:]:
        match = _FRAME.match(text.replace("&lt;", "<").replace("&gt;", ">"))
        if match is not None:
            found.append(Frame(match["where"].strip(), int(match["line"])))
    return found


def blame(error: str, bot_modules: frozenset[str] | None) -> tuple[bool, str | None]:
    """Whether ``error`` is the bot's, and its top frame in a bot module (``main:12``) when it has one.

    ``bot_modules`` ``None`` (the deployed names are not known): every error is the bot's. An error without frames
    (a ``CPU limit`` termination, a thrown string) is the bot's; one whose frames are all outside ``bot_modules``
    (``<runtime>``, ``@screeps/driver``, ``<isolated-vm>``, ``node:internal`` ...) is the server's: its tick does not
    count as failed, and when such ticks reach the share the verdict is unknown, with that reason."""
    if bot_modules is None:
        return True, None
    stack = frames(error)
    if not stack:
        return True, None
    for frame in stack:
        if frame.where in bot_modules:
            return True, f"{frame.where}:{frame.line}"
    return False, None


def unknown(reason: str) -> Health:
    """The verdict when the console could not be watched at all."""
    return Health("unknown", reason)


def runs_no_code(version: Mapping[str, object] | None) -> str | None:
    """Why a server's console says nothing of the bot, from its ``GET /api/version`` answer: screeps-gitops'
    stand-in (``gitops serve``) runs no code, and its ticks are empty whatever the code does; ``None`` for any other
    server, and for the stand-in of tests whose console follows injected rules (``console: simulated``)."""
    if version is None or version.get("standin") is not True or version.get("console") == "simulated":
        return None
    return (
        "the server is screeps-gitops' stand-in (gitops serve), which runs no code: its console cannot show whether "
        "the bot works; verify against a private server or the official one (or try 'gitops rehearse')"
    )


def group_ticks(events: list[ConsoleEvent]) -> list[Tick]:
    """The ticks the events make up. ``@screeps/engine``'s runner sends one ``{"messages": {"log": [...], "results":
    [...]}}`` per tick and, when the player's code failed in that tick, a separate ``{"error": TEXT}`` after it. Each
    ``messages`` event opens a tick; an error belongs to the open tick unless that one has its error already, or none
    is open: then it is a tick of its own (a run the server terminated, at the CPU limit say, sends the error alone).
    """
    ticks: list[Tick] = []
    for event in events:
        if event.log is not None:
            ticks.append(Tick(event.log))
        elif event.error is not None:
            if ticks and not ticks[-1].errors:
                ticks[-1] = Tick(ticks[-1].log, (event.error,))
            else:
                # The server sends at most one error a tick: a second one is a tick whose console message never
                # came (a run the server terminated, e.g. at the CPU limit, sends only the error).
                ticks.append(Tick((), (event.error,)))
    return ticks


class TickTally:
    """Ticks counted as the console's events come (:meth:`add`), judged at the end (:meth:`judge_counted`).

    The first ``skip`` ticks are not counted (the ones that may still run the old code), nor any after the next
    ``limit`` (``None``: all). Only the open tick is held; of the counted ticks, only their numbers and the first
    :data:`EVIDENCE_LINES` distinct error lines. ``bot_modules``: the deployed code's module names, to tell the bot's
    errors from the server's (:func:`blame`): a tick that failed only in the server's own code is counted apart.
    """

    def __init__(
        self,
        thresholds: Thresholds,
        *,
        skip: int = 0,
        limit: int | None = None,
        bot_modules: frozenset[str] | None = None,
    ) -> None:
        self._thresholds = thresholds
        self._patterns = [re.compile(p) for p in thresholds.fail_on]
        self._skip = skip
        self._limit = limit
        self._bot_modules = bot_modules
        self._open: Tick | None = None
        #: Ticks begun so far, the skipped ones and the open one included.
        self.opened = 0
        self.seen = 0
        self.failed = 0
        self.server_failed = 0
        self.cpu = 0
        self.evidence: list[str] = []
        self.server_evidence: list[str] = []
        #: ``main:12``: the bot's own top frame of the first error that has one.
        self.top: str | None = None

    def add(self, event: ConsoleEvent) -> None:
        """One console event, grouped into ticks as :func:`group_ticks` does."""
        if event.log is not None:
            self._begin(Tick(event.log))
        elif event.error is not None:
            if self._open is not None and not self._open.errors:
                self._open = Tick(self._open.log, (event.error,))
            else:
                # The server sends at most one error a tick: a second one is a tick whose console message never
                # came (a run the server terminated, e.g. at the CPU limit, sends only the error).
                self._begin(Tick((), (event.error,)))

    def _begin(self, tick: Tick) -> None:
        self._close()
        self._open = tick
        self.opened += 1

    def _close(self) -> None:
        if self._open is None:
            return
        tick, self._open = self._open, None
        index = self.opened - 1
        if index >= self._skip and (self._limit is None or index < self._skip + self._limit):
            self.count(tick)

    def count(self, tick: Tick) -> None:
        """Count one whole tick: failed when an error of the bot's or a ``fail_on`` line is in it; failed in the
        server's own code when its only errors have no frame of the bot's."""
        reasons: list[str] = []
        theirs: list[str] = []
        for error in tick.errors:
            mine, where = blame(error, self._bot_modules)
            (reasons if mine else theirs).append(error)
            self.top = self.top or where
        reasons += [line for line in tick.log if any(p.search(line) for p in self._patterns)]
        self.seen += 1
        if reasons:
            self.failed += 1
            self.cpu += any(is_cpu_termination(e) for e in tick.errors)
            _keep(self.evidence, reasons)
        elif theirs:
            self.server_failed += 1
            _keep(self.server_evidence, theirs)

    def judge_counted(self, *, problem: str | None = None, timeout: float = 0.0) -> Health:
        """The verdict on the ticks counted (the open one counts as a tick); ``problem`` is what stopped the watch
        early, if anything. Failing also when fewer ticks than asked came, but already so many failed that the share
        is reached whatever the missing ones do."""
        self._close()
        seen, failed, server_failed = self.seen, self.failed, self.server_failed
        wanted = self._thresholds.ticks
        share = self._thresholds.error_share
        evidence = tuple(self.evidence or self.server_evidence)

        def verdict(status: Status, reason: str) -> Health:
            return Health(status, reason, seen, failed, self.cpu, evidence, server_failed, self.top)

        if seen >= wanted and seen > 0 and failed > 0 and failed >= share * seen:
            return verdict("failing", f"{failed} of {seen} ticks failed (threshold {share:.0%})")
        if seen < wanted and failed > 0 and failed >= max(1, math.ceil(share * wanted)):
            return verdict(
                "failing", f"{failed} of {seen} ticks failed before {wanted} ticks came (threshold {share:.0%})"
            )
        if server_failed > 0 and server_failed >= share * max(seen, 1):
            first = self.server_evidence[0].splitlines()[0]
            return verdict(
                "unknown",
                f"{server_failed} of {seen} ticks failed in the server's own code, not the bot's (no frame of its "
                f"modules in the stack): {first}",
            )
        if seen >= wanted and seen > 0:
            return verdict("healthy", f"{seen} ticks seen, {failed} failed (threshold {share:.0%})")
        if problem is not None:
            return verdict("unknown", problem if not seen else f"{problem} after {seen} of {wanted} ticks")
        if seen == 0:
            return verdict("unknown", f"no tick came within {timeout:g} s")
        return verdict("unknown", f"only {seen} of {wanted} ticks came within {timeout:g} s")


def judge_ticks(
    ticks: list[Tick],
    thresholds: Thresholds,
    *,
    problem: str | None = None,
    timeout: float = 0.0,
    bot_modules: frozenset[str] | None = None,
) -> Health:
    """Weigh ``ticks`` against ``thresholds`` (:class:`TickTally` over ticks already grouped); ``problem`` is what
    stopped the watch early, if anything; ``bot_modules``: the deployed code's module names (:func:`blame`)."""
    tally = TickTally(thresholds, bot_modules=bot_modules)
    for tick in ticks:
        tally.count(tick)
    return tally.judge_counted(problem=problem, timeout=timeout)


# --- the outcome of one branch's verification --------------------------------------------------------------

Result = Literal["healthy", "unknown", "unhealthy", "rolled-back", "undo-failed"]


@dataclass(frozen=True, slots=True)
class Verification:
    """The health check of one branch and what was done about it."""

    label: str
    health: Health
    #: ``restored``: the previous code was uploaded again; ``switched-back``: the standby branch that ran before was
    #: activated again; ``undo-failed``: that upload or activation failed.
    action: Literal["none", "restored", "switched-back", "undo-failed"] = "none"
    #: What the undo did, in words (``activated default again for world``).
    undo: str | None = None
    #: The health after the undo (``None`` when there was none).
    after: Health | None = None
    #: The undo's error, when it failed.
    undo_error: str | None = None

    @property
    def result(self) -> Result:
        if self.action == "undo-failed":
            return "undo-failed"
        if self.action in ("restored", "switched-back"):
            return "rolled-back"
        if self.health.status == "failing":
            return "unhealthy"
        return self.health.status

    #: SIGINT/SIGTERM stopped the watch (the step in flight was finished; nothing more was sent).
    interrupted: bool = False

    @property
    def exit_code(self) -> int:
        """10 only when the code after the undo was judged healthy; an undo not judged healthy after is 9 (the branch
        may still fail); an interrupted watch is 12 (the deploy is unverified)."""
        if self.interrupted:
            return ExitCode.UNVERIFIED
        if self.result == "rolled-back" and (self.after is None or self.after.status != "healthy"):
            return ExitCode.UNHEALTHY
        return {
            "healthy": ExitCode.OK,
            "unknown": ExitCode.OK,
            "unhealthy": ExitCode.UNHEALTHY,
            "rolled-back": ExitCode.ROLLED_BACK,
            "undo-failed": ExitCode.UNDO_FAILED,
        }[self.result]

    def lines(self) -> list[str]:
        """What the CLI prints and the Action records (evidence already redacted)."""
        h = self.health
        out = [f"verify {self.label}: {h.status.upper()}: {h.reason}"]
        if self.interrupted:
            out[0] = f"verify {self.label}: INTERRUPTED after {h.ticks_seen} tick(s), so far {h.status}: {h.reason}"
        out += [f"  error: {line}" for e in h.evidence for line in e.splitlines()[:1]]
        if h.bot_frame is not None:
            module, _, line = h.bot_frame.rpartition(":")
            out.append(f"  at module {module}, line {line} (the top frame in the bot's own code)")
        if self.action in ("restored", "switched-back"):
            out.append(f"  rolled back: {self.undo}")
            if self.after is not None:
                out.append(f"  after the rollback: {self.after.status.upper()}: {self.after.reason}")
        elif self.action == "undo-failed":
            out.append(f"  ROLLBACK FAILED ({self.undo}): {self.undo_error}")
            out.append(f"  the server still runs the new, failing code of {self.label}")
        elif h.status == "failing" and not self.interrupted:
            out.append(f"  left in place (on_failure: report): the new code still runs on {self.label}")
        if self.interrupted:
            out.append(
                f"  the deploy of {self.label} is recorded as interrupted (unverified): 'gitops apply --verify-again' "
                "judges it again, 'gitops rollback' undoes it"
            )
        return out

    def document(self) -> dict[str, object]:
        return {
            "branch": self.label,
            "result": self.result,
            "health": self.health.to_json(),
            "action": self.action,
            "undo": self.undo,
            "after": None if self.after is None else self.after.to_json(),
            "undo_error": self.undo_error,
            "interrupted": self.interrupted,
        }


def _keep(evidence: list[str], lines: list[str]) -> None:
    for line in lines:
        short = _first_lines(line)
        if short not in evidence and len(evidence) < EVIDENCE_LINES:
            evidence.append(short)


def _first_lines(text: str) -> str:
    """An error's first lines (its message and the top of its stack), cut to :data:`EVIDENCE_CHARS`."""
    lines = text.strip().splitlines()[:4]
    joined = "\n".join(lines)
    return joined if len(joined) <= EVIDENCE_CHARS else joined[: EVIDENCE_CHARS - 1] + "…"


__all__ = [
    "CPU_LIMIT_TEXTS",
    "SETTLE_TICKS",
    "SEVERITY",
    "ConsoleEvent",
    "Frame",
    "Health",
    "Status",
    "Thresholds",
    "Tick",
    "TickTally",
    "Verification",
    "blame",
    "console_event",
    "console_text",
    "frames",
    "group_ticks",
    "is_cpu_termination",
    "judge_ticks",
    "runs_no_code",
    "unknown",
    "worst",
]
