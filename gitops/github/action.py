"""The GitHub Action's step: plan, apply or drift, then tell GitHub (outputs, job summary, pull request comment, the
drift issue).

``action.yml`` runs ``gitops action`` with the Action's inputs in ``GITOPS_*`` environment variables (secrets never
on a command line; the names are in :data:`INPUT_ENV` and ``docs/github-action.md``). One run:

1. prints ``::add-mask::`` for every secret and every string derived from one (the no-rate-limit link), before
   anything else could print them;
2. plans through :mod:`gitops.app.planning`, as ``gitops plan`` does; without credentials (a pull request from a fork
   gets no secrets) it plans from the ledger alone (``--refresh=never``) and says so;
3. for ``apply``: carries the plan out through :func:`gitops.app.applying.run_apply`, as ``gitops apply --yes``
   does (the same budget recheck, verification and report); ``drift`` instead of 2 and 3 runs
   :func:`gitops.app.drift.check_drift`, as ``gitops drift`` does (drift, exit code 2, is not a failure either);
4. writes the outputs (``GITHUB_OUTPUT``), the Markdown plan (``GITHUB_STEP_SUMMARY``, cut under 1 MiB) and, on a
   pull request, the one plan comment (cut under 65,536 characters), edited in place on every push; for ``drift``
   with ``drift-issue``, the one drift issue (opened or updated while something drifted, closed when nothing has).

Step 4 happens whatever step 2 or 3 raised, so a failed run still shows why in the summary and the comment. The
error itself is re-raised for the CLI to print and turn into the exit code; a plan with changes (exit code 2) is
not a failure of the step: the ``exit-code`` output carries the 2.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gitops.app.options import DEFAULT_MANIFEST, DEFAULT_MAX_WAIT, DEFAULT_REFRESH, REFRESH_CHOICES, Refresh
from gitops.app.targets import Targets
from gitops.config.routes import RouteChange, route_changes
from gitops.core.rehearsal import DEFAULT_TICKS
from gitops.errors import ExitCode, GitopsError, SourceError, TrustError, UsageError
from gitops.github.basemanifest import read_base_manifest
from gitops.inert import inert
from gitops.secrets import Secret, redact

Command = Literal["plan", "apply", "drift", "rehearse"]

#: The environment variables ``action.yml`` sets, by input name.
INPUT_ENV: dict[str, str] = {
    "command": "GITOPS_ACTION_COMMAND",
    "manifest": "GITOPS_MANIFEST",
    "ref": "GITOPS_REF",
    "refresh": "GITOPS_REFRESH",
    "comment": "GITOPS_ACTION_COMMENT",
    "drift-issue": "GITOPS_ACTION_DRIFT_ISSUE",
    "max-wait": "GITOPS_MAX_WAIT",
    "github-token": "GITOPS_GITHUB_TOKEN",
    "screeps-token": "GITOPS_ACTION_SCREEPS_TOKEN",
    "token": "GITOPS_ACTION_TOKEN",
    "token-env": "GITOPS_ACTION_TOKEN_ENV",
    "username": "GITOPS_ACTION_USERNAME",
    "username-env": "GITOPS_ACTION_USERNAME_ENV",
    "password": "GITOPS_ACTION_PASSWORD",
    "password-env": "GITOPS_ACTION_PASSWORD_ENV",
    "servers": "GITOPS_SERVERS",
    "branches": "GITOPS_BRANCHES",
    "credentials": "GITOPS_ACTION_CREDENTIALS",
    "codeset": "GITOPS_CODESET",
    "rehearse-ticks": "GITOPS_ACTION_REHEARSE_TICKS",
}

#: GitHub's limit of one step's job summary (bytes), with room for what other steps of the same step append.
SUMMARY_LIMIT_BYTES = 1024 * 1024 - 4096
#: Characters kept free in the comment for the marker and footer estimate errors.
_COMMENT_MARGIN = 512
#: An error message longer than this is cut in the summary and comment (the log has all of it).
_ERROR_CHARS = 8000

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off", "")


# --- inputs and the runner's context ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Inputs:
    """The Action's inputs, checked. ``credentials`` maps environment variable names to values to add to the
    tool's environment (the manifest's ``token_env``/``username_env``/``password_env`` read them); the token and
    the password are :class:`Secret`, the user name is not (it is public in the game, and masking it would hide
    every mention of the player's name in the log)."""

    command: Command
    manifest: Path
    ref: str | None
    refresh: Refresh | None
    comment: bool
    max_wait: float
    #: For ``command: drift``: open or update one issue while something drifted, close it when nothing has.
    drift_issue: bool
    github_token: Secret | None
    credentials: dict[str, Secret | str] = field(default_factory=dict)
    #: ``servers``/``branches``: comma- or newline-separated, as ``--server``/``--branch``.
    targets: Targets = field(default_factory=Targets)
    #: What the run says before it plans (an input's old name).
    warnings: list[str] = field(default_factory=list)
    #: ``command: rehearse``: the ticks each bot runs.
    rehearse_ticks: int = DEFAULT_TICKS

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Inputs:
        """Read and check the inputs; :class:`UsageError` naming the input and what it accepts."""

        def get(name: str, default: str = "") -> str:
            return env.get(INPUT_ENV[name], "").strip() or default

        command = get("command", "plan")
        if command not in ("plan", "apply", "drift", "rehearse"):
            raise _input_error("command", command, "plan, apply, drift or rehearse")
        ticks = get("rehearse-ticks", str(DEFAULT_TICKS))
        if not ticks.isdigit() or not 1 <= int(ticks) <= 10_000:
            raise _input_error("rehearse-ticks", ticks, "a number of ticks from 1 to 10000")
        refresh = get("refresh") or None
        if refresh is not None and refresh not in REFRESH_CHOICES:
            choices = ", ".join(REFRESH_CHOICES[:-1]) + " or " + REFRESH_CHOICES[-1]
            raise _input_error("refresh", refresh, f"{choices} (or empty for the default)")
        comment = get("comment", "true").lower()
        if comment not in _TRUE + _FALSE:
            raise _input_error("comment", comment, "true or false")
        drift_issue = get("drift-issue", "false").lower()
        if drift_issue not in _TRUE + _FALSE:
            raise _input_error("drift-issue", drift_issue, "true or false")
        try:
            max_wait = float(get("max-wait", f"{DEFAULT_MAX_WAIT:g}"))
        except ValueError:
            raise _input_error("max-wait", get("max-wait"), "a number of seconds") from None
        if max_wait < 0:
            raise _input_error("max-wait", get("max-wait"), "a number of seconds, 0 or more")
        credentials: dict[str, Secret | str] = {}
        warnings: list[str] = []
        token_input = _screeps_token_input(env, warnings)
        for value_input, name_input, default_name in (
            (token_input, "token-env", "SCREEPS_TOKEN"),
            ("username", "username-env", "SCREEPS_USERNAME"),
            ("password", "password-env", "SCREEPS_PASSWORD"),
        ):
            # Not stripped: a password may end in a space. A token is stripped by the credentials module.
            value = env.get(INPUT_ENV[value_input], "")
            name = get(name_input, default_name)
            if not _ENV_NAME.fullmatch(name):
                raise _input_error(name_input, name, "an environment variable name (letters, digits, _)")
            if value.strip():
                credentials[name] = value.strip() if value_input == "username" else Secret(value)
        for number, line in enumerate(env.get(INPUT_ENV["credentials"], "").splitlines(), start=1):
            if not line.strip():
                continue
            name, equals, value = line.strip().partition("=")
            if not equals or not _ENV_NAME.fullmatch(name.strip()) or not value.strip():
                # The line holds a secret: the message names its number, never its text.
                raise UsageError(
                    f"input 'credentials' ({INPUT_ENV['credentials']}): line {number} is not NAME=value",
                    hint="Write one `NAME=${{ secrets.NAME }}` per line, NAME being the variable the manifest's "
                    "token_env, username_env or password_env names.",
                )
            credentials[name.strip()] = Secret(value.strip())
        github_token = env.get(INPUT_ENV["github-token"], "").strip()
        return cls(
            command=command,  # type: ignore[arg-type]
            manifest=Path(get("manifest", DEFAULT_MANIFEST)),
            ref=get("ref") or None,
            refresh=refresh,
            comment=comment in _TRUE,
            max_wait=max_wait,
            drift_issue=drift_issue in _TRUE,
            github_token=Secret(github_token) if github_token else None,
            credentials=credentials,
            targets=Targets.of(get("servers").splitlines(), get("branches").splitlines()),
            warnings=warnings,
            rehearse_ticks=int(ticks),
        )


#: How GitHub's tokens begin (personal, OAuth, user-to-server, the Actions GITHUB_TOKEN, refresh, fine-grained).
_GITHUB_TOKEN_PREFIXES = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")


def _screeps_token_input(env: Mapping[str, str], warnings: list[str]) -> str:
    """The input that holds the Screeps token: ``screeps-token``, or ``token``, its old name, accepted with a warning
    for this release (``token`` means the GitHub token to most actions, and a GitHub token must never reach a game
    server). :class:`UsageError` for both at once, or for a GitHub token in either (never quoted)."""
    new, old = env.get(INPUT_ENV["screeps-token"], "").strip(), env.get(INPUT_ENV["token"], "").strip()
    if new and old:
        raise UsageError(
            "inputs 'screeps-token' and 'token' are both set; 'token' is the old name of 'screeps-token'",
            hint="Keep `screeps-token:` and remove `token:` from the step's `with:`.",
        )
    chosen = "token" if old else "screeps-token"
    if (new or old).startswith(_GITHUB_TOKEN_PREFIXES):
        raise UsageError(
            f"input '{chosen}' holds a GitHub token, not a Screeps token; it was not sent anywhere",
            hint="Give the Screeps token, from its own secret: `screeps-token: ${{ secrets.SCREEPS_TOKEN }}` (the "
            "GitHub token goes in `github-token:`, which defaults to the job's own).",
        )
    if old:
        warnings.append(
            "input 'token' is the old name of 'screeps-token' (accepted in this release only): rename it in the "
            "workflow, `screeps-token: ${{ secrets.SCREEPS_TOKEN }}`; most actions mean the GitHub token by 'token'."
        )
    return chosen


def _input_error(name: str, value: str, accepted: str) -> UsageError:
    return UsageError(
        f"input '{name}' ({INPUT_ENV[name]}) is {value!r}; it must be {accepted}",
        hint="Fix the `with:` of the screeps-gitops step in the workflow (gitops help github-action lists the inputs).",
    )


@dataclass(frozen=True)
class PullRequest:
    """The pull request of a ``pull_request`` event."""

    number: int
    head_sha: str
    head_repo: str | None
    base_repo: str | None
    #: The base branch's commit when the event was made (the manifest compared against).
    base_sha: str = ""

    @property
    def from_fork(self) -> bool:
        """A fork's pull request (its head repository deleted counts too): GitHub gives it no secrets."""
        return self.head_repo is None or self.head_repo != self.base_repo


@dataclass(frozen=True)
class Runner:
    """What the Actions runner provides: event, repository, API address, and the files that steps write."""

    event_name: str
    event: Mapping[str, Any]
    repository: str
    api_url: str
    server_url: str
    run_id: str
    sha: str
    output: Path | None
    summary: Path | None
    temp: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Runner:
        event: Any = {}
        path = env.get("GITHUB_EVENT_PATH", "")
        if path:
            try:
                event = json.loads(Path(path).read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise UsageError(
                    f"GITHUB_EVENT_PATH names {path}, which is not a readable JSON event: {type(exc).__name__}"
                ) from None
        return cls(
            event_name=env.get("GITHUB_EVENT_NAME", ""),
            event=event if isinstance(event, dict) else {},
            repository=env.get("GITHUB_REPOSITORY", ""),
            api_url=env.get("GITHUB_API_URL", "") or "https://api.github.com",
            server_url=env.get("GITHUB_SERVER_URL", "") or "https://github.com",
            run_id=env.get("GITHUB_RUN_ID", ""),
            sha=env.get("GITHUB_SHA", ""),
            output=Path(env["GITHUB_OUTPUT"]) if env.get("GITHUB_OUTPUT") else None,
            summary=Path(env["GITHUB_STEP_SUMMARY"]) if env.get("GITHUB_STEP_SUMMARY") else None,
            temp=Path(env.get("RUNNER_TEMP") or tempfile.gettempdir()),
        )

    @property
    def pull_request(self) -> PullRequest | None:
        """The pull request of a ``pull_request``/``pull_request_target`` event, else ``None``."""
        if not self.event_name.startswith("pull_request"):
            return None
        pr = self.event.get("pull_request")
        if not isinstance(pr, dict) or not isinstance(pr.get("number"), int):
            return None

        def repo(side: str) -> str | None:
            part = pr.get(side)
            repo_ = part.get("repo") if isinstance(part, dict) else None
            name = repo_.get("full_name") if isinstance(repo_, dict) else None
            return name if isinstance(name, str) else None

        def sha(side: str) -> str:
            part = pr.get(side)
            value = part.get("sha") if isinstance(part, dict) else None
            return value if isinstance(value, str) else ""

        return PullRequest(pr["number"], sha("head"), repo("head"), repo("base"), sha("base"))

    @property
    def run_url(self) -> str | None:
        if not (self.repository and self.run_id):
            return None
        return f"{self.server_url.rstrip('/')}/{self.repository}/actions/runs/{self.run_id}"


# --- workflow commands and files -------------------------------------------------------------------------------


def escape_data(text: str) -> str:
    """A workflow command's data, escaped as the runner unescapes it."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def mask_lines(value: str) -> list[str]:
    """``::add-mask::`` commands for a value (one per line: the runner masks line by line)."""
    return [f"::add-mask::{escape_data(line)}" for line in value.splitlines() if line.strip()]


def annotation(level: Literal["notice", "warning", "error"], message: str) -> str:
    return f"::{level} title={escape_property('screeps-gitops')}::{escape_data(inert(redact(message)))}"


def log_text(text: str) -> str:
    """Text for the job's log that is not a workflow command: redacted, and inert (a server's text could
    otherwise begin a line with ``::``, or move the log viewer's cursor)."""
    return inert(redact(text))


def write_outputs(path: Path, outputs: Mapping[str, str]) -> None:
    """Append outputs to ``GITHUB_OUTPUT`` in the heredoc form, safe for values of several lines."""
    chunks: list[str] = []
    for name, value in outputs.items():
        delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
        while delimiter in value:  # pragma: no cover - 128 random bits
            delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
        chunks.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    with path.open("a", encoding="utf-8") as fh:
        fh.write("".join(chunks))


# --- one run ---------------------------------------------------------------------------------------------------


@dataclass
class Report:
    """What a run found out, for the outputs, the summary and the comment."""

    command: Command
    manifest: str
    plan: Any = None
    plan_file: Path | None = None
    notices: list[str] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)
    applied: bool = False
    error: GitopsError | None = None
    exit_code: int = ExitCode.OK
    comment_url: str = ""
    #: ``command: drift``: the :class:`gitops.core.drift.DriftReport`, and the drift issue's address.
    drift: Any = None
    issue_url: str = ""
    #: ``command: apply``: per (server, branch) the apply set out to change, whether every step of it was done.
    deployed: dict[tuple[str, str], bool] = field(default_factory=dict)
    #: ``command: apply``: each verified branch's :class:`gitops.app.verifying.Verification`.
    verifications: list[Any] = field(default_factory=list)
    #: On a pull request: each server's url, and what the pull request changes of its credential routes and of
    #: the builds (:func:`gitops.config.routes.route_changes`); ``routes_unknown`` says why they could not be
    #: compared with the base branch's manifest.
    servers: dict[str, str] = field(default_factory=dict)
    route_changes: list[RouteChange] = field(default_factory=list)
    routes_unknown: str = ""
    #: ``command: rehearse``: the :class:`gitops.app.rehearsal.Rehearsal`.
    rehearsal: Any = None

    def health(self) -> str:
        """The worst first verdict of the verified branches (failing, unknown, healthy); empty when none."""
        statuses = {v.health.status for v in self.verifications}
        return next((s for s in ("failing", "unknown", "healthy") if s in statuses), "")

    def outputs(self) -> dict[str, str]:
        plan = self.plan
        rolled = any(v.action == "restored" for v in self.verifications)
        return {
            "health": self.health(),
            "rolled-back": "" if not self.verifications else str(rolled).lower(),
            "exit-code": str(int(self.exit_code)),
            "has-changes": "" if plan is None else str(bool(plan.has_changes)).lower(),
            "uploads-needed": "" if plan is None else str(plan.uploads_needed),
            "plan-file": "" if self.plan_file is None else str(self.plan_file),
            "comment-url": self.comment_url,
            "drifted": "" if self.drift is None else str(bool(self.drift.has_drift)).lower(),
            "issue-url": self.issue_url,
            "rehearsal": "" if self.rehearsal is None else str(self.rehearsal.result),
        }


Echo = Callable[[str], None]


def run_action(
    env: Mapping[str, str],
    *,
    echo: Echo,
    clock: Any = None,
    transport: Any = None,
    on_wait: Callable[[float, str], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> int:
    """One run of the Action's step. Returns 0 on success (a plan with changes included); raises the
    :class:`GitopsError` that stopped it, after the outputs, summary and comment say so."""
    # Secrets first: nothing may print before the runner knows to mask them.
    mask = _Masks(echo)
    github_token = env.get(INPUT_ENV["github-token"], "").strip()
    mask.add(env.get(INPUT_ENV["token"], ""), prefix=True)
    mask.add(env.get(INPUT_ENV["screeps-token"], ""), prefix=True)
    mask.add(env.get(INPUT_ENV["password"], ""))
    mask.add(github_token)
    for line in env.get(INPUT_ENV["credentials"], "").splitlines():
        mask.add(line.partition("=")[2], prefix=True)
    runner = Runner.from_env(env)
    try:
        inputs = Inputs.from_env(env)
    except GitopsError as exc:
        command = env.get(INPUT_ENV["command"], "").strip()
        known: Command = "apply" if command == "apply" else "drift" if command == "drift" else "plan"
        report = Report(command=known, manifest="", error=exc)
        report.exit_code = exc.exit_code
        echo(annotation("error", exc.message))
        _write_files(runner, report)
        raise
    # As the workflow names it (relative to the workspace): the same on every runner, so the marker finds the comment.
    report = Report(command=inputs.command, manifest=Path(os.path.normpath(inputs.manifest)).as_posix())
    for warning in inputs.warnings:
        echo(annotation("warning", warning))
    try:
        _plan_and_apply(
            inputs,
            runner,
            env,
            report,
            echo=echo,
            mask=mask,
            clock=clock,
            transport=transport,
            on_wait=on_wait,
            log=log,
        )
    except GitopsError as exc:
        report.error = exc
        report.exit_code = exc.exit_code
        echo(annotation("error", exc.message))
        raise
    finally:
        _tell_github(inputs, runner, report, echo=echo, github_token=github_token)
    # A deploy that fails in the game fails the step: 9 left in place, 10 rolled back, 11 rollback failed; 12 one
    # unverified or failing from an earlier run (issue 39). So does a rehearsal that fails (9) or could not run (14).
    failed_in_game = report.verifications or report.rehearsal is not None
    return int(report.exit_code) if failed_in_game or report.exit_code == ExitCode.UNVERIFIED else 0


class _Masks:
    """``::add-mask::`` each secret once, and register it so that :func:`redact` scrubs it too."""

    def __init__(self, echo: Echo) -> None:
        self._echo = echo
        self._done: set[str] = set()

    def add(self, value: str, *, prefix: bool = False, register: bool = True) -> None:
        """Mask ``value``; with ``prefix`` (a Screeps token) also its first 8 characters, which the official
        server echoes in its 429 answers (see :mod:`gitops.secrets`). ``register=False`` for a value that only
        carries a registered secret (the link): redacting the secret in it is enough for the tool's own text."""
        value = value.strip()
        if not value:
            return
        if register:
            Secret(value)
        values = [value, value[:8]] if prefix and len(value) >= 16 else [value]
        for item in values:
            if item not in self._done:
                self._done.add(item)
                for line in mask_lines(item):
                    self._echo(line)


def _plan_and_apply(
    inputs: Inputs,
    runner: Runner,
    env: Mapping[str, str],
    report: Report,
    *,
    echo: Echo,
    mask: _Masks,
    clock: Any,
    transport: Any,
    on_wait: Callable[[float, str], None] | None,
    log: Callable[[str], None] | None,
) -> None:
    from gitops.app.headstart.start import HeadStart
    from gitops.app.options import Options
    from gitops.app.planning import budget_error, make_plan
    from gitops.app.session import open_session
    from gitops.config.manifest import load_manifest
    from gitops.edges.clock import SystemClock
    from gitops.edges.planfile import save_plan
    from gitops.render.plan import render_text
    from gitops.render.progress import Progress

    tool_env = dict(env)
    if inputs.command != "rehearse":  # a rehearsal needs no secret (safe on a fork's pull request): none is given
        tool_env.update({name: v.reveal() if isinstance(v, Secret) else v for name, v in inputs.credentials.items()})
    loaded = load_manifest(inputs.manifest)
    _check_build_step(env)
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
    if pr is not None:
        token = inputs.github_token.reveal() if inputs.github_token is not None else ""
        _compare_with_base(loaded, pr, runner, report, github_token=token)
    with open_session(options, loaded) as s:
        servers = s.servers()
        for warning in _refuse_credentials_from_the_step_env(loaded, servers, inputs, env):
            echo(annotation("warning", warning))
        missing = [name for name in servers if not s.has_credentials(name)]
        for name in servers:
            if name not in missing:
                _mask_credentials(mask, s, name)
        if pr is not None and len(missing) < len(servers):
            _refuse_changed_routes(report)
        fork = pr is not None and pr.from_fork
        if missing and pr is None and inputs.command != "rehearse":
            # Expected on a push or a schedule: say which secret to add, and where, as a warning. Never on a pull
            # request: its plan is meant to run without the deploy token (its code could take it).
            echo(annotation("warning", missing_secret_message(s.loaded.manifest, missing)))
        if inputs.command == "drift":
            _drift(s, report, echo=echo)
            return
        if missing:
            if inputs.command == "apply":
                s.auth(missing[0])  # raises AuthError: what is missing and how to provide it
            options.refresh = "never"
            report.notices.append(_no_credentials_notice(missing, pr))
            if fork:
                echo(annotation("notice", report.notices[-1]))
            elif pr is None:
                report.notices.append(missing_secret_message(s.loaded.manifest, missing))
        elif inputs.refresh is None and options.refresh == "never":
            report.notices.append(
                "Planned from the ledger that the last deploy left (refresh: never, the default on pull requests): "
                "no request was sent to the game server. Set `refresh: auto` to download what the server holds."
            )
        # A plan reports every server it can, marking the failed ones; an apply stops before writing anything.
        result = make_plan(s, isolate=inputs.command in ("plan", "rehearse"), headstart=HeadStart(s))
        report.plan = result
        report.plan_file = _plan_path(runner, inputs)
        save_plan(result, report.plan_file)
        now = options.clock.now()
        echo(log_text(render_text(result, now=now).rstrip("\n")))
        report.exit_code = ExitCode.CHANGES if inputs.command == "plan" and result.has_changes else ExitCode.OK
        if result.unsettled:  # a deploy unverified or failing (issue 39): plan and apply both say so
            report.exit_code = ExitCode.UNVERIFIED
        if inputs.command == "rehearse":
            _rehearse(inputs, runner, tool_env, s.loaded, report, echo=echo)
            return
        if inputs.command == "plan":
            refusal = budget_error(result, s)
            if result.failed:
                for failure in result.failed:
                    echo(annotation("error", f"server '{failure.server}' failed: {failure.message}"))
                failed = GitopsError(
                    "planning failed on server "
                    + ", ".join(f"'{f.server}'" for f in result.failed)
                    + "; the other servers are planned"
                    + ("" if refusal is None else f", and {refusal.message}")
                )
                # The worst code: the failures', or the budget's when that is higher.
                failed.exit_code = max(result.failure_code or 0, ExitCode.BUDGET if refusal is not None else 0)
                raise failed
            if refusal is not None:
                raise refusal
            return
        _apply(result, s, report, echo=echo)


#: Set by action.yml from the build step (``gitops build``, run without secrets) for the step that plans or applies.
BUILD_EXIT_ENV = "GITOPS_ACTION_BUILD_EXIT"


def _rehearse(
    inputs: Inputs, runner: Runner, env: Mapping[str, str], loaded: Any, report: Report, *, echo: Echo
) -> None:
    """``command: rehearse``: the plan's code in a throwaway world, against the pull request's base commit (its
    ``base.sha``; the checkout needs it: ``fetch-depth: 0``); judged, and shown in the plan comment."""
    from gitops.app.rehearsal import RehearsalRequest, rehearse
    from gitops.render.rehearsal import text

    base = runner.event.get("pull_request", {}).get("base", {}).get("sha") if runner.pull_request else None
    request = RehearsalRequest(
        ticks=inputs.rehearse_ticks, ref=inputs.ref, base=base if isinstance(base, str) else None
    )
    result = rehearse(loaded, request, env, say=echo)
    report.rehearsal = result
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


def _drift(s: Any, report: Report, *, echo: Echo) -> None:
    """``command: drift``: the drift use case, as ``gitops drift`` runs it (credentials required: it downloads)."""
    from gitops.app.drift import check_drift
    from gitops.render.drift import render_text

    for server in s.servers():
        s.auth(server)  # raises AuthError: what is missing and how to provide it
    found = check_drift(s)
    report.drift = found
    echo(log_text(render_text(found).rstrip("\n")))
    report.exit_code = ExitCode.UNVERIFIED if found.unsettled else ExitCode.CHANGES if found.has_drift else ExitCode.OK


def _mask_credentials(mask: _Masks, s: Any, server: str) -> None:
    """Mask the server's credentials (also those the step's own ``env:`` supplies) and the no-rate-limit link."""
    for text, token in s.auth(server).secret_texts():
        mask.add(text, prefix=token)
    link = s.unlock_link(server)
    if link is not None:
        mask.add(link.reveal(), register=False)


#: The token-env input's default (action.yml): a manifest naming another variable needs the input set too.
_DEFAULT_TOKEN_ENV = "SCREEPS_TOKEN"  # noqa: S105 - a variable's name, not a secret
#: Where a repository's secrets are added, as GitHub's settings name it.
SECRETS_PLACE = "Settings → Secrets and variables → Actions"


def missing_secret_message(manifest: Any, missing: list[str]) -> str:
    """Which secret (or variable) to add for each server without credentials, and where; the names are the
    manifest's ``token_env``/``username_env``/``password_env``, which the workflow passes as the step's inputs."""
    wants: list[str] = []
    for name in missing:
        config = manifest.servers[name]
        if config.token_env is not None:
            wants.append(
                f"server '{name}': add the repository secret {config.token_env} and pass it to the step as "
                f"`screeps-token: ${{{{ secrets.{config.token_env} }}}}`"
                + ("" if config.token_env == _DEFAULT_TOKEN_ENV else f" with `token-env: {config.token_env}`")
            )
        elif config.password_env is not None:
            wants.append(
                f"server '{name}': add the repository secret {config.password_env} and the variable (or secret) "
                f"{config.username_env}, and pass them to the step as `password:` and `username:`"
            )
        else:
            wants.append(
                f"server '{name}': its credentials come from the entry '{config.credentials}' of the unified "
                "credentials file (.screeps.yaml), which this run does not have; use token_env with a secret instead"
            )
    return (
        "No Screeps credentials in this run, so nothing was downloaded from the game server. "
        + "; ".join(wants)
        + f". Secrets are added in the repository's {SECRETS_PLACE} (gitops help github-action)."
    )


def _no_credentials_notice(missing: list[str], pr: PullRequest | None) -> str:
    names = ", ".join(f"'{m}'" for m in missing)
    if pr is not None and pr.from_fork:
        why = (
            "This pull request comes from a fork, and GitHub gives no secrets to workflows of fork pull requests, "
            f"so there are no credentials for server {names}."
        )
    elif pr is not None:
        why = (
            f"A pull request's plan runs without the deploy token for server {names}, as it should: the pull "
            "request's code and manifest could otherwise take it or send it elsewhere."
        )
    else:
        why = f"There are no credentials for server {names} in this run (the inputs and the environment are empty)."
    return (
        f"{why} The plan was made from the ledger alone (refresh: never): no request was sent to the game server, "
        "and what it shows of the server is what this tool last learnt there, not a fresh download. "
        "The deploy after merging plans again with the credentials."
    )


#: The secrets a manifest names, by the field that names them (a user name is public in the game).
_SECRET_FIELDS = ("token_env", "password_env")


def _refuse_credentials_from_the_step_env(
    loaded: Any, servers: list[str], inputs: Inputs, env: Mapping[str, str]
) -> list[str]:
    """:class:`TrustError` when a secret the manifest names is in the step's environment but not among the inputs;
    a warning for each one that is in both (the input is used, but the environment's copy was in reach of the build).

    A composite action's steps all see the ``env:`` of the step that uses it, the build step too, where the
    repository's code runs and can read it (``/proc/<pid>/environ``). Inputs reach only the step that names them.
    """
    warnings: list[str] = []
    for name in servers:
        config = loaded.manifest.servers[name]
        for field_name in _SECRET_FIELDS:
            variable = getattr(config, field_name)
            if not variable or not env.get(variable, "").strip():
                continue
            if variable in inputs.credentials:
                warnings.append(
                    f"server '{name}': {variable} is also set in the job's or step's env:, where the build step (the "
                    "repository's code) can read it; the input's value was used. Remove it from env:."
                )
                continue
            raise TrustError(
                f"server '{name}': {variable} is set in the step's environment (env:), where every step of the "
                "action sees it, the build step with the repository's code too; it was not used",
                hint=f"Pass it as an input instead: `credentials: {variable}=${{{{ secrets.{variable} }}}}` (one "
                "NAME=value per line), or `screeps-token:`/`password:` with `token-env:`/`password-env:`, and "
                "remove it from env:.",
            )
    return warnings


def _compare_with_base(loaded: Any, pr: PullRequest, runner: Runner, report: Report, *, github_token: str) -> None:
    """Fill the report's servers and route changes: this pull request's manifest against the base commit's."""
    report.servers = {name: config.url for name, config in loaded.manifest.servers.items()}
    base = read_base_manifest(
        loaded, pr.base_sha, repository=runner.repository, api_url=runner.api_url, github_token=github_token
    )
    if base.manifest is None:
        report.routes_unknown = base.why
        return
    report.route_changes = route_changes(base.manifest, loaded.manifest)


def _refuse_changed_routes(report: Report) -> None:
    """:class:`TrustError` when a pull request planned with a credential changes where credentials go, or a build,
    or when that cannot be known: the credential would follow the pull request's manifest."""
    if report.routes_unknown:
        raise TrustError(
            "this pull request's plan holds a deploy credential, and its manifest could not be compared with the "
            f"base branch's ({report.routes_unknown}); nothing was sent",
            hint="Plan pull requests without the deploy token (the examples' plan.yml passes none), or check out "
            "with `fetch-depth: 0` so that the base commit is there.",
        )
    if report.route_changes:
        changes = "; ".join(change.text() for change in report.route_changes)
        raise TrustError(
            "this pull request changes where credentials go or what a build runs, and its plan holds a deploy "
            f"credential, so nothing was sent: {changes}",
            hint="Plan pull requests without the deploy token (the examples' plan.yml passes none); the change is "
            "deployed with the token after it is merged and reviewed.",
        )


def _plan_path(runner: Runner, inputs: Inputs) -> Path:
    digest = hashlib.sha256(str(inputs.manifest).encode("utf-8")).hexdigest()[:10]
    return runner.temp / "screeps-gitops" / f"{inputs.command}-{digest}.plan.json"


def _apply(result: Any, s: Any, report: Report, *, echo: Echo) -> None:
    """Apply the fresh plan through the one apply use case; record and echo each step and the applied line."""
    from gitops.app.applying import run_apply, still_unsettled_code
    from gitops.core.apply import Outcome

    steps_done: dict[str, int] = {}

    def progress(outcome: Outcome) -> None:
        report.outcomes.append(outcome.line())
        echo(log_text(outcome.line()))
        if outcome.status == "done":
            steps_done[outcome.branch] = steps_done.get(outcome.branch, 0) + 1

    try:
        with s.options.interrupt.installed():  # SIGINT/SIGTERM (a cancelled job) during a watch: recorded
            done = run_apply(s, result, saved=False, progress=progress)
    finally:
        # What each changed branch ended as, for its deployment record (a branch whose steps were not all done,
        # because a step failed or the apply stopped before it, is a failed deploy).
        for branch in result.branches:
            if branch.steps:
                report.deployed[(branch.server, branch.branch)] = steps_done.get(branch.label, 0) == len(branch.steps)
    report.applied = done.applied
    if done.applied_line is not None:
        report.outcomes.append(done.applied_line)
        echo(log_text(done.applied_line))
    report.verifications = list(done.verifications)
    for verification in done.verifications:
        for line in verification.lines():
            echo(log_text(line))
        if verification.result in ("unhealthy", "rolled-back", "undo-failed"):
            echo(annotation("error", f"{verification.label}: the new code fails in the game ({verification.result})"))
            # The deployment record says what the game said: a deploy whose code fails (rolled back or not) failed.
            for key in report.deployed:
                if f"{key[0]}/{key[1]}" == verification.label:
                    report.deployed[key] = False
    report.exit_code = still_unsettled_code(s, done)


# --- telling GitHub --------------------------------------------------------------------------------------------


def _tell_github(inputs: Inputs, runner: Runner, report: Report, *, echo: Echo, github_token: str) -> None:
    """Comment, summary and outputs; problems with the comment are warnings, never the reason a step fails."""
    pr = runner.pull_request
    if inputs.comment and pr is not None and inputs.command != "drift":
        _comment(inputs, runner, report, pr, echo=echo, github_token=github_token)
    if inputs.command == "drift" and inputs.drift_issue and report.drift is not None:
        _drift_issue(runner, report, echo=echo, github_token=github_token)
    if inputs.command == "apply" and pr is None and report.deployed:
        record_deployments(runner, report.deployed, echo=echo, github_token=github_token)
    _write_files(runner, report)


def _write_files(runner: Runner, report: Report) -> None:
    if runner.summary is not None:
        used = runner.summary.stat().st_size if runner.summary.exists() else 0
        text = document(report, runner, limit=SUMMARY_LIMIT_BYTES - used, unit="bytes")
        with runner.summary.open("a", encoding="utf-8") as fh:
            fh.write(text)
    if runner.output is not None:
        write_outputs(runner.output, report.outputs())


def _comment(inputs: Inputs, runner: Runner, report: Report, pr: PullRequest, *, echo: Echo, github_token: str) -> None:
    from gitops.github.api import COMMENT_LIMIT, GitHubClient, GitHubError, GitHubPermissionError, marker

    if not github_token:
        echo(
            annotation(
                "warning", "comment is true but the github-token input is empty; the plan is only in the job summary."
            )
        )
        return
    mark = marker(report.manifest)
    body = mark + "\n" + document(report, runner, limit=COMMENT_LIMIT - len(mark) - 1 - _COMMENT_MARGIN, unit="chars")
    gh: GitHubClient | None = None
    try:
        with GitHubClient(Secret(github_token), runner.repository, api_url=runner.api_url) as gh:
            comment, what = gh.upsert_comment(pr.number, mark, body)
    except GitHubPermissionError as exc:
        fork = " (a fork's pull request gets a read-only token)" if pr.from_fork else ""
        echo(annotation("warning", f"the plan comment was not posted{fork}: {exc}"))
        return
    except GitHubError as exc:
        echo(annotation("warning", f"the plan comment was not posted: {exc}"))
        return
    finally:
        for warning in gh.warnings if gh is not None else []:
            echo(annotation("warning", warning))
    report.comment_url = comment.url
    echo(f"Plan comment {what} on pull request #{pr.number}: {comment.url}")


def deployment_environment(server: str, branch: str) -> str:
    """The GitHub environment of one server's branch: ``screeps/<server>/<branch>`` (characters GitHub does not
    take in an environment's name become ``-``; at most 255 characters)."""
    return re.sub(r"[^A-Za-z0-9._/-]", "-", f"screeps/{server}/{branch}")[:255]


def record_deployments(
    runner: Runner, deployed: Mapping[tuple[str, str], bool], *, echo: Echo, github_token: str
) -> None:
    """One GitHub deployment per branch the apply changed (ref: the commit; status success or failure, the run
    as its log); after a success, the environment's earlier deployments are marked inactive. A refusal (no
    ``deployments: write``) or any other failure of the API is one warning and ends the recording: it never
    changes the deploy's result."""
    from gitops.github.api import GitHubClient, GitHubError, GitHubPermissionError

    if not github_token or not runner.sha:
        return
    gh: GitHubClient | None = None
    try:
        with GitHubClient(Secret(github_token), runner.repository, api_url=runner.api_url) as gh:
            for (server, branch), ok in deployed.items():
                environment = deployment_environment(server, branch)
                state = "success" if ok else "failure"
                deployment = gh.create_deployment(
                    runner.sha,
                    environment,
                    description=f"screeps-gitops apply of {server}/{branch}",
                    payload={"server": server, "branch": branch},
                )
                gh.create_deployment_status(
                    deployment, state, log_url=runner.run_url, description=f"screeps-gitops apply: {state}"
                )
                marked = gh.deactivate_earlier(environment, deployment) if ok else 0
                earlier = f"; {marked} earlier marked inactive" if marked else ""
                echo(f"Deployment recorded: {environment} at {runner.sha[:7]}, {state}{earlier}")
    except GitHubPermissionError as exc:
        echo(annotation("warning", f"the deployments were not recorded: {exc}"))
    except GitHubError as exc:
        echo(annotation("warning", f"the deployments were not recorded, or not all of them: {exc}"))
    finally:
        for warning in gh.warnings if gh is not None else []:
            echo(annotation("warning", warning))


#: The drift issue's title.
DRIFT_ISSUE_TITLE = "Screeps code changed outside Git"


def _drift_issue(runner: Runner, report: Report, *, echo: Echo, github_token: str) -> None:
    """Open or update the one drift issue while something drifted; close it when nothing has. Problems are
    warnings: the report stays in the job summary and the outputs."""
    from gitops.github.api import COMMENT_LIMIT, GitHubClient, GitHubError, drift_marker

    if not github_token:
        echo(annotation("warning", "drift-issue is true but the github-token input is empty; no issue was touched."))
        return
    mark = drift_marker(report.manifest)
    body = mark + "\n" + document(report, runner, limit=COMMENT_LIMIT - len(mark) - 1 - _COMMENT_MARGIN, unit="chars")
    title = DRIFT_ISSUE_TITLE + (f" ({report.manifest})" if report.manifest not in ("", "gitops.yaml") else "")
    gh: GitHubClient | None = None
    try:
        with GitHubClient(Secret(github_token), runner.repository, api_url=runner.api_url) as gh:
            if report.drift.has_drift:
                issue, what = gh.upsert_issue(mark, title, body)
                report.issue_url = issue.url
                echo(f"Drift issue {what}: #{issue.number} {issue.url}")
            else:
                closed = gh.close_issue(mark, body)
                if closed is not None:
                    report.issue_url = closed.url
                    echo(f"Drift issue closed: #{closed.number} {closed.url} (nothing has drifted)")
    except GitHubError as exc:
        echo(annotation("warning", f"the drift issue was not updated: {exc}"))
    finally:
        for warning in gh.warnings if gh is not None else []:
            echo(annotation("warning", warning))


def document(report: Report, runner: Runner, *, limit: int, unit: Literal["bytes", "chars"]) -> str:
    """The Markdown of a run: notices, the plan (table first, diffs folded), apply outcomes, error, footer,
    within ``limit`` characters or UTF-8 bytes (the plan's diffs are cut first, with a note). Redacted: a diff may
    show a server's module that holds a credential, and a comment body is not masked by GitHub as logs are."""
    return redact(_document(report, runner, limit=limit, unit=unit))


def _document(report: Report, runner: Runner, *, limit: int, unit: Literal["bytes", "chars"]) -> str:
    from gitops.render.plan import md_code, md_fence, render_markdown

    def measure(text: str) -> int:
        return len(text.encode("utf-8")) if unit == "bytes" else len(text)

    title = f"screeps-gitops {report.command}" + (
        f" ({md_code(report.manifest)})" if report.manifest not in ("", "gitops.yaml") else ""
    )
    head = "".join(f"> [!NOTE]\n> {line}\n\n" for line in report.notices) + _servers_markdown(report)
    tail: list[str] = []
    if report.outcomes:
        tail.extend(["", "#### Apply", "", md_fence("\n".join(report.outcomes), "text")])
    if report.verifications:
        lines = [line for v in report.verifications for line in v.lines()]
        tail.extend(["", f"#### Verify: {report.health()}", "", md_fence("\n".join(lines), "text")])
    if report.rehearsal is not None:
        from gitops.render.rehearsal import markdown

        r = report.rehearsal
        tail.extend(["", markdown(r.branches, r.result, r.ticks, r.head_source, r.base_source).rstrip("\n")])
    if report.error is not None:
        message = redact(str(report.error))
        if len(message) > _ERROR_CHARS:
            message = message[:_ERROR_CHARS] + "\n... (cut; the job log has all of it)"
        verdict = _verdict(report)
        tail.extend(["", f"**{verdict}** (exit code {report.exit_code}):", "", md_fence(message, "text")])
    footer = _footer(report, runner)
    tail.extend(["", footer, ""])
    rest = "\n".join(tail)
    if report.drift is not None:
        from gitops.render.drift import render_markdown as render_drift

        return head + render_drift(report.drift, title=title) + rest
    if report.plan is None:
        return f"{head}### {title}\n" + rest
    now = report.plan.created_at
    room = limit - measure(head) - measure(rest)
    text = render_markdown(report.plan, now=now, max_chars=max(room, 1000), title=title)
    for _ in range(8):  # characters are not bytes: shrink until the bytes fit too
        if measure(text) <= room or room <= 1000:
            break
        room_chars = int(len(text) * room / measure(text)) - 64
        text = render_markdown(report.plan, now=now, max_chars=max(room_chars, 1000), title=title)
    return head + text + rest


def _servers_markdown(report: Report) -> str:
    """Each server's url and what the pull request changes of the credential routes and builds: a url change is
    seen in review, where the plan's table alone would not show it."""
    from gitops.render.plan import md_code

    if not report.servers:
        return ""
    lines = ["| server | url |", "|---|---|"]
    lines += [f"| {md_code(name)} | {md_code(url)} |" for name, url in sorted(report.servers.items())]
    if report.route_changes:
        lines += ["", "> [!WARNING]", "> This pull request changes where credentials go or what a build runs:"]
        lines += [f"> - {md_code(change.text())}" for change in report.route_changes]
    elif report.routes_unknown:
        lines += ["", f"Not compared with the base branch's manifest: {md_code(report.routes_unknown)}."]
    else:
        lines += ["", "Servers, credential variables and builds: unchanged from the base branch's manifest."]
    return "\n".join(lines) + "\n\n"


def _verdict(report: Report) -> str:
    from gitops.errors import BudgetError

    if isinstance(report.error, BudgetError) and report.plan is not None:
        return "The plan does not fit the token's rate limits; a deploy now would be refused"
    if report.command == "apply":
        return "Apply failed"
    if report.command == "drift":
        return "The drift check failed"
    if report.command == "rehearse":
        return "The rehearsal failed"
    return "Planning failed"


def _footer(report: Report, runner: Runner) -> str:
    parts = ["screeps-gitops"]
    pr = runner.pull_request
    if pr is not None and pr.head_sha:
        parts.append(f"for commit {pr.head_sha[:7]}")
    elif runner.sha:
        parts.append(f"for commit {runner.sha[:7]}")
    if report.plan is not None:
        parts.append(f"refresh: {report.plan.refresh}")
    if runner.run_url:
        parts.append(f"[workflow run]({runner.run_url})")
    return "<sub>" + " · ".join(parts) + "</sub>"
