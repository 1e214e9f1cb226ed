"""The accounts file: the issue's example works as written, and every problem is reported with line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitops.secrets import redact
from gitops.standin.accounts import AccountsError, load_accounts
from tests.standin.test_auth import ISSUE_ACCOUNTS


def _load(tmp_path: Path, text: str) -> None:
    path = tmp_path / "accounts.yaml"
    path.write_text(text, encoding="utf-8")
    load_accounts(path)


def _problems(tmp_path: Path, text: str) -> str:
    with pytest.raises(AccountsError) as caught:
        _load(tmp_path, text)
    assert caught.value.exit_code == 4
    return str(caught.value)


def test_the_issue_example_loads(tmp_path: Path) -> None:
    path = tmp_path / "accounts.yaml"
    path.write_text(ISSUE_ACCOUNTS, encoding="utf-8")
    accounts = load_accounts(path)
    [alice] = accounts.users
    assert alice.username == "alice"
    assert accounts.login("ALICE@example.com", "s3cret") is alice
    assert accounts.login("alice", "s3cret") is alice
    assert accounts.login("alice", "nope") is None
    full = accounts.token("0123456789abcdef0123456789abcdef")
    scoped = accounts.token("fedcba9876543210fedcba9876543210")
    assert full is not None
    assert full.full
    assert scoped is not None
    assert not scoped.full
    assert scoped.endpoints == {"GET /api/user/code", "POST /api/user/code"}
    assert scoped.websockets == ("console",)
    assert scoped.memory_segments == {0, 1}
    # Loading registers the secrets, so that any text the tool prints can be scrubbed of them. (The password here
    # has 6 characters: too short to scrub from text, see gitops.secrets; it is never put in a message either.)
    assert "fedcba98" not in redact("token fedcba9876543210fedcba9876543210")
    assert "0123456789abcdef" not in repr(full)


def test_minimal_user_and_endpoint_spelling(tmp_path: Path) -> None:
    path = tmp_path / "accounts.yaml"
    path.write_text(
        "users:\n  - username: bob\n    tokens:\n      - value: bobtoken1234\n"
        "        endpoints: ['get /api/user/code/', 'GET  /api/user/branches']\n",
        encoding="utf-8",
    )
    [bob] = load_accounts(path).users
    assert bob.email is None
    assert bob.password is None
    assert bob.tokens[0].endpoints == {"GET /api/user/code", "GET /api/user/branches"}


def test_every_problem_is_listed_with_its_line(tmp_path: Path) -> None:
    text = """\
users:
  - username: alice
    email: not-an-email
    password: 1234
    colour: blue
    tokens:
      - value: short
        full: yes please
      - value: 0123456789abcdef
        endpoints: ["GET /api/user/cod", "/api/user/code"]
        memory_segments: [0, 100, true]
        websockets: console
      - value: 0123456789abcdef
        full: true
      - value: fedcba9876543210
        full: true
        endpoints: ["GET /api/user/code"]
  - username: Alice
  - username: "with space"
"""
    path = tmp_path / "accounts.yaml"
    message = _problems(tmp_path, text)
    for expected in (
        f"{path}:3: users[0].email: expected an e-mail address",
        f"{path}:4: users[0].password: expected a non-empty string (quote it if it looks like a number)",
        f"{path}:5: users[0].colour: unknown key; a user has username, email, password, tokens",
        f"{path}:7: users[0].tokens[0].value: required: a string of 8 or more printable characters",
        f"{path}:8: users[0].tokens[0].full: expected true or false",
        f"{path}:10: users[0].tokens[1].endpoints[0]: unknown endpoint 'GET /api/user/cod'; known: ",
        f"{path}:10: users[0].tokens[1].endpoints[1]: unknown endpoint '/api/user/code'",
        f"{path}:11: users[0].tokens[1].memory_segments[1]: expected a segment number from 0 to 99",
        f"{path}:11: users[0].tokens[1].memory_segments[2]: expected a segment number from 0 to 99",
        f"{path}:12: users[0].tokens[1].websockets: expected a list of event names",
        f"{path}:13: users[0].tokens[2].value: this token value is used twice",
        f"{path}:15: users[0].tokens[3]: a token with 'full: true' has every scope",
        f"{path}:18: users[1].username: the username 'Alice' is used twice",
        f"{path}:19: users[2].username: required: 1 to 50 letters, digits, '_' or '-'",
    ):
        assert expected in message, (expected, message)
    assert message.startswith(f"the accounts file {path} is invalid (14 problems):\n")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ":1: (top level): expected a mapping with the key 'users'"),
        ("users: []\n", ":1: users: expected a non-empty list of users"),
        ("users: [1]\n", ":1: users[0]: expected a mapping"),
        ("people: []\n", ":1: people: unknown key; the file has only 'users'"),
        (
            "users:\n  - username: a\n    username: b\n",
            ":3: users[0].username: appears twice (also on line 2), and YAML keeps only the last; keep one",
        ),
        ("users:\n  - username: a\n    tokens: {value: x}\n", ":3: users[0].tokens: expected a list of tokens"),
        ("users: [\n", ":2:1: not valid YAML: expected the node content, but found '<stream end>'"),
        ("users:\n  - username: a\n    tokens: [{value: '12345678', nope: 1}]\n", "unknown key; a token has value"),
        ("users:\n  - username: !!int x\n", ":2: users[0].username: the value is not a whole number, as its tag !!int"),
        ("users:\n  - username: a\n    password: !!binary aGVsbG8=\n", ":3: users[0].password: the YAML tag !!binary"),
        ("users: !!set {a}\n", ":1: users: the YAML tag !!set on a mapping is not supported"),
        ("users:\n  - username: a\n    tokens: [{value: !!python/name:os.system }]\n", "!!python/name:os.system"),
    ],
)
def test_structural_problems(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in _problems(tmp_path, text)
    if expected.startswith(":"):
        assert f"\n  - {tmp_path / 'accounts.yaml'}{expected}" in _problems(tmp_path, text)


def test_an_accounts_file_over_1_mb_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "accounts.yaml"
    assert _problems(tmp_path, "users: []\n" + "#" * 1_048_576 + "\n") == (
        f"the accounts file {path} is invalid (1 problem):\n"
        f"  - {path}:1: the file is 1,048,587 bytes (1.0 MB), and an accounts file may have at most 1,048,576 bytes "
        "(1.0 MB); it was not read: check that this is the right file\n"
        "See 'gitops serve --help' and 'gitops help serve' for the format."
    )


def test_a_missing_file_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(AccountsError) as caught:
        load_accounts(tmp_path / "missing.yaml")
    assert "cannot read the accounts file" in str(caught.value)
    assert "--demo" in str(caught.value)


def test_a_mapping_is_checked_the_same_way() -> None:
    with pytest.raises(AccountsError) as caught:
        load_accounts({"users": [{"username": "a", "tokens": [{"value": "12345678", "endpoints": "all"}]}]})
    assert "users[0].tokens[0].endpoints: expected a list" in str(caught.value)
    assert str(caught.value).startswith("the accounts mapping is invalid (1 problem):\n  - users[0].tokens[0]")


def test_yaml_anchors_and_aliases_are_refused_before_anything_is_expanded(tmp_path: Path) -> None:
    # An alias to itself made reading the file recurse without end; nested ones grow exponentially.
    path = tmp_path / "accounts.yaml"
    assert _problems(tmp_path, "users: &a\n  - username: alice\n    tokens: *a\n") == (
        f"the accounts file {path} is invalid (2 problems):\n"
        f"  - {path}:1:8: YAML anchors are not supported in {path}; remove '&a' and write the value out where it is "
        "needed\n"
        f"  - {path}:3:13: YAML aliases are not supported in {path}; write the value out\n"
        "See 'gitops serve --help' and 'gitops help serve' for the format."
    )
