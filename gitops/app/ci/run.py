"""One CI run: plan, apply, drift, rehearse or comment, then what the host keeps of it (outputs, summary, comment).

The flow and its exit codes are :mod:`gitops.app.pipeline`'s; here is what a CI job adds, for every CI system: the
refresh a run without credentials (or a change request's plan) takes, the checks of what a change request may be
given (:mod:`gitops.app.ci.trust`), the plan file, and the record of the run. That record is handed to the host
whatever the run raised, so a failed run still shows why; the error is re-raised for the CLI to print. A plan with
changes (exit code 2) is not a failure of the step: the ``exit-code`` output carries the 2.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitops.app import pipeline
from gitops.app.ci.host import ChangeRequest, CiInputs, Host
from gitops.app.ci.report import Report
from gitops.app.ci.trust import (
    compare_with_base,
    lacks_credentials,
    mask_credentials,
    no_credentials_notice,
    refuse_changed_routes,
)
from gitops.app.drift import check_drift, drift_exit_code
from gitops.app.options import DEFAULT_REFRESH, Options
from gitops.app.session import Session, open_session
from gitops.app.targets import select
from gitops.config.manifest import LoadedManifest, load_manifest
from gitops.core.rehearsalresult import RehearsalResult
from gitops.edges.clock import Clock, SystemClock
from gitops.edges.codesetfile import codeset_path
from gitops.edges.planfile import save_plan
from gitops.edges.rehearsalfile import read_result, write_result
from gitops.errors import ExitCode, GitopsError, SourceError
from gitops.inert import inert
from gitops.render.drift import render_text as render_drift_text
from gitops.render.outcome import Console, Consoles, Ended, MarkdownConsole, TextConsole
from gitops.render.progress import Progress
from gitops.render.rehearsal import text
from gitops.secrets import Secret, redact

if TYPE_CHECKING:
    from gitops.core.apply import Outcome
    from gitops.core.plan import Plan

#: The rehearse job's result file, in the host's folder (the comment job downloads it by this name).
RESULT_FILE = "rehearsal.json"

#: Set by the CI system's build step (``gitops build``, run without secrets) for the step that plans or applies.
BUILD_EXIT_ENV = "GITOPS_ACTION_BUILD_EXIT"


class CarriedError(GitopsError):
    """An error that carries another's exit code (a failed server's, a rehearse job's), given when it is made."""

    def __init__(self, message: str, *, exit_code: int, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.exit_code = exit_code


class BuildStepError(SourceError):
    """The build step failed: its exit code, unless that is unknown (then a source error's)."""

    def __init__(self, message: str, *, exit_code: ExitCode, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.exit_code = exit_code


def run(
    host: Host,
    env: Mapping[str, str],
    *,
    clock: Clock | None = None,
    transport: Any = None,
    on_wait: Callable[[float, str], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> int:
    """One run of the CI step. Returns 0 on success (a plan with changes included); raises the
    :class:`GitopsError` that stopped it, after the outputs, summary and comment say so."""
    inputs = host.inputs
    # As the job names it (relative to the workspace): the same on every runner, so the marker finds the comment.
    report = Report(command=inputs.command, manifest=Path(os.path.normpath(inputs.manifest)).as_posix())
    for warning in inputs.warnings:
        host.annotate("warning", warning)
    try:
        if inputs.command == "comment":
            _comment_from_file(host, report)
            return 0
        options = _options(host, env, clock=clock, transport=transport, on_wait=on_wait, log=log)
        _run(host, env, options, report)
    except GitopsError as exc:
        report.error = exc
        report.exit_code = exc.exit_code
        host.annotate("error", exc.message)
        if report.rehearsal is None and rehearses_codesets(inputs, env):
            # The comment job shows why, rather than the last push's rehearsal.
            stopped = RehearsalResult(inputs.rehearse_ticks, "", None, (), redact(str(exc)), int(exc.exit_code))
            report.rehearsal_file = _write_result_file(host, stopped)
        raise
    finally:
        # The rehearse job of two holds no token that may write: the comment job writes its section.
        comment = inputs.comment and not rehearses_codesets(inputs, env)
        if comment and host.change is not None and inputs.command != "drift":
            host.comment(report)
        host.record(report)
        host.summary(report)
        host.outputs(report)
    return step_code(report)


def step_code(report: Report) -> int:
    """The step's exit code: a deploy that fails in the game fails the step (9 left in place, 10 rolled back, 11
    rollback failed; 12 one unverified or failing from an earlier run, issue 39), and so does a rehearsal that fails
    (9) or could not run (14); a plan with changes does not (its 2 is in the ``exit-code`` output)."""
    if report.command == "comment":  # the rehearse job's verdict is that job's; this one only wrote the comment
        return 0
    failed_in_game = report.verifications or report.rehearsal is not None
    return int(report.exit_code) if failed_in_game or report.exit_code == ExitCode.UNVERIFIED else 0


def tool_env(inputs: CiInputs, env: Mapping[str, str]) -> dict[str, str]:
    """The tool's environment: the job's, with the credentials the inputs gave (none to a rehearsal, which needs
    no secret and is safe on a fork's change request)."""
    given = dict(env)
    if inputs.command != "rehearse":
        given.update({name: v.reveal() if isinstance(v, Secret) else v for name, v in inputs.credentials.items()})
    return given


def _options(
    host: Host,
    env: Mapping[str, str],
    *,
    clock: Clock | None,
    transport: Any,
    on_wait: Callable[[float, str], None] | None,
    log: Callable[[str], None] | None,
) -> Options:
    """The run's options; a change request's plan is made from the ledger unless the inputs say otherwise."""
    inputs = host.inputs
    never = inputs.command == "plan" and host.change is not None
    return Options(
        manifest=inputs.manifest,
        env=tool_env(inputs, env),
        ref=inputs.ref,
        refresh=inputs.refresh or ("never" if never else DEFAULT_REFRESH),
        max_wait=inputs.max_wait,
        clock=clock or SystemClock(),
        transport=transport,
        on_wait=on_wait,
        log=log,
        waiting=Progress(live=False).waiting,  # a job log: plain lines
        targets=inputs.targets,
    )


def _run(host: Host, env: Mapping[str, str], options: Options, report: Report) -> None:
    """The command, through the pipeline's stages: the credentials checked, the plan made and shown, then applied,
    rehearsed or weighed (or, for ``drift``, the drift check instead)."""
    inputs = host.inputs
    loaded = load_manifest(inputs.manifest)
    if rehearses_codesets(inputs, env):
        # The rehearse job of two (docs/github-action.md): code sets in, a result file out; no plan, no ledger, no
        # comment (the comment job writes it from the file), nothing of the repository built or run but the bots.
        _rehearse(host, options.env, loaded, report)
        return
    _check_build_step(env)
    change = host.change
    if change is not None:
        compare_with_base(loaded, change, host, report)
    if inputs.command in ("plan", "rehearse") and lacks_credentials(select(loaded, options.targets), options.env):
        # Made from the ledger alone: decided before the session opens, so its options never change under it.
        options = replace(options, refresh="never")
    with open_session(options, loaded) as session:
        missing = _check_credentials(host, session, env, report)
        if inputs.command == "drift":
            _drift(host, session, report)
            return
        _without_credentials(host, session, missing, report)
        result = _plan(host, session, report)
        if inputs.command == "rehearse":
            _rehearse(host, options.env, session.loaded, report)
        elif inputs.command == "plan":
            _refuse_plan(host, pipeline.weigh(session, result))
        else:
            _apply(host, session, result, report)


def _check_credentials(host: Host, session: Session, env: Mapping[str, str], report: Report) -> list[str]:
    """Mask each server's credentials, refuse those a change request may not use; the servers without them."""
    servers = session.servers()
    for warning in host.check_environment(session.loaded, servers, env):
        host.annotate("warning", warning)
    missing = [name for name in servers if not session.has_credentials(name)]
    for name in servers:
        if name not in missing:
            mask_credentials(host.mask, session, name)
    if host.change is not None and len(missing) < len(servers):
        refuse_changed_routes(report, host.words)
    if missing and host.change is None and host.inputs.command != "rehearse":
        # Expected on a push or a schedule: say which secret to add, and where, as a warning. Never on a change
        # request: its plan is meant to run without the deploy token (its code could take it).
        host.annotate("warning", host.missing_secret_message(session.loaded.manifest, missing))
    return missing


def _without_credentials(host: Host, session: Session, missing: list[str], report: Report) -> None:
    """A plan without credentials is made from the ledger alone (an apply stops), and the notices say so."""
    change = host.change
    if missing:
        if host.inputs.command == "apply":
            session.auth(missing[0])  # raises AuthError: what is missing and how to provide it
        report.notices.append(no_credentials_notice(missing, change, host.words))
        if change is not None and change.from_fork:
            host.annotate("notice", report.notices[-1])
        elif change is None:
            report.notices.append(host.missing_secret_message(session.loaded.manifest, missing))
    elif host.inputs.refresh is None and session.options.refresh == "never":
        report.notices.append(
            f"Planned from the ledger that the last deploy left (refresh: never, the default on {host.words.change}s)"
            ": no request was sent to the game server. Set `refresh: auto` to download what the server holds."
        )


def _plan(host: Host, session: Session, report: Report) -> Plan:
    """The plan stage: made, saved for the ``plan-file`` output, and shown in the log."""
    command = host.inputs.command
    # A plan reports every server it can, marking the failed ones; an apply stops before writing anything.
    result = pipeline.make_or_load(session, isolate=command in ("plan", "rehearse"))
    report.plan = result
    digest = hashlib.sha256(str(host.inputs.manifest).encode("utf-8")).hexdigest()[:10]
    report.plan_file = host.files / f"{command}-{digest}.plan.json"
    save_plan(result, report.plan_file)
    TextConsole(host.log).plan(result, now=session.options.clock.now())
    # A deploy unverified or failing (issue 39): plan and apply both say so; only a plan's changes count.
    report.exit_code = pipeline.plan_exit_code(result, None, changes_count=command == "plan")
    return result


def _refuse_plan(host: Host, planned: pipeline.Planned) -> None:
    """``command: plan``: a server that failed or a budget that does not fit fails the run, with the plan's code."""
    result, refusal = planned.plan, planned.refusal
    if result.failed:
        for failure in result.failed:
            host.annotate("error", f"server '{failure.server}' failed: {failure.message}")
        raise CarriedError(
            "planning failed on server "
            + ", ".join(f"'{f.server}'" for f in result.failed)
            + "; the other servers are planned"
            + ("" if refusal is None else f", and {refusal.message}"),
            exit_code=planned.exit_code,
        )
    if refusal is not None:
        raise refusal


def _rehearse(host: Host, env: Mapping[str, str], loaded: LoadedManifest, report: Report) -> None:
    """``command: rehearse``: the plan's code in a throwaway world, against the change request's base commit (the
    checkout needs it: ``fetch-depth: 0``); judged, and shown in the plan comment."""
    # The private server's world (its socket library, its install): only a rehearsal needs it.
    from gitops.app.rehearsal import RehearsalRequest, rehearse  # noqa: PLC0415 (boundary: rehearse)

    inputs = host.inputs
    base = _base_sha(host.change)
    if rehearses_codesets(inputs, env):
        # Both sides from code set files: the base's must be the change request's base commit (any, off one).
        request = RehearsalRequest(
            ticks=inputs.rehearse_ticks, base_codeset=inputs.base_codeset, base_commit=base or ""
        )
    else:
        request = RehearsalRequest(ticks=inputs.rehearse_ticks, ref=inputs.ref, base=base)
    result = rehearse(loaded, request, env, say=host.log)
    report.rehearsal = result
    report.rehearsal_file = _write_result_file(host, result)
    # The world's error texts are the bot's (a change request's): inert in the log, as every server text.
    host.log(_log_text(text(result.branches, result.result, result.ticks, result.head_source, result.base_source)))
    report.exit_code = result.exit_code
    if result.exit_code != ExitCode.OK:
        host.annotate("error" if result.result == "failing" else "warning", f"rehearsal: {result.result}")


def _base_sha(change: ChangeRequest | None) -> str | None:
    return change.base_sha or None if change is not None else None


def _log_text(lines: list[str]) -> str:
    """Lines for the job's log that are not the host's commands: redacted, and inert."""
    return inert(redact("\n".join(lines)))


def _check_build_step(env: Mapping[str, str]) -> None:
    """Stop when the build step failed: the code it should have left is not there (a manifest or usage error is
    left to this step, which reports it with its own message and code)."""
    raw = env.get(BUILD_EXIT_ENV, "").strip()
    if not raw or raw == "0":
        return
    code = int(raw) if raw.isdigit() else int(ExitCode.LOCAL_CODE)
    if code in (ExitCode.USAGE, ExitCode.MANIFEST):
        return
    exit_code = ExitCode(code) if code in set(ExitCode) else ExitCode.FAILURE
    raise BuildStepError(
        f"the build failed in the action's build step (exit code {code}); nothing was planned or sent",
        hint="Its output is in the step's log above. Fix the build, then push again.",
        exit_code=exit_code,
    )


def _drift(host: Host, session: Session, report: Report) -> None:
    """``command: drift``: the drift use case, as ``gitops drift`` runs it (credentials required: it downloads)."""
    for server in session.servers():
        session.auth(server)  # raises AuthError: what is missing and how to provide it
    found = check_drift(session)
    report.drift = found
    host.log(inert(redact(render_drift_text(found).rstrip("\n"))))
    report.exit_code = drift_exit_code(found)


def _write_result_file(host: Host, found: RehearsalResult) -> Path:
    """The result file for the comment job, at a path the workflow can name (``rehearsal-file`` output)."""
    path = host.files / RESULT_FILE
    write_result(path, found)
    return path


def rehearses_codesets(inputs: CiInputs, env: Mapping[str, str]) -> bool:
    """``command: rehearse`` with a ``codeset``: the rehearse job of the two-job workflow."""
    return inputs.command == "rehearse" and codeset_path(env) is not None


def _comment_from_file(host: Host, report: Report) -> None:
    """``command: comment``: the rehearsal section of the change request's comment, from the result file the
    rehearse job wrote: read as data (:mod:`gitops.core.rehearsalresult`) and rendered by the host. Nothing of the
    repository is read or run (no manifest, no checkout needed)."""
    assert host.inputs.rehearsal_file is not None  # the inputs refuse command comment without it
    found = read_result(host.inputs.rehearsal_file)
    if found.error is not None:  # the rehearse job stopped: its error stands where the table would
        code = ExitCode(found.error_code) if found.error_code in set(ExitCode) else ExitCode.FAILURE
        report.error, report.exit_code = CarriedError(found.error, exit_code=code), code
        return
    report.rehearsal = found
    report.exit_code = {"healthy": ExitCode.OK, "failing": ExitCode.UNHEALTHY, "unknown": ExitCode.REHEARSAL_UNKNOWN}[
        found.result
    ]
    host.log(_log_text(text(found.branches, found.result, found.ticks, found.head_source, found.base_source)))


def _apply(host: Host, session: Session, result: Plan, report: Report) -> None:
    """The apply and verify stages of the fresh plan; each step and the applied line told to the log and the
    report (its summary and comment), by the one presenter."""
    steps_done: dict[str, int] = {}
    console = Consoles(TextConsole(host.log), MarkdownConsole(report.outcomes, report.verifications))

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
    _record_applied(host, applied, report, console)


def _record_applied(host: Host, applied: pipeline.Applied, report: Report, console: Console) -> None:
    """The applied line and each verification, in the log and the report; a deploy whose code fails in the game
    (rolled back or not) is an error annotation and a failed deployment."""
    done = applied.report
    report.applied = done.applied
    console.ended(Ended(cancelled=False, applied_line=done.applied_line))
    for verification in done.verifications:
        # One at a time: each verification's error annotation follows its lines in the log.
        console.ended(Ended(cancelled=False, applied_line=None, verifications=[verification]))
        if verification.result in ("unhealthy", "rolled-back", "undo-failed"):
            host.annotate("error", f"{verification.label}: the new code fails in the game ({verification.result})")
            for key in report.deployed:
                if f"{key[0]}/{key[1]}" == verification.label:
                    report.deployed[key] = False
    report.exit_code = applied.exit_code
