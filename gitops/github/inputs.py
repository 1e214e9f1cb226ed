"""The Action's inputs: what ``action.yml`` hands the step in ``GITOPS_*`` environment variables, read and checked.

Secrets arrive as inputs, never on a command line and never in the step's ``env:`` (where every step of the
composite action, the build with the repository's code too, could read them). A bad input is a :class:`UsageError`
that names the input and what it accepts; a secret's text is never quoted. The choices and defaults shared with the
CLI come from :mod:`gitops.app.options`, so that an input and its flag cannot disagree.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gitops.app.ci.host import CiInputs, Command
from gitops.app.options import DEFAULT_MANIFEST, DEFAULT_MAX_WAIT, REFRESH_CHOICES, Refresh
from gitops.app.targets import Targets
from gitops.core.rehearsal import DEFAULT_TICKS
from gitops.errors import UsageError
from gitops.secrets import Secret

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
    "base-codeset": "GITOPS_ACTION_BASE_CODESET",
    "rehearsal-file": "GITOPS_ACTION_REHEARSAL_FILE",
}


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


_TRUE = ("true", "1", "yes", "on")


_FALSE = ("false", "0", "no", "off", "")


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
    #: ``command: rehearse`` with ``codeset``: the base's code set file (``command: build`` with ``ref``).
    base_codeset: Path | None = None
    #: ``command: comment``: the rehearsal result file that the rehearse job wrote.
    rehearsal_file: Path | None = None

    def for_the_policy(self) -> CiInputs:
        """What the CI policy (:mod:`gitops.app.ci`) takes of the inputs; the rest (the GitHub token, the drift
        issue) is the Action's own."""
        return CiInputs(
            command=self.command,
            manifest=self.manifest,
            ref=self.ref,
            refresh=self.refresh,
            comment=self.comment,
            max_wait=self.max_wait,
            credentials=self.credentials,
            targets=self.targets,
            warnings=tuple(self.warnings),
            rehearse_ticks=self.rehearse_ticks,
            base_codeset=self.base_codeset,
            rehearsal_file=self.rehearsal_file,
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Inputs:
        """Read and check the inputs; :class:`UsageError` naming the input and what it accepts."""

        def get(name: str, default: str = "") -> str:
            return env.get(INPUT_ENV[name], "").strip() or default

        command = get("command", "plan")
        if command not in ("plan", "apply", "drift", "rehearse", "comment"):
            raise _input_error("command", command, "plan, apply, drift, rehearse or comment")
        rehearsal_file = get("rehearsal-file")
        if command == "comment" and not rehearsal_file:
            raise _input_error("rehearsal-file", "", "the rehearsal result file for command comment")
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
            base_codeset=Path(get("base-codeset")) if get("base-codeset") else None,
            rehearsal_file=Path(rehearsal_file) if rehearsal_file else None,
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


__all__ = ["INPUT_ENV", "Command", "Inputs"]
