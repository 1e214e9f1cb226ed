"""What a run of the Action may be given: which credentials, from where, and whether a pull request may use them.

A pull request's code and manifest are not yet reviewed: planned with a deploy credential, a changed server url or
build could take the credential elsewhere, so such a plan is refused. Secrets come from inputs only; one in the
step's ``env:`` (which every step of the composite action sees, the build too) is refused. When credentials are
missing, the messages here say which secret to add and where.
"""

from __future__ import annotations

from collections.abc import Mapping

from gitops.app.session import Session
from gitops.config.manifest import LoadedManifest
from gitops.config.model import Manifest, named_variables
from gitops.config.routes import route_changes
from gitops.errors import TrustError
from gitops.github.basemanifest import read_base_manifest
from gitops.github.inputs import Inputs
from gitops.github.report import Report
from gitops.github.runner import Masks, PullRequest, Runner


def mask_credentials(mask: Masks, session: Session, server: str) -> None:
    """Mask the server's credentials (also those the step's own ``env:`` supplies) and the no-rate-limit link."""
    for text, token in session.auth(server).secret_texts():
        mask.add(text, prefix=token)
    link = session.unlock_link(server)
    if link is not None:
        mask.add(link.reveal(), register=False)


#: The token-env input's default (action.yml): a manifest naming another variable needs the input set too.
_DEFAULT_TOKEN_ENV = "SCREEPS_TOKEN"  # noqa: S105 - a variable's name, not a secret
#: The password-env and username-env inputs' defaults (action.yml).
_DEFAULT_PASSWORD_ENV = "SCREEPS_PASSWORD"  # noqa: S105 - a variable's name, not a secret
_DEFAULT_USERNAME_ENV = "SCREEPS_USERNAME"


#: Where a repository's secrets are added, as GitHub's settings name it.
SECRETS_PLACE = "Settings → Secrets and variables → Actions"


def missing_secret_message(manifest: Manifest, missing: list[str]) -> str:
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
            user, password = config.username_env, config.password_env
            # Each input with its value, and the input that names a variable other than its default: the advice,
            # followed as written, gives the tool the variables the manifest reads (tests/action/test_advice.py).
            wants.append(
                f"server '{name}': add the repository secret {password} and the variable (or secret) {user}, and "
                f"pass them to the step as `password: ${{{{ secrets.{password} }}}}` and `username: "
                f"${{{{ vars.{user} }}}}`"
                + ("" if password == _DEFAULT_PASSWORD_ENV else f" with `password-env: {password}`")
                + ("" if user == _DEFAULT_USERNAME_ENV else f" and `username-env: {user}`")
            )
        elif config.credentials is not None:
            wants.append(
                f"server '{name}': its credentials come from the entry '{config.credentials}' of the unified "
                "credentials file (.screeps.yaml), which this run does not have; use token_env with a secret instead"
            )
        else:  # another login kind: the secrets its fields name (the model marks them), passed as credentials
            wants.append(
                f"server '{name}': add the repository secret(s) "
                + ", ".join(named_variables(config, secret=True))
                + " and pass each to the step in `credentials:` (NAME=${{ secrets.NAME }}, one per line)"
            )
    return (
        "No Screeps credentials in this run, so nothing was downloaded from the game server. "
        + "; ".join(wants)
        + f". Secrets are added in the repository's {SECRETS_PLACE} (gitops help github-action)."
    )


def no_credentials_notice(missing: list[str], pr: PullRequest | None) -> str:
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


def refuse_credentials_from_the_step_env(
    loaded: LoadedManifest, servers: list[str], inputs: Inputs, env: Mapping[str, str]
) -> list[str]:
    """:class:`TrustError` when a secret the manifest names is in the step's environment but not among the inputs;
    a warning for each one that is in both (the input is used, but the environment's copy was in reach of the build).

    A composite action's steps all see the ``env:`` of the step that uses it, the build step too, where the
    repository's code runs and can read it (``/proc/<pid>/environ``). Inputs reach only the step that names them.
    """
    warnings: list[str] = []
    for name in servers:
        # The secrets the server names, in the fields the model marks as holding one (a user name is public).
        for variable in named_variables(loaded.manifest.servers[name], secret=True):
            if not env.get(variable, "").strip():
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


def compare_with_base(
    loaded: LoadedManifest, pr: PullRequest, runner: Runner, report: Report, *, github_token: str
) -> None:
    """Fill the report's servers and route changes: this pull request's manifest against the base commit's."""
    report.servers = {name: config.url for name, config in loaded.manifest.servers.items()}
    base = read_base_manifest(
        loaded, pr.base_sha, repository=runner.repository, api_url=runner.api_url, github_token=github_token
    )
    if base.manifest is None:
        report.routes_unknown = base.why
        return
    report.route_changes = route_changes(base.manifest, loaded.manifest)


def refuse_changed_routes(report: Report) -> None:
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
