"""One list of what is secret (issue 45, point 5): a login kind is its fields, marked once in the manifest's model
(:func:`gitops.config.model.credential`), and its credentials class in :data:`gitops.config.credentials.LOGIN_KINDS`.

The build's environment scrub, the redaction of the run's secrets, the Action's trust checks (the step's ``env:``, a
pull request's route changes) and its masks derive from those two. A pretend login kind, made here and in no module
of the tool (a server field ``key_env`` naming an API key, and its credentials class), is covered by every one of
them without an edit anywhere else.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pytest

from gitops.app.options import Options
from gitops.app.session import Session
from gitops.config import credentials
from gitops.config.credentials import Auth
from gitops.config.manifest import LoadedManifest
from gitops.config.model import BranchConfig, Manifest, ServerConfig, credential, route_fields
from gitops.config.routes import ROUTE_FIELDS, RouteChange, route_changes
from gitops.edges.build import build_environment, register_secrets, run_build
from gitops.errors import AuthError, TrustError
from gitops.github.inputs import Inputs
from gitops.github.report import Report
from gitops.github.runner import Masks
from gitops.github.trust import (
    mask_credentials,
    missing_secret_message,
    refuse_changed_routes,
    refuse_credentials_from_the_step_env,
)
from gitops.secrets import Secret, redact

#: The pretend kind's API key: a value no other test uses, so that finding it anywhere is this test's leak.
KEY = "pretend-api-key-5f0c1e9a7b3d2468ace0"


@dataclass(frozen=True, slots=True)
class KeyServer(ServerConfig):
    """A server of the pretend login kind: the manifest's model, extended by one marked field."""

    key_env: str | None = field(
        default=None,
        metadata=credential("Name of the environment variable that holds the API key.", variable=True, secret=True),
    )


class KeyAuth:
    """The pretend kind's credentials: an API key read from the variable ``key_env`` names (a plain class: a kind
    needs only to say what :class:`gitops.config.credentials.Auth` asks)."""

    kind: ClassVar[str] = "key"
    rate_limited: ClassVar[bool] = False
    signs_in: ClassVar[bool] = False

    def __init__(self, key: Secret, source: str) -> None:
        self.key, self.source = key, source

    @staticmethod
    def named_by(server: ServerConfig) -> bool:
        return getattr(server, "key_env", None) is not None

    @staticmethod
    def from_env(server_name: str, server: ServerConfig, env: Mapping[str, str]) -> Auth:
        variable = str(getattr(server, "key_env", ""))
        if not env.get(variable):
            raise AuthError(f"no credentials for server '{server_name}': {variable} is not set.")
        return KeyAuth(Secret(env[variable]), f"the environment variable {variable}")

    def fingerprint(self) -> str:
        return self.key.fingerprint()

    @property
    def persistent_token(self) -> Secret | None:
        return None

    def secret_texts(self) -> tuple[tuple[str, bool], ...]:
        return ((self.key.reveal(), False),)


@pytest.fixture
def key_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pretend kind among the login kinds (the model's part is :class:`KeyServer`)."""
    monkeypatch.setattr(credentials, "LOGIN_KINDS", (*credentials.LOGIN_KINDS, KeyAuth))


def keyed(tmp_path: Path, key_env: str = "PRETEND_KEY") -> LoadedManifest:
    server = KeyServer(url="http://127.0.0.1:9", key_env=key_env)
    manifest = Manifest(version=1, servers={"keyed": server}, branches=[BranchConfig(server="keyed", branch="main")])
    return LoadedManifest(manifest, tmp_path / "gitops.yaml", tmp_path, digest="")


def test_the_model_marks_the_credential_fields_once_and_the_routes_are_those() -> None:
    assert ROUTE_FIELDS == ("url", "token_env", "username_env", "password_env", "credentials")
    assert route_fields(KeyServer) == (*ROUTE_FIELDS, "key_env")


def test_the_pretend_kind_s_key_is_kept_from_the_build_and_redacted(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    env = {**os.environ, "PRETEND_KEY": KEY}
    secret = register_secrets(keyed(tmp_path), env)
    assert "PRETEND_KEY" in secret
    build_env = build_environment(env, secret)
    assert "PRETEND_KEY" not in build_env
    # A real build, which looks for the key and prints what it finds; and prints the key itself, as a build that got
    # it some other way would: the registered value is redacted from its output.
    (tmp_path / "found.txt").write_text(KEY, "ascii")
    run_build('echo "seen=${PRETEND_KEY:-none}"; echo "echoed=$(cat found.txt)"', tmp_path, env=build_env)
    err = capfd.readouterr().err
    assert "seen=none" in err
    assert "echoed=" in err
    assert KEY not in err
    assert KEY not in redact(f"a message quoting {KEY}")


def test_a_pull_request_that_changes_the_pretend_kind_s_field_is_refused(tmp_path: Path) -> None:
    base, head = keyed(tmp_path), keyed(tmp_path, key_env="ATTACKER_KEY")
    changes = route_changes(base.manifest, head.manifest)
    assert changes == [RouteChange("server 'keyed' key_env", "PRETEND_KEY", "ATTACKER_KEY")]
    report = Report(command="plan", manifest="gitops.yaml", route_changes=changes)
    with pytest.raises(TrustError) as refused:
        refuse_changed_routes(report)
    assert "server 'keyed' key_env: 'PRETEND_KEY' → 'ATTACKER_KEY'" in refused.value.message


def test_the_pretend_kind_s_key_in_the_step_env_is_refused(tmp_path: Path) -> None:
    inputs = Inputs(
        command="plan",
        manifest=Path("gitops.yaml"),
        ref=None,
        refresh=None,
        comment=False,
        max_wait=0,
        drift_issue=False,
        github_token=None,
    )
    with pytest.raises(TrustError) as refused:
        refuse_credentials_from_the_step_env(keyed(tmp_path), ["keyed"], inputs, {"PRETEND_KEY": KEY})
    assert "server 'keyed': PRETEND_KEY is set in the step's environment (env:)" in refused.value.message
    assert KEY not in refused.value.message


@pytest.mark.usefixtures("key_kind")
def test_the_pretend_kind_s_credentials_are_read_and_masked(tmp_path: Path) -> None:
    options = Options(manifest=tmp_path / "gitops.yaml", env={"PRETEND_KEY": KEY}, state_dir=tmp_path / "state")
    session = Session(keyed(tmp_path), options)
    lines: list[str] = []
    try:
        assert session.has_credentials("keyed")
        assert isinstance(session.login("keyed"), KeyAuth)
        # What the session asks of the credentials is what the kind says of itself: no budget, no token query.
        assert not session.budget_facts("keyed").limited
        assert session.scope("keyed") is None
        mask_credentials(Masks(lines.append), session, "keyed")
    finally:
        session.close()
    assert f"::add-mask::{KEY}" in lines
    assert KEY not in redact(f"an answer echoing {KEY}")


def test_a_run_without_the_pretend_kind_s_key_says_which_secret_to_add(tmp_path: Path) -> None:
    message = missing_secret_message(keyed(tmp_path).manifest, ["keyed"])
    assert "server 'keyed': add the repository secret(s) PRETEND_KEY and pass each to the step in `credentials:`" in (
        message
    )
    assert "unified credentials file" not in message
