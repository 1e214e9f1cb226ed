"""The one exception root of the tool and the exit codes it maps to.

Every error a user can cause is a :class:`GitopsError` subclass. Its message says what went wrong and where; its
``hint`` says what to do next. Only the CLI (``gitops.cli``) prints errors and picks exit codes: it prints
``Error: <message>`` (and the hint) to standard error and exits with ``exit_code``. No message may contain a
secret: code that builds a message from server text passes it through ``gitops.secrets.redact`` first.

Exit codes: :class:`ExitCode`, each with its meaning in :data:`EXIT_CODE_MEANINGS` (the one list: ``gitops help
exit-codes`` prints it, and a test keeps the README's table to the same codes).

:class:`ExitCode` is that list in code; every place that picks an exit code names a member of it.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum
from typing import Any


class ExitCode(IntEnum):
    """The documented exit codes (the README's table)."""

    OK = 0
    #: A server or apply failure; also the person answering no at ``apply``'s question.
    FAILURE = 1
    #: ``plan`` only: there are changes to apply (not an error).
    CHANGES = 2
    BUDGET = 3
    USAGE = 4
    MANIFEST = 5
    LOCAL_CODE = 6
    CREDENTIALS = 7
    PLAN_FILE = 8
    #: ``apply``'s verification: the new code fails in the game and was left in place (``on_failure: report``).
    UNHEALTHY = 9
    #: ``apply``'s verification: the new code failed and was rolled back, and the code after the undo was judged
    #: healthy (an undo not judged healthy after is 9: the branch may still fail).
    ROLLED_BACK = 10
    #: ``apply``'s verification: the new code failed and its rollback failed too; the failing code is still there.
    UNDO_FAILED = 11
    #: A branch's last deploy is unverified (its watch was interrupted, or the run was killed: ``pending``) or
    #: failing, as the ledger records it (``plan``, ``apply``, ``drift``, ``status``; docs/safe-deploys.md).
    UNVERIFIED = 12
    #: A run that holds a credential refused input it cannot trust with it: a pull request's manifest that changes a
    #: server's url, credential variables or build; credentials in the Action's step environment instead of inputs.
    TRUST = 13
    #: ``rehearse``: the verdict is unknown (too few ticks), or the throwaway world could not be installed or run.
    REHEARSAL_UNKNOWN = 14
    BUG = 70


#: What each exit code means, in a line: ``gitops help exit-codes`` prints this, and the README's table has a row for
#: each code (tests/test_errors.py).
EXIT_CODE_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "success; for `plan`: the servers already hold what the repository holds",
    ExitCode.FAILURE: "a request to the server failed, the server answered an error (`status`: a server could not "
    "be asked), the state folder cannot be written (`apply` refuses before sending), or `apply` stopped part-way "
    "(3 or 7 instead when the budget or the credentials stopped it)",
    ExitCode.CHANGES: "not an error: `plan` has changes to apply, `drift` found branches changed outside Git",
    ExitCode.BUDGET: "the plan does not fit the token's rate-limit budget, or a 429 asked for a longer wait than "
    "`--max-wait`",
    ExitCode.USAGE: "bad command-line usage (unknown flag, bad value, missing `--yes` without a terminal); also "
    "`serve`, `demo` and `watch` without the optional extra `serve`",
    ExitCode.MANIFEST: "the manifest is invalid, or not found, or two are in one folder (gitops.yaml, gitops.yml)",
    ExitCode.LOCAL_CODE: "the local code is invalid (a glob matching nothing, non-UTF-8 text, a bad module name, "
    "over 5 MB, a JavaScript syntax error, ...), a build failed, or a code set file cannot be used",
    ExitCode.CREDENTIALS: "credentials: missing, refused by the server, or a restricted token without a needed "
    "endpoint",
    ExitCode.PLAN_FILE: "a saved plan file is unreadable, stale, or no longer matches the manifest",
    ExitCode.UNHEALTHY: "`apply`'s verification: the new code fails and was left in place, or was undone without "
    "being judged healthy after; `rehearse`: the code fails in the throwaway world",
    ExitCode.ROLLED_BACK: "`apply`'s verification: the new code failed, was rolled back, and the code after the undo "
    "was judged healthy",
    ExitCode.UNDO_FAILED: "`apply`'s verification: the new code failed and its rollback failed too",
    ExitCode.UNVERIFIED: "a deploy is unverified (its watch was interrupted or never ended) or failing: `plan`, "
    "`apply`, `drift` and `status` say so until a new deploy, `apply --verify-again` or `gitops rollback` settles it",
    ExitCode.TRUST: "refused for trust: a pull request planned with a deploy token changes a server's url, credential "
    "variables or build against the base branch's; or the Action found a credential in its step's `env:` instead "
    "of an input",
    ExitCode.REHEARSAL_UNKNOWN: "`rehearse`: unknown, or the throwaway world could not be run",
    ExitCode.BUG: "a bug in screeps-gitops (`--debug` shows a redacted traceback)",
}


#: Exit codes of verifications from the least to the most serious: a run with several reports its most serious.
SEVERITY: tuple[int, ...] = (
    ExitCode.OK,
    ExitCode.ROLLED_BACK,
    ExitCode.UNHEALTHY,
    ExitCode.UNVERIFIED,
    ExitCode.UNDO_FAILED,
)


def worst(codes: Iterable[int]) -> int:
    """The most serious of ``codes`` (:data:`SEVERITY`); 0 for none."""
    return max(codes, key=SEVERITY.index, default=ExitCode.OK)


#: Ctrl-C (128 + SIGINT), the shell's convention rather than the tool's own table.
EXIT_INTERRUPTED = 130


class GitopsError(Exception):
    """Root of every error the tool reports to a user."""

    #: Set per class; an instance may carry its cause's code (``apply`` stopped by the budget or credentials).
    exit_code: int = ExitCode.FAILURE

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n{self.hint}"
        return self.message


class ServiceError(GitopsError):
    """The server answered with an error, or with something that is not what the interface promises."""

    exit_code = ExitCode.FAILURE


class NetworkError(ServiceError):
    """The server could not be reached, or the connection broke (after bounded retries)."""


class LedgerBusyError(GitopsError):
    """Another run held the ledger of a server for longer than the tool waits (``GITOPS_LOCK_WAIT``)."""

    exit_code = ExitCode.FAILURE


class StateFolderError(GitopsError):
    """The state folder (the ledger, the code kept for ``gitops rollback``) cannot be written: full, read-only, not
    permitted. ``apply`` finds it before it sends anything and refuses, rather than deploy without recording it."""

    exit_code = ExitCode.FAILURE


class ApplyError(GitopsError):
    """``apply`` stopped part-way; the message lists what was done and what was not (``outcomes``: each step's, as
    ``gitops.core.apply.Outcome`` values, when the steps were walked)."""

    exit_code = ExitCode.FAILURE
    outcomes: list[Any] = []  # noqa: RUF012 (set per instance; the class default is never changed)


class BudgetError(GitopsError):
    """The plan would not fit what is left of the token's rate limits (refused before any request is spent).

    ``unlock_links`` maps server names to their no-rate-limit links (``gitops.secrets.Secret``, since a link carries
    the token): the CLI prints them whole only to an interactive terminal.
    """

    exit_code = ExitCode.BUDGET

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.unlock_links: dict[str, object] = {}


class RateLimitedError(BudgetError):
    """The server answered 429 and asked for a wait longer than ``--max-wait`` (or retries ran out)."""


class UsageError(GitopsError):
    """Bad command-line usage."""

    exit_code = ExitCode.USAGE


class ProblemsError(GitopsError):
    """An input with several problems, all reported at once: ``problems`` lists each, one per line."""

    def __init__(self, message: str, problems: list[str] | None = None, *, hint: str | None = None) -> None:
        self.problems = list(problems or [])
        full = message
        if self.problems:
            full = message + "\n" + "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(full, hint=hint)


class ManifestError(ProblemsError):
    """The manifest is invalid. ``problems`` lists every problem found, each naming file, line and key."""

    exit_code = ExitCode.MANIFEST


class SourceError(GitopsError):
    """The local code cannot be deployed as it is."""

    exit_code = ExitCode.LOCAL_CODE


class AuthError(GitopsError):
    """Credentials are missing, refused, or lack a scope that the command needs."""

    exit_code = ExitCode.CREDENTIALS


class ScopeError(AuthError):
    """A restricted token lacks an endpoint (403): the message names it and the scope each command needs."""


class TrustError(GitopsError):
    """Refused: input that a credential must not follow (see :attr:`ExitCode.TRUST`)."""

    exit_code = ExitCode.TRUST


class PlanFileError(GitopsError):
    """A saved plan cannot be applied: unreadable, stale, or made for another manifest."""

    exit_code = ExitCode.PLAN_FILE


class RehearsalError(GitopsError):
    """The throwaway world of ``gitops rehearse`` could not be installed, started or run."""

    exit_code = ExitCode.REHEARSAL_UNKNOWN
