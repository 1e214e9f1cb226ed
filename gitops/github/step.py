"""The GitHub Action's step: plan, apply, drift or rehearse, then tell GitHub (outputs, job summary, pull request
comment, deployments, the drift issue).

``action.yml`` runs ``gitops action``, which calls :func:`run_action` with the inputs in ``GITOPS_*`` variables
(:mod:`gitops.github.inputs`). The step is a front end, as ``gitops plan``/``gitops apply`` are: the flow and its exit
codes are :mod:`gitops.app.pipeline`'s; here are only what a CI job adds: masks before anything is printed, the
checks of what a pull request may be given (:mod:`gitops.github.trust`), and the record of the run. That record is
written whatever the run raised, so a failed run still shows why; the error is re-raised for the CLI to print. A plan
with changes (exit code 2) is not a failure of the step: the ``exit-code`` output carries the 2.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitops.app import pipeline
from gitops.app.drift import check_drift, drift_exit_code
from gitops.app.options import DEFAULT_REFRESH, Options
from gitops.app.session import Session, open_session, servers_of
from gitops.app.targets import select
from gitops.config.credentials import CredentialsFileError, auth_available
from gitops.config.manifest import LoadedManifest, load_manifest
from gitops.core.rehearsalresult import RehearsalResult
from gitops.edges.clock import Clock, SystemClock
from gitops.edges.codesetfile import codeset_path
from gitops.edges.planfile import save_plan
from gitops.edges.rehearsalfile import read_result, write_result
from gitops.errors import ExitCode, GitopsError, SourceError
from gitops.github.deployments import record_deployments
from gitops.github.inputs import INPUT_ENV, Command, Inputs
from gitops.github.issues import update_drift_issue
from gitops.github.report import Report, post_comment, write_files
from gitops.github.runner import Echo, Masks, PullRequest, Runner, annotation, log_text
from gitops.github.trust import (
    compare_with_base,
    mask_credentials,
    missing_secret_message,
    no_credentials_notice,
    refuse_changed_routes,
    refuse_credentials_from_the_step_env,
)
from gitops.render.drift import render_text as render_drift_text
from gitops.render.outcome import Console, Consoles, Ended, MarkdownConsole, TextConsole
from gitops.render.progress import Progress
from gitops.render.rehearsal import text
from gitops.secrets import Secret, redact

if TYPE_CHECKING:
    from gitops.core.apply import Outcome
    from gitops.core.plan import Plan

#: The rehearse job's result file, under RUNNER_TEMP/screeps-gitops (the comment job downloads it by this name).
RESULT_FILE = "rehearsal.json"

#: Set by action.yml from the build step (``gitops build``, run without secrets) for the step that plans or applies.
BUILD_EXIT_ENV = "GITOPS_ACTION_BUILD_EXIT"


def run_action(
    env: Mapping[str, str],
    *,
    echo: Echo,
    clock: Clock | None = None,
    transport: Any = None,
    on_wait: Callable[[float, str], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> int:
    """One run of the Action's step. Returns 0 on success (a plan with changes included); raises the
    :class:`GitopsError` that stopped it, after the outputs, summary and comment say so."""
    mask = _mask_inputs(env, echo)
    runner = Runner.from_env(env)
    inputs = _read_inputs(env, runner, echo=echo)
    github_token = inputs.github_token.reveal() if inputs.github_token is not None else ""
    # As the workflow names it (relative to the workspace): the same on every runner, so the marker finds the comment.
    report = Report(command=inputs.command, manifest=Path(os.path.normpath(inputs.manifest)).as_posix())
    for warning in inputs.warnings:
        echo(annotation("warning", warning))
    try:
        if inputs.command == "comment":
            _comment_from_file(inputs, report, echo=echo)
            return 0
        options, tool_env = _options(inputs, env, runner, clock=clock, transport=transport, on_wait=on_wait, log=log)
        _run(inputs, runner, env, tool_env, options, report, echo=echo, mask=mask, github_token=github_token)
    except GitopsError as exc:
        report.error = exc
        report.exit_code = exc.exit_code
        echo(annotation("error", exc.message))
        if report.rehearsal is None and _rehearses_codesets(inputs, env):
            # The comment job shows why, rather than the last push's rehearsal.
            stopped = RehearsalResult(inputs.rehearse_ticks, "", None, (), redact(str(exc)), int(exc.exit_code))
            report.rehearsal_file = _write_result_file(runner, stopped)
        raise
    finally:
        # The rehearse job of two holds no token that may write: the comment job writes its section.
        comment = inputs.comment and not _rehearses_codesets(inputs, env)
        _tell_github(inputs, runner, report, echo=echo, github_token=github_token, comment=comment)
    return _step_code(report)


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


def _step_code(report: Report) -> int:
    """The step's exit code: a deploy that fails in the game fails the step (9 left in place, 10 rolled back, 11
    rollback failed; 12 one unverified or failing from an earlier run, issue 39), and so does a rehearsal that fails
    (9) or could not run (14); a plan with changes does not (its 2 is in the ``exit-code`` output)."""
    if report.command == "comment":  # the rehearse job's verdict is that job's; this one only wrote the comment
        return 0
    failed_in_game = report.verifications or report.rehearsal is not None
    return int(report.exit_code) if failed_in_game or report.exit_code == ExitCode.UNVERIFIED else 0


def _options(
    inputs: Inputs,
    env: Mapping[str, str],
    runner: Runner,
    *,
    clock: Clock | None,
    transport: Any,
    on_wait: Callable[[float, str], None] | None,
    log: Callable[[str], None] | None,
) -> tuple[Options, dict[str, str]]:
    """The run's options, and the tool's environment: the step's, with the credentials the inputs gave."""
    tool_env = dict(env)
    if inputs.command != "rehearse":  # a rehearsal needs no secret (safe on a fork's pull request): none is given
        tool_env.update({name: v.reveal() if isinstance(v, Secret) else v for name, v in inputs.credentials.items()})
    pr = runner.pull_request
    options = Options(
        manifest=inputs.manifest,
        env=tool_env,
        ref=inputs.ref,
        refresh=inputs.refresh or ("never" if inputs.command == "plan" and pr is not None else DEFAULT_REFRESH),
        max_wait=inputs.max_wait,
        clock=clock or SystemClock(),
        transport=transport,
        on_wait=on_wait,
        log=log,
        waiting=Progress(live=False).waiting,  # a job log: plain lines
        targets=inputs.targets,
    )
    return options, tool_env


def _run(
    inputs: Inputs,
    runner: Runner,
    env: Mapping[str, str],
    tool_env: Mapping[str, str],
    options: Options,
    report: Report,
    *,
    echo: Echo,
    mask: Masks,
    github_token: str,
) -> None:
    """The command, through the pipeline's stages: the credentials checked, the plan made and shown, then applied,
    rehearsed or weighed (or, for ``drift``, the drift check instead)."""
    loaded = load_manifest(inputs.manifest)
    if _rehearses_codesets(inputs, env):
        # The rehearse job of two (docs/github-action.md): code sets in, a result file out; no plan, no ledger, no
        # comment (the comment job writes it from the file), nothing of the repository built or run but the bots.
        _rehearse(inputs, runner, tool_env, loaded, report, echo=echo)
        return
    _check_build_step(env)
    pr = runner.pull_request
    if pr is not None:
        compare_with_base(loaded, pr, runner, report, github_token=github_token)
    if inputs.command in ("plan", "rehearse") and _without_any(select(loaded, options.targets), options.env):
        # Made from the ledger alone: decided before the session opens, so its options never change under it.
        options = replace(options, refresh="never")
    with open_session(options, loaded) as session:
        missing = _check_credentials(session, inputs, pr, env, report, echo=echo, mask=mask)
        if inputs.command == "drift":
            _drift(session, report, echo=echo)
            return
        _without_credentials(session, inputs, pr, missing, report, echo=echo)
        result = _plan(session, inputs, runner, report, echo=echo)
        if inputs.command == "rehearse":
            _rehearse(inputs, runner, tool_env, session.loaded, report, echo=echo)
        elif inputs.command == "plan":
            _refuse_plan(pipeline.weigh(session, result), echo=echo)
        else:
            _apply(session, result, report, echo=echo)


def _check_credentials(
    session: Session,
    inputs: Inputs,
    pr: PullRequest | None,
    env: Mapping[str, str],
    report: Report,
    *,
    echo: Echo,
    mask: Masks,
) -> list[str]:
    """Mask each server's credentials, refuse those a pull request may not use; the servers without credentials."""
    servers = session.servers()
    for warning in refuse_credentials_from_the_step_env(session.loaded, servers, inputs, env):
        echo(annotation("warning", warning))
    missing = [name for name in servers if not session.has_credentials(name)]
    for name in servers:
        if name not in missing:
            mask_credentials(mask, session, name)
    if pr is not None and len(missing) < len(servers):
        refuse_changed_routes(report)
    if missing and pr is None and inputs.command != "rehearse":
        # Expected on a push or a schedule: say which secret to add, and where, as a warning. Never on a pull
        # request: its plan is meant to run without the deploy token (its code could take it).
        echo(annotation("warning", missing_secret_message(session.loaded.manifest, missing)))
    return missing


def _without_credentials(
    session: Session, inputs: Inputs, pr: PullRequest | None, missing: list[str], report: Report, *, echo: Echo
) -> None:
    """A plan without credentials is made from the ledger alone (an apply stops), and the notices say so."""
    options = session.options
    if missing:
        if inputs.command == "apply":
            session.auth(missing[0])  # raises AuthError: what is missing and how to provide it
        report.notices.append(no_credentials_notice(missing, pr))
        if pr is not None and pr.from_fork:
            echo(annotation("notice", report.notices[-1]))
        elif pr is None:
            report.notices.append(missing_secret_message(session.loaded.manifest, missing))
    elif inputs.refresh is None and options.refresh == "never":
        report.notices.append(
            "Planned from the ledger that the last deploy left (refresh: never, the default on pull requests): "
            "no request was sent to the game server. Set `refresh: auto` to download what the server holds."
        )


def _plan(session: Session, inputs: Inputs, runner: Runner, report: Report, *, echo: Echo) -> Plan:
    """The plan stage: made, saved for the ``plan-file`` output, and shown in the log."""
    # A plan reports every server it can, marking the failed ones; an apply stops before writing anything.
    result = pipeline.make_or_load(session, isolate=inputs.command in ("plan", "rehearse"))
    report.plan = result
    report.plan_file = _plan_path(runner, inputs)
    save_plan(result, report.plan_file)
    TextConsole(echo).plan(result, now=session.options.clock.now())
    # A deploy unverified or failing (issue 39): plan and apply both say so; only a plan's changes count.
    report.exit_code = pipeline.plan_exit_code(result, None, changes_count=inputs.command == "plan")
    return result


def _without_any(loaded: LoadedManifest, env: Mapping[str, str]) -> bool:
    """Whether some server of the run has no credentials (:meth:`Session.has_credentials`, asked before the session
    opens; a broken credentials file is left for the session's own check to report, where it always was)."""
    for name in servers_of(loaded):
        try:
            if not auth_available(loaded.manifest.servers[name], env, cwd=loaded.base_dir):
                return True
        except CredentialsFileError:
            continue
    return False


def _refuse_plan(planned: pipeline.Planned, *, echo: Echo) -> None:
    """``command: plan``: a server that failed or a budget that does not fit fails the run, with the plan's code."""
    result, refusal = planned.plan, planned.refusal
    if result.failed:
        for failure in result.failed:
            echo(annotation("error", f"server '{failure.server}' failed: {failure.message}"))
        failed = GitopsError(
            "planning failed on server "
            + ", ".join(f"'{f.server}'" for f in result.failed)
            + "; the other servers are planned"
            + ("" if refusal is None else f", and {refusal.message}")
        )
        failed.exit_code = planned.exit_code
        raise failed
    if refusal is not None:
        raise refusal


def _rehearse(
    inputs: Inputs, runner: Runner, env: Mapping[str, str], loaded: LoadedManifest, report: Report, *, echo: Echo
) -> None:
    """``command: rehearse``: the plan's code in a throwaway world, against the pull request's base commit (its
    ``base.sha``; the checkout needs it: ``fetch-depth: 0``); judged, and shown in the plan comment."""
    # The private server's world (its socket library, its install): only a rehearsal needs it.
    from gitops.app.rehearsal import RehearsalRequest, rehearse  # noqa: PLC0415 (boundary: rehearse)

    base = runner.event.get("pull_request", {}).get("base", {}).get("sha") if runner.pull_request else None
    base = base if isinstance(base, str) else None
    if _rehearses_codesets(inputs, env):
        # Both sides from code set files: the base's must be the pull request's base commit (any, off a pull request).
        request = RehearsalRequest(
            ticks=inputs.rehearse_ticks, base_codeset=inputs.base_codeset, base_commit=base or ""
        )
    else:
        request = RehearsalRequest(ticks=inputs.rehearse_ticks, ref=inputs.ref, base=base)
    result = rehearse(loaded, request, env, say=echo)
    report.rehearsal = result
    report.rehearsal_file = _write_result_file(runner, result)
    # The world's error texts are the bot's (a pull request's): inert in the log, as every server text.
    echo(
        log_text("\n".join(text(result.branches, result.result, result.ticks, result.head_source, result.base_source)))
    )
    report.exit_code = result.exit_code
    if result.exit_code != ExitCode.OK:
        echo(annotation("error" if result.result == "failing" else "warning", f"rehearsal: {result.result}"))


def _check_build_step(env: Mapping[str, str]) -> None:
    """Stop when the build step failed: the code it should have left is not there (a manifest or usage error is
    left to this step, which reports it with its own message and code)."""
    raw = env.get(BUILD_EXIT_ENV, "").strip()
    if not raw or raw == "0":
        return
    code = int(raw) if raw.isdigit() else int(ExitCode.LOCAL_CODE)
    if code in (ExitCode.USAGE, ExitCode.MANIFEST):
        return
    error = SourceError(
        f"the build failed in the action's build step (exit code {code}); nothing was planned or sent",
        hint="Its output is in the step's log above. Fix the build, then push again.",
    )
    if code != ExitCode.LOCAL_CODE:
        try:
            error.exit_code = ExitCode(code)
        except ValueError:
            error.exit_code = ExitCode.FAILURE
    raise error


def _drift(session: Session, report: Report, *, echo: Echo) -> None:
    """``command: drift``: the drift use case, as ``gitops drift`` runs it (credentials required: it downloads)."""
    for server in session.servers():
        session.auth(server)  # raises AuthError: what is missing and how to provide it
    found = check_drift(session)
    report.drift = found
    echo(log_text(render_drift_text(found).rstrip("\n")))
    report.exit_code = drift_exit_code(found)


def _digest(inputs: Inputs) -> str:
    return hashlib.sha256(str(inputs.manifest).encode("utf-8")).hexdigest()[:10]


def _plan_path(runner: Runner, inputs: Inputs) -> Path:
    return runner.temp / "screeps-gitops" / f"{inputs.command}-{_digest(inputs)}.plan.json"


def _write_result_file(runner: Runner, found: RehearsalResult) -> Path:
    """The result file for the comment job, at a path the workflow can name (``rehearsal-file`` output)."""
    path = runner.temp / "screeps-gitops" / RESULT_FILE
    write_result(path, found)
    return path


def _rehearses_codesets(inputs: Inputs, env: Mapping[str, str]) -> bool:
    """``command: rehearse`` with a ``codeset``: the rehearse job of the two-job workflow."""
    return inputs.command == "rehearse" and codeset_path(env) is not None


def _comment_from_file(inputs: Inputs, report: Report, *, echo: Echo) -> None:
    """``command: comment``: the rehearsal section of the pull request's comment, from the result file the rehearse
    job wrote: read as data (:mod:`gitops.core.rehearsalresult`) and rendered here. Nothing of the repository is
    read or run (no manifest, no checkout needed)."""
    assert inputs.rehearsal_file is not None  # Inputs refuses command comment without it
    found = read_result(inputs.rehearsal_file)
    if found.error is not None:  # the rehearse job stopped: its error stands where the table would
        failed = GitopsError(found.error)
        failed.exit_code = ExitCode(found.error_code) if found.error_code in set(ExitCode) else ExitCode.FAILURE
        report.error, report.exit_code = failed, failed.exit_code
        return
    report.rehearsal = found
    report.exit_code = {"healthy": ExitCode.OK, "failing": ExitCode.UNHEALTHY, "unknown": ExitCode.REHEARSAL_UNKNOWN}[
        found.result
    ]
    echo(log_text("\n".join(text(found.branches, found.result, found.ticks, found.head_source, found.base_source))))


def _apply(session: Session, result: Plan, report: Report, *, echo: Echo) -> None:
    """The apply and verify stages of the fresh plan; each step and the applied line told to the log and the
    report (its job summary and comment), by the one presenter."""
    steps_done: dict[str, int] = {}
    console = Consoles(TextConsole(echo), MarkdownConsole(report.outcomes, report.verifications))

    def progress(outcome: Outcome) -> None:
        console.step(outcome)
        if outcome.status == "done":
            steps_done[outcome.branch] = steps_done.get(outcome.branch, 0) + 1

    try:
        applied = pipeline.apply(session, result, saved=False, progress=progress)
    finally:
        # What each changed branch ended as, for its deployment record (a branch whose steps were not all done,
        # because a step failed or the apply stopped before it, is a failed deploy).
        for branch in result.branches:
            if branch.steps:
                report.deployed[(branch.server, branch.branch)] = steps_done.get(branch.label, 0) == len(branch.steps)
    _record_applied(applied, report, console, echo=echo)


def _record_applied(applied: pipeline.Applied, report: Report, console: Console, *, echo: Echo) -> None:
    """The applied line and each verification, in the log and the report; a deploy whose code fails in the game
    (rolled back or not) is an error annotation and a failed deployment."""
    done = applied.report
    report.applied = done.applied
    console.ended(Ended(cancelled=False, applied_line=done.applied_line))
    for verification in done.verifications:
        # One at a time: each verification's error annotation follows its lines in the log.
        console.ended(Ended(cancelled=False, applied_line=None, verifications=[verification]))
        if verification.result in ("unhealthy", "rolled-back", "undo-failed"):
            echo(annotation("error", f"{verification.label}: the new code fails in the game ({verification.result})"))
            for key in report.deployed:
                if f"{key[0]}/{key[1]}" == verification.label:
                    report.deployed[key] = False
    report.exit_code = applied.exit_code


def _tell_github(
    inputs: Inputs, runner: Runner, report: Report, *, echo: Echo, github_token: str, comment: bool
) -> None:
    """Comment, summary and outputs; problems with the comment are warnings, never the reason a step fails."""
    pr = runner.pull_request
    if comment and pr is not None and inputs.command != "drift":
        post_comment(runner, report, pr, echo=echo, github_token=github_token)
    if inputs.command == "drift" and inputs.drift_issue and report.drift is not None:
        update_drift_issue(runner, report, echo=echo, github_token=github_token)
    if inputs.command == "apply" and pr is None and report.deployed:
        record_deployments(runner, report.deployed, echo=echo, github_token=github_token)
    write_files(runner, report)
