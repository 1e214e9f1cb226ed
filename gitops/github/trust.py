"""The Action's own words and rules of trust: secrets come from inputs only (one in the step's ``env:``, which every
step of the composite action sees, the build too, is refused), and when credentials are missing the messages here
say which secret to add and where, in GitHub's words. What every CI system refuses alike (a pull request that
changes where credentials go, planned with one) is :mod:`gitops.app.ci.trust`'s.
"""

from __future__ import annotations

from collections.abc import Mapping

from gitops.app.ci import trust
from gitops.app.ci.host import HostWords
from gitops.app.ci.report import Report
from gitops.app.session import Session
from gitops.config.manifest import LoadedManifest
from gitops.config.model import Manifest, named_variables
from gitops.errors import TrustError
from gitops.github.inputs import Inputs
from gitops.github.runner import Masks

#: The policy's messages in GitHub's words (:class:`gitops.app.ci.host.HostWords`).
WORDS = HostWords(
    change="pull request",
    fork="GitHub gives no secrets to workflows of fork pull requests",
    routes_hint="Plan pull requests without the deploy token (the examples' plan.yml passes none); the change is "
    "deployed with the token after it is merged and reviewed.",
    routes_unknown_hint="Plan pull requests without the deploy token (the examples' plan.yml passes none), or check "
    "out with `fetch-depth: 0` so that the base commit is there.",
)


def mask_credentials(mask: Masks, session: Session, server: str) -> None:
    """Mask the server's credentials (also those the step's own ``env:`` supplies) and the no-rate-limit link."""
    trust.mask_credentials(mask.add, session, server)


def refuse_changed_routes(report: Report) -> None:
    """:func:`gitops.app.ci.trust.refuse_changed_routes`, in GitHub's words."""
    trust.refuse_changed_routes(report, WORDS)


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
