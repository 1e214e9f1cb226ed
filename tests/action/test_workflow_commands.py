"""The runner's file and command formats, the inputs and the event, without a service."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitops.errors import UsageError
from gitops.github.inputs import INPUT_ENV, Inputs
from gitops.github.runner import Runner, annotation, mask_lines, write_outputs
from gitops.secrets import Secret, redact
from tests.action.runner import read_outputs
from tests.action.test_action import pull_request_event


def test_outputs_survive_several_lines_and_lookalike_delimiters(tmp_path: Path) -> None:
    path = tmp_path / "output"
    path.write_text("earlier=step\n", encoding="utf-8")
    values = {"plain": "2", "multi": "line one\nname<<EOF\nEOF\nx=y", "empty": ""}
    write_outputs(path, values)
    assert read_outputs(path.read_text(encoding="utf-8")) == {"earlier": "step", **values}


def test_mask_commands_are_escaped_and_one_per_line() -> None:
    assert mask_lines("abc%def") == ["::add-mask::abc%25def"]
    assert mask_lines("first\nsecond\n") == ["::add-mask::first", "::add-mask::second"]
    assert mask_lines("  \n") == []


def test_annotations_are_escaped_and_redacted() -> None:
    Secret("annotationSecret0123456789")
    line = annotation("warning", "no: annotationSecret0123456789\nsecond line, 100%")
    assert line == "::warning title=screeps-gitops::no: <hidden>%0Asecond line, 100%25"


def test_inputs_defaults() -> None:
    inputs = Inputs.from_env({})
    assert (inputs.command, str(inputs.manifest), inputs.ref, inputs.refresh) == ("plan", "gitops.yaml", None, None)
    assert (inputs.comment, inputs.max_wait, inputs.github_token, inputs.credentials) == (True, 60.0, None, {})


def test_credentials_go_under_the_names_the_manifest_reads() -> None:
    inputs = Inputs.from_env(
        {
            INPUT_ENV["token"]: "inputsToken0123456789abcdef",
            INPUT_ENV["token-env"]: "MY_TOKEN",
            INPUT_ENV["username"]: " playerone ",
            INPUT_ENV["password"]: "pass word ",
        }
    )
    assert set(inputs.credentials) == {"MY_TOKEN", "SCREEPS_USERNAME", "SCREEPS_PASSWORD"}
    token = inputs.credentials["MY_TOKEN"]
    assert isinstance(token, Secret)
    assert token.reveal() == "inputsToken0123456789abcdef"
    assert inputs.credentials["SCREEPS_USERNAME"] == "playerone"  # a user name is public: not a secret
    assert redact("playerone") == "playerone"
    password = inputs.credentials["SCREEPS_PASSWORD"]
    assert isinstance(password, Secret)
    assert password.reveal() == "pass word "
    assert "inputsToken" not in repr(inputs)


@pytest.mark.parametrize(
    ("name", "value", "accepted"),
    [
        ("command", "deploy", "plan, apply, drift, rehearse or comment"),
        ("refresh", "sometimes", "always, auto or never (or empty for the default)"),
        ("comment", "maybe", "true or false"),
        ("drift-issue", "maybe", "true or false"),
        ("max-wait", "soon", "a number of seconds"),
        ("max-wait", "-1", "a number of seconds, 0 or more"),
        ("token-env", "MY-TOKEN", "an environment variable name (letters, digits, _)"),
        ("rehearse-ticks", "lots", "a number of ticks from 1 to 10000"),
        ("rehearse-ticks", "0", "a number of ticks from 1 to 10000"),
    ],
)
def test_bad_inputs_name_the_input(name: str, value: str, accepted: str) -> None:
    with pytest.raises(UsageError) as caught:
        Inputs.from_env({INPUT_ENV[name]: value})
    assert caught.value.message == f"input '{name}' ({INPUT_ENV[name]}) is {value!r}; it must be {accepted}"


def runner_for(tmp_path: Path, event_name: str, event: object) -> Runner:
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event), encoding="utf-8")
    return Runner.from_env({"GITHUB_EVENT_NAME": event_name, "GITHUB_EVENT_PATH": str(path)})


def test_pull_request_from_the_same_repository(tmp_path: Path) -> None:
    pr = runner_for(tmp_path, "pull_request", pull_request_event(12, "a" * 40)).pull_request
    assert pr is not None
    assert (pr.number, pr.head_sha, pr.from_fork) == (12, "a" * 40, False)


def test_pull_request_from_a_fork_or_a_deleted_fork(tmp_path: Path) -> None:
    event = pull_request_event(12, "a" * 40, head_repo="bob/bot")
    pr = runner_for(tmp_path, "pull_request", event).pull_request
    assert pr is not None
    assert pr.from_fork
    event["pull_request"]["head"]["repo"] = None  # GitHub sends null once the fork is deleted
    pr = runner_for(tmp_path, "pull_request_target", event).pull_request
    assert pr is not None
    assert pr.from_fork


def test_other_events_have_no_pull_request(tmp_path: Path) -> None:
    assert runner_for(tmp_path, "push", {"ref": "refs/heads/main"}).pull_request is None
    assert runner_for(tmp_path, "pull_request", {"action": "opened"}).pull_request is None


def test_unreadable_event_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "event.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(UsageError, match=r"GITHUB_EVENT_PATH names .*event\.json, which is not a readable JSON event"):
        Runner.from_env({"GITHUB_EVENT_PATH": str(tmp_path / "event.json")})


def test_missing_secret_message_names_what_each_server_reads(tmp_path: Path) -> None:
    from gitops.config.manifest import load_manifest
    from gitops.github.trust import missing_secret_message

    (tmp_path / "gitops.yaml").write_text(
        """version: 1
servers:
  season:
    url: http://127.0.0.1:21025
    username_env: PS_USER
    password_env: PS_PASSWORD
  shard:
    url: http://127.0.0.1:21026
    credentials: main
branches:
  - {server: season, branch: main, root: src}
  - {server: shard, branch: main, root: src}
""",
        encoding="utf-8",
    )
    (tmp_path / "src").mkdir()
    manifest = load_manifest(tmp_path / "gitops.yaml").manifest
    message = missing_secret_message(manifest, ["season", "shard"])
    assert "server 'season': add the repository secret PS_PASSWORD and the variable (or secret) PS_USER" in message
    assert "server 'shard': its credentials come from the entry 'main' of the unified credentials file" in message
    assert message.endswith("Settings → Secrets and variables → Actions (gitops help github-action).")
