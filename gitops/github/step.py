"""The GitHub Action's step: the CI policy (:mod:`gitops.app.ci`) run on GitHub, then GitHub told (outputs, job
summary, pull request comment, deployments, the drift issue).

``action.yml`` runs ``gitops action``, which calls :func:`run_action` with the inputs in ``GITOPS_*`` variables
(:mod:`gitops.github.inputs`). The step is a front end, as ``gitops plan``/``gitops apply`` are: the flow, its
checks and its exit codes are :mod:`gitops.app.ci.run`'s; here are only GitHub's side of it: masks before anything is
printed, the inputs, and :class:`GitHubHost`, through which the policy logs, masks and reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitops.app.ci.host import BaseManifest, CiInputs, HostWords, Level
from gitops.app.ci.report import Report
from gitops.app.ci.run import RESULT_FILE, run
from gitops.config.manifest import LoadedManifest
from gitops.config.model import Manifest
from gitops.errors import GitopsError
from gitops.github.basemanifest import read_base_manifest
from gitops.github.deployments import record_deployments
from gitops.github.inputs import INPUT_ENV, Command, Inputs
from gitops.github.issues import update_drift_issue
from gitops.github.report import post_comment, write_files, write_summary
from gitops.github.runner import Echo, Masks, PullRequest, Runner, annotation, write_outputs
from gitops.github.trust import WORDS, missing_secret_message, refuse_credentials_from_the_step_env

__all__ = ["RESULT_FILE", "GitHubHost", "run_action"]


def run_action(env: Mapping[str, str], *, echo: Echo, **given: Any) -> int:
    """One run of the Action's step (``given``: the policy's clock, transport, on_wait and log). Returns 0 on success
    (a plan with changes included); raises the :class:`GitopsError` that stopped it, after the outputs, summary and
    comment say so."""
    mask = _mask_inputs(env, echo)
    runner = Runner.from_env(env)
    inputs = _read_inputs(env, runner, echo=echo)
    return run(GitHubHost(runner, inputs, env, echo, mask), env, **given)


@dataclass(frozen=True)
class GitHubHost:
    """The Actions runner as the CI policy's :class:`gitops.app.ci.host.Host`."""

    runner: Runner
    given: Inputs
    env: Mapping[str, str]
    echo: Echo
    masks: Masks

    @property
    def inputs(self) -> CiInputs:
        return self.given.for_the_policy()

    @property
    def change(self) -> PullRequest | None:
        return self.runner.pull_request

    @property
    def words(self) -> HostWords:
        return WORDS

    @property
    def files(self) -> Path:
        return self.runner.temp / "screeps-gitops"

    def log(self, line: str) -> None:
        self.echo(line)

    def annotate(self, level: Level, message: str) -> None:
        self.echo(annotation(level, message))

    def mask(self, value: str, *, prefix: bool = False, register: bool = True) -> None:
        self.masks.add(value, prefix=prefix, register=register)

    def check_environment(self, loaded: LoadedManifest, servers: list[str], env: Mapping[str, str]) -> list[str]:
        return refuse_credentials_from_the_step_env(loaded, servers, self.given, env)

    def missing_secret_message(self, manifest: Manifest, missing: list[str]) -> str:
        return missing_secret_message(manifest, missing)

    def base_manifest(self, loaded: LoadedManifest, base_sha: str) -> BaseManifest:
        runner = self.runner
        return read_base_manifest(
            loaded, base_sha, repository=runner.repository, api_url=runner.api_url, github_token=self._token
        )

    def comment(self, report: Report) -> None:
        pr = self.runner.pull_request
        if pr is not None:
            post_comment(self.runner, report, pr, echo=self.echo, github_token=self._token)

    def record(self, report: Report) -> None:
        """The drift issue (``drift-issue: true``) and, for an apply on a push, the deployments."""
        if report.command == "drift" and self.given.drift_issue and report.drift is not None:
            update_drift_issue(self.runner, report, echo=self.echo, github_token=self._token)
        if report.command == "apply" and self.runner.pull_request is None and report.deployed:
            record_deployments(self.runner, report.deployed, echo=self.echo, github_token=self._token)

    def summary(self, report: Report) -> None:
        write_summary(self.runner, report)

    def outputs(self, report: Report) -> None:
        if self.runner.output is not None:
            write_outputs(self.runner.output, report.outputs())

    @property
    def _token(self) -> str:
        token = self.given.github_token
        return token.reveal() if token is not None else ""


def _mask_inputs(env: Mapping[str, str], echo: Echo) -> Masks:
    """Secrets first: nothing may print before the runner knows to mask them."""
    mask = Masks(echo)
    mask.add(env.get(INPUT_ENV["token"], ""), prefix=True)
    mask.add(env.get(INPUT_ENV["screeps-token"], ""), prefix=True)
    mask.add(env.get(INPUT_ENV["password"], ""))
    mask.add(env.get(INPUT_ENV["github-token"], "").strip())
    for line in env.get(INPUT_ENV["credentials"], "").splitlines():
        mask.add(line.partition("=")[2], prefix=True)
    return mask


def _read_inputs(env: Mapping[str, str], runner: Runner, *, echo: Echo) -> Inputs:
    """The inputs; a bad one is recorded in the outputs and the summary, then raised."""
    try:
        return Inputs.from_env(env)
    except GitopsError as exc:
        command = env.get(INPUT_ENV["command"], "").strip()
        known: Command = "apply" if command == "apply" else "drift" if command == "drift" else "plan"
        report = Report(command=known, manifest="", error=exc)
        report.exit_code = exc.exit_code
        echo(annotation("error", exc.message))
        write_files(runner, report)
        raise
