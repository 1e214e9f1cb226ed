"""What a CI system gives a run and takes from it: the :class:`Host` a CI front end implements.

The policy (:mod:`gitops.app.ci.run`) asks the host for the inputs and the change request (a GitHub pull request,
a GitLab merge request), tells it what to mask and what to log, and hands it the run's :class:`~gitops.app.ci.report
.Report` for the outputs, the summary and the comment. The words that differ between systems (where a secret is
added, how a change request is called) are the host's (:class:`HostWords`); the decisions are not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from gitops.app.options import DEFAULT_MAX_WAIT, Refresh
from gitops.app.targets import Targets
from gitops.core.rehearsal import DEFAULT_TICKS
from gitops.secrets import Secret

if TYPE_CHECKING:
    from gitops.app.ci.report import Report
    from gitops.config.manifest import LoadedManifest
    from gitops.config.model import Manifest

#: What a CI run does: plan, apply, check drift, rehearse, or write a rehearsal's comment from its result file.
Command = Literal["plan", "apply", "drift", "rehearse", "comment"]
Level = Literal["notice", "warning", "error"]


class ChangeRequest(Protocol):
    """The change under review (a GitHub pull request, a GitLab merge request)."""

    @property
    def number(self) -> int:
        """Its number in the repository."""

    @property
    def head_sha(self) -> str:
        """The commit under review."""

    @property
    def base_sha(self) -> str:
        """The base branch's commit it is compared against (empty when the system does not say)."""

    @property
    def from_fork(self) -> bool:
        """Whether it comes from a fork, which the CI system gives no secrets."""


@dataclass(frozen=True)
class CiInputs:
    """What the job asked for, checked by the front end. ``credentials`` maps environment variable names to the
    values the inputs gave (the manifest's ``token_env`` and the like read them)."""

    command: Command
    manifest: Path
    ref: str | None = None
    refresh: Refresh | None = None
    comment: bool = True
    max_wait: float = DEFAULT_MAX_WAIT
    credentials: Mapping[str, Secret | str] = field(default_factory=dict)
    targets: Targets = field(default_factory=Targets)
    #: What the run says before it plans (an input's old name).
    warnings: tuple[str, ...] = ()
    rehearse_ticks: int = DEFAULT_TICKS
    base_codeset: Path | None = None
    rehearsal_file: Path | None = None


@dataclass(frozen=True)
class BaseManifest:
    """The base commit's manifest, or why there is none (``manifest`` is then ``None``)."""

    manifest: Manifest | None
    why: str = ""


@dataclass(frozen=True)
class HostWords:
    """The words of the policy's messages that name the CI system's own things."""

    #: What the system calls the change under review ("pull request").
    change: str
    #: Why a fork's change request has no credentials.
    fork: str
    #: The fix when a change request planned with a credential changes where credentials go.
    routes_hint: str
    #: The fix when that cannot be known (the base commit's manifest could not be read).
    routes_unknown_hint: str


class Host(Protocol):
    """A CI system, as the policy sees it."""

    @property
    def inputs(self) -> CiInputs:
        """The job's inputs."""

    @property
    def change(self) -> ChangeRequest | None:
        """The change request the job runs for, else ``None`` (a push, a schedule)."""

    @property
    def words(self) -> HostWords:
        """The system's words in the policy's messages."""

    @property
    def files(self) -> Path:
        """A folder of the job's own for the files the run leaves (the plan file, a rehearsal's result file)."""

    def log(self, line: str) -> None:
        """A line of the job's log, as given (text from outside is made inert by the caller)."""

    def annotate(self, level: Level, message: str) -> None:
        """A notice, warning or error the job's page shows (the host makes it inert)."""

    def mask(self, value: str, *, prefix: bool = False, register: bool = True) -> None:
        """Hide ``value`` in the job's log from now on (``prefix``: its first 8 characters too, for a token)."""

    def check_environment(self, loaded: LoadedManifest, servers: list[str], env: Mapping[str, str]) -> list[str]:
        """The system's own rule for where secrets may come from: warnings, or a :class:`TrustError`."""

    def missing_secret_message(self, manifest: Manifest, missing: list[str]) -> str:
        """Which secret to add for each server without credentials, and where, in the system's words."""

    def base_manifest(self, loaded: LoadedManifest, base_sha: str) -> BaseManifest:
        """The change request's base commit's manifest."""

    def comment(self, report: Report) -> None:
        """Post or edit the change request's one comment; a failure is a warning, never the run's."""

    def record(self, report: Report) -> None:
        """What else the system keeps of a run (GitHub: deployments, the drift issue); failures are warnings."""

    def summary(self, report: Report) -> None:
        """Write the job's summary."""

    def outputs(self, report: Report) -> None:
        """Write the job's outputs (:meth:`Report.outputs`)."""
