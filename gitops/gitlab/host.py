"""GitLab CI as the CI policy's host: its variables read into the policy's inputs; the merge request's note, a
dotenv file of outputs, a Markdown summary file and the job's log written. The Screeps credentials are the CI/CD
variables the manifest names, masked and protected: GitLab gives those to protected branches' pipelines only, so a
merge request is planned from the ledger, and one given a credential is held to :mod:`gitops.app.ci.trust`'s rules.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitops.app.ci.host import BaseManifest, CiInputs, Command, HostWords, Level
from gitops.app.ci.report import Report
from gitops.app.ci.run import run
from gitops.app.ci.trust import read_base_manifest
from gitops.app.options import DEFAULT_MANIFEST, REFRESH_CHOICES, Refresh
from gitops.app.targets import Targets
from gitops.config.manifest import LoadedManifest
from gitops.config.model import Manifest
from gitops.errors import UsageError
from gitops.gitlab.notes import GitLabNotes, NoteError, marker, note_markdown
from gitops.inert import inert
from gitops.secrets import Secret, redact

WORDS = HostWords(
    change="merge request",
    fork="GitLab gives no protected variables to pipelines of fork merge requests",
    routes_hint="Plan merge requests without the deploy token (make its variable protected); the change is "
    "deployed with the token after it is merged and reviewed.",
    routes_unknown_hint="Plan merge requests without the deploy token (make its variable protected), or set "
    "`GIT_DEPTH: 0` so that the base commit is there.",
)


@dataclass(frozen=True)
class MergeRequest:
    """The merge request of a ``merge_request_event`` pipeline."""

    number: int
    head_sha: str
    base_sha: str
    from_fork: bool


def read_inputs(env: Mapping[str, str]) -> CiInputs:
    """The job's ``GITOPS_*`` variables, checked; :class:`UsageError` naming the variable and what it takes."""

    def get(name: str, default: str = "", accepted: tuple[str, ...] = ()) -> str:
        value = env.get(f"GITOPS_{name}", "").strip() or default
        if accepted and value not in accepted:
            raise UsageError(
                f"variable GITOPS_{name} is {value!r}; it must be one of {', '.join(accepted)}",
                hint="Fix the job's `variables:` in .gitlab-ci.yml (docs/gitlab-ci.md lists them).",
            )
        return value

    command: Command = get("COMMAND", "plan", ("plan", "apply", "drift"))  # type: ignore[assignment]
    refresh: Refresh | None = get("REFRESH", "", ("", *REFRESH_CHOICES)) or None  # type: ignore[assignment]
    wait = get("MAX_WAIT", "60")
    if not wait.isdigit():
        raise UsageError(f"variable GITOPS_MAX_WAIT is {wait!r}; it must be a whole number of seconds")
    return CiInputs(
        command=command,
        manifest=Path(get("MANIFEST", DEFAULT_MANIFEST)),
        ref=get("REF") or None,
        refresh=refresh,
        comment=get("COMMENT", "true", ("true", "false")) == "true",
        max_wait=float(wait),
        targets=Targets.of(get("SERVERS").splitlines(), get("BRANCHES").splitlines()),
    )


@dataclass(frozen=True)
class GitLabHost:
    """A GitLab CI job, as :class:`gitops.app.ci.host.Host`."""

    env: Mapping[str, str]
    inputs: CiInputs
    echo: Callable[[str], None]
    transport: Any = None  # GitLab's API (tests)
    words: HostWords = WORDS

    @property
    def change(self) -> MergeRequest | None:
        iid = self.env.get("CI_MERGE_REQUEST_IID", "")
        if self.env.get("CI_PIPELINE_SOURCE") != "merge_request_event" or not iid.isdigit():
            return None
        source = self.env.get("CI_MERGE_REQUEST_SOURCE_PROJECT_ID", "")
        fork = source != self.env.get("CI_MERGE_REQUEST_PROJECT_ID", self.env.get("CI_PROJECT_ID", ""))
        base = self.env.get("CI_MERGE_REQUEST_DIFF_BASE_SHA", "")
        return MergeRequest(int(iid), self.env.get("CI_COMMIT_SHA", ""), base, fork)

    @property
    def files(self) -> Path:
        return Path(self.env.get("GITOPS_FILES_DIR") or tempfile.gettempdir()) / "screeps-gitops"

    def log(self, line: str) -> None:
        self.echo(line)

    def annotate(self, level: Level, message: str) -> None:
        self.echo(f"{level}: {inert(redact(message))}")

    def mask(self, value: str, *, prefix: bool = False, register: bool = True) -> None:
        if register and value.strip():  # GitLab masks masked variables; the tool's texts redact what it is told of
            Secret(value.strip())

    def check_environment(self, loaded: LoadedManifest, servers: list[str], env: Mapping[str, str]) -> list[str]:
        return []  # the credentials are the job's variables: GitLab has no inputs apart from them

    def missing_secret_message(self, manifest: Manifest, missing: list[str]) -> str:
        names = ", ".join(f"'{name}'" for name in missing)
        return (
            f"No Screeps credentials in this run for server {names}: add the variables the manifest names "
            "(token_env, password_env) in the project's Settings → CI/CD → Variables, masked and protected."
        )

    def base_manifest(self, loaded: LoadedManifest, base_sha: str) -> BaseManifest:
        return read_base_manifest(loaded, base_sha, unreachable="is not in the checkout (set `GIT_DEPTH: 0`)")

    def comment(self, report: Report) -> None:
        env, change, token = self.env, self.change, self.env.get("GITOPS_GITLAB_TOKEN", "").strip()
        if change is not None and not token:
            self.annotate("warning", "GITOPS_GITLAB_TOKEN is empty; the plan is only in the job's log.")
        if change is None or not token:
            return
        mark, project = marker(report.manifest), env.get("CI_MERGE_REQUEST_PROJECT_ID") or env.get("CI_PROJECT_ID", "")
        try:
            with GitLabNotes(env.get("CI_API_V4_URL", ""), project, change.number, Secret(token), self.transport) as n:
                note, what = n.upsert(mark, mark + "\n" + note_markdown(report, footer=self._footer()))
        except NoteError as exc:
            self.annotate("warning", f"the plan note was not posted: {exc.message}")
            return
        report.comment_url = (
            f"{env.get('CI_MERGE_REQUEST_PROJECT_URL', '')}/-/merge_requests/{change.number}#note_{note}"
        )
        self.echo(f"Plan note {what} on merge request !{change.number}: {report.comment_url}")

    def record(self, report: Report) -> None:
        """Nothing more: GitLab's environments are the pipeline's own (``environment:`` in .gitlab-ci.yml)."""

    def summary(self, report: Report) -> None:
        path = self.env.get("GITOPS_SUMMARY_FILE", "")
        if path:
            Path(path).write_text(note_markdown(report, footer=self._footer()), encoding="utf-8")

    def outputs(self, report: Report) -> None:
        """A dotenv file (``artifacts: reports: dotenv:``): each output as ``GITOPS_NAME=value``."""
        path = self.env.get("GITOPS_OUTPUT_FILE", "")
        if path:
            lines = [f"GITOPS_{name.upper().replace('-', '_')}={value}" for name, value in report.outputs().items()]
            Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")

    def _footer(self) -> str:
        sha, job = self.env.get("CI_COMMIT_SHA", "")[:7], self.env.get("CI_JOB_URL", "")
        return "screeps-gitops" + (f" for commit {sha}" if sha else "") + (f" · [job]({job})" if job else "")


def run_gitlab(env: Mapping[str, str], *, echo: Callable[[str], None], gitlab: Any = None, **given: Any) -> int:
    """One GitLab CI job: the inputs read, the policy run (``given``: its clock, transport, on_wait, log)."""
    if env.get("GITOPS_GITLAB_TOKEN", "").strip():  # registered: the tool's texts never show it
        Secret(env["GITOPS_GITLAB_TOKEN"].strip())
    return run(GitLabHost(env, read_inputs(env), echo, gitlab), env, **given)
