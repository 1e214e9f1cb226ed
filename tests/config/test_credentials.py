"""Credentials: environment variables, the SS3 credentials file and its search order, messages without secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitops.config.credentials import (
    CredentialsFileError,
    PasswordAuth,
    TokenAuth,
    auth_available,
    credentials_file_candidates,
    resolve_auth,
)
from gitops.config.manifest import ServerConfig
from gitops.errors import AuthError

SECRET = "tok-5e5e5e5e5e5e5e5e5e5e5e5e"
OFFICIAL = "https://screeps.com"


def server(**fields: str) -> ServerConfig:
    fields.setdefault("url", OFFICIAL)
    return ServerConfig(**fields)  # type: ignore[arg-type]  # compress is a Literal; the tests name credentials only


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    """Every place of the search order, inside tmp_path, and an environment naming them."""
    return {
        "explicit": tmp_path / "explicit.yaml",
        "cwd": tmp_path / "work" / ".screeps.yaml",
        "xdg": tmp_path / "xdg" / "screeps" / "config.yaml",
        "dotconfig": tmp_path / "home" / ".config" / "screeps" / "config.yaml",
        "appdata": tmp_path / "appdata" / "screeps" / "config.yaml",
        "home": tmp_path / "home" / ".screeps.yaml",
    }


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "APPDATA": str(tmp_path / "appdata"),
        **extra,
    }


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# --- environment variables ---------------------------------------------------------------------------------


def test_token_from_env(tmp_path: Path) -> None:
    auth = resolve_auth("official", server(token_env="SCREEPS_TOKEN"), {"SCREEPS_TOKEN": f" {SECRET}\n"}, cwd=tmp_path)
    assert isinstance(auth, TokenAuth)
    assert auth.token.reveal() == SECRET
    assert auth.source == "the environment variable SCREEPS_TOKEN"
    assert auth.fingerprint() == auth.token.fingerprint()
    assert SECRET not in repr(auth)


@pytest.mark.parametrize(("env", "state"), [({}, "not set"), ({"SCREEPS_TOKEN": "  "}, "empty")])
def test_missing_token_says_how_to_fix(tmp_path: Path, env: dict[str, str], state: str) -> None:
    with pytest.raises(AuthError) as info:
        resolve_auth("official", server(token_env="SCREEPS_TOKEN"), env, cwd=tmp_path)
    assert str(info.value) == (
        f"no credentials for server 'official': the environment variable SCREEPS_TOKEN is {state}.\n"
        "Set SCREEPS_TOKEN in the environment; in GitHub Actions pass the repository secret to the action's "
        "`screeps-token` input (`screeps-token: ${{ secrets.SCREEPS_TOKEN }}`) or its `credentials` input "
        "(`credentials: SCREEPS_TOKEN=${{ secrets.SCREEPS_TOKEN }}`), never through the step's `env:`, which every "
        "step of the action sees (refused with exit code 13). Secrets are not given to pull requests from forks: "
        "plan those with --refresh=never."
    )
    assert info.value.exit_code == 7


def test_the_hint_names_the_input_that_names_another_variable(tmp_path: Path) -> None:
    """A variable other than the input's default needs the `*-env` input too, or the Action gives the secret under
    the default name (tests/action/test_advice.py runs every such hint through the Action's own checks)."""
    with pytest.raises(AuthError) as info:
        resolve_auth("official", server(token_env="SEASON_TOKEN"), {}, cwd=tmp_path)
    assert "(`screeps-token: ${{ secrets.SEASON_TOKEN }}` with `token-env: SEASON_TOKEN`)" in str(info.value)
    config = server(url="http://127.0.0.1:21025", username_env="U", password_env="P")
    with pytest.raises(AuthError) as info:
        resolve_auth("local", config, {"U": "alice"}, cwd=tmp_path)
    assert "(`password: ${{ secrets.P }}` with `password-env: P`)" in str(info.value)


def test_username_and_password_from_env(tmp_path: Path) -> None:
    config = server(url="http://127.0.0.1:21025", username_env="U", password_env="P")
    auth = resolve_auth("local", config, {"U": "alice", "P": "pw with spaces 0001"}, cwd=tmp_path)
    assert isinstance(auth, PasswordAuth)
    assert (auth.username, auth.password.reveal(), auth.url) == (
        "alice",
        "pw with spaces 0001",
        "http://127.0.0.1:21025",
    )
    with pytest.raises(AuthError) as info:
        resolve_auth("local", config, {"U": "alice"}, cwd=tmp_path)
    assert str(info.value).startswith(
        "no credentials for server 'local': the environment variable P is not set.\nSet P in the environment"
    )


TOKEN_HINT = (
    "Copy the token again from the account settings (Account, Auth tokens) and set it without quotes, spaces or "
    "line endings (a file written on Windows ends its lines with a carriage return)."
)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("canaryCR0123456789\rabcdef0123456789", "contains a line break (carriage return or newline)"),
        ("canaryLF0123456789\nabcdef0123456789", "contains a line break (carriage return or newline)"),
        ("canaryNUL123456789\x00abcdef01234567", "contains a control character"),
        ("canaryTAB123456789\tabcdef012345678", "contains a control character"),
        ("canarySP0123456789 abcdef0123456789", "contains whitespace"),
        (
            "canaryUML0123456789\u00fcabcdef012345",
            "contains a non-ASCII character (only letters, digits and ASCII punctuation can be sent)",
        ),
        ("canarySUR0123456789\udcffabcdef012345", "contains bytes that are not valid UTF-8"),
    ],
)
def test_a_token_that_cannot_be_sent_is_refused_without_showing_it(tmp_path: Path, value: str, problem: str) -> None:
    with pytest.raises(AuthError) as info:
        resolve_auth("official", server(token_env="SCREEPS_TOKEN"), {"SCREEPS_TOKEN": value}, cwd=tmp_path)
    assert str(info.value) == (
        f"the token for server 'official' in the environment variable SCREEPS_TOKEN {problem}; it is not used.\n"
        + TOKEN_HINT
    )
    assert info.value.exit_code == 7
    for part in (value[:12], value[-12:], repr(value)[1:-1]):
        assert part not in str(info.value)
    assert not auth_available(server(token_env="SCREEPS_TOKEN"), {"SCREEPS_TOKEN": value}, cwd=tmp_path)


@pytest.mark.parametrize(
    ("user", "password", "what", "variable", "problem"),
    [
        ("alice smith", "pw-ok-0001", "user name", "U", "contains whitespace"),
        ("al\u00efce", "pw-ok-0001", "user name", "U", "contains a non-ASCII character"),
        ("alice", "pw-line\nbreak-0001", "password", "P", "contains a line break (carriage return or newline)"),
        ("alice", "pw-bell\x07-0001", "password", "P", "contains a control character"),
    ],
)
def test_a_user_name_or_password_that_cannot_be_sent_is_refused(
    tmp_path: Path, user: str, password: str, what: str, variable: str, problem: str
) -> None:
    config = server(url="http://127.0.0.1:21025", username_env="U", password_env="P")
    with pytest.raises(AuthError) as info:
        resolve_auth("local", config, {"U": user, "P": password}, cwd=tmp_path)
    assert str(info.value).startswith(f"the {what} for server 'local' in the environment variable {variable} {problem}")
    assert password not in str(info.value)
    assert repr(password)[1:-1] not in str(info.value)


def test_a_password_may_hold_any_printable_text(tmp_path: Path) -> None:
    # It travels in a JSON body, not a header: spaces, quotes and non-ASCII letters are fine.
    config = server(url="http://127.0.0.1:21025", username_env="U", password_env="P")
    password = 'p\u00e4ss w\u00f6rd "\u2603" 0001'
    auth = resolve_auth("local", config, {"U": "alice@example.com", "P": password}, cwd=tmp_path)
    assert isinstance(auth, PasswordAuth)
    assert auth.password.reveal() == password


def test_a_token_in_the_credentials_file_is_checked_too(tmp_path: Path) -> None:
    write(tmp_path / ".screeps.yaml", 'servers:\n  main: {host: screeps.com, token: "canaryfile0123\\r456789abcdef"}\n')
    with pytest.raises(AuthError) as info:
        resolve_auth("official", server(credentials="main"), env_for(tmp_path), cwd=tmp_path)
    assert str(info.value).startswith(
        f"the token for server 'official' in entry 'main' of the credentials file {tmp_path / '.screeps.yaml'} "
        "contains a line break (carriage return or newline); it is not used.\n"
    )
    assert "canaryfile0123" not in str(info.value)


def test_password_fingerprint_is_per_server_and_user() -> None:
    from gitops.secrets import Secret

    a = PasswordAuth("alice", Secret("pw-fingerprint-0001"), "http://127.0.0.1:21025/", "s")
    assert (
        a.fingerprint()
        == PasswordAuth("alice", Secret("pw-fingerprint-0002"), "http://127.0.0.1:21025", "s").fingerprint()
    )
    assert (
        a.fingerprint()
        != PasswordAuth("bob", Secret("pw-fingerprint-0001"), "http://127.0.0.1:21025", "s").fingerprint()
    )
    assert (
        a.fingerprint()
        != PasswordAuth("alice", Secret("pw-fingerprint-0001"), "http://127.0.0.1:21026", "s").fingerprint()
    )


def test_auth_available(tmp_path: Path) -> None:
    config = server(token_env="SCREEPS_TOKEN")
    assert auth_available(config, {"SCREEPS_TOKEN": SECRET}, cwd=tmp_path)
    assert not auth_available(config, {}, cwd=tmp_path)


# --- the unified credentials file --------------------------------------------------------------------------


def test_search_order(tmp_path: Path, places: dict[str, Path]) -> None:
    env = env_for(tmp_path, SCREEPS_CONFIG=str(places["explicit"]))
    cwd = places["cwd"].parent
    cwd.mkdir(parents=True)
    assert credentials_file_candidates(env, cwd=cwd) == list(places.values())
    for name, path in places.items():
        write(path, f"servers:\n  main:\n    host: screeps.com\n    token: token-from-{name}\n")
    config = server(credentials="main")
    for name, path in places.items():
        auth = resolve_auth("official", config, env, cwd=cwd)
        assert isinstance(auth, TokenAuth)
        assert auth.token.reveal() == f"token-from-{name}"
        assert auth.source == f"entry 'main' of the credentials file {path}"
        path.unlink()
        if name == "explicit":
            del env["SCREEPS_CONFIG"]
    with pytest.raises(AuthError) as info:
        resolve_auth("official", config, env, cwd=cwd)
    assert str(info.value).startswith(
        "server 'official' reads entry 'main' of the credentials file, but none was found (looked in: "
        f"{places['cwd']}, {places['xdg']}, "
    )


def test_screeps_config_naming_a_missing_file(tmp_path: Path) -> None:
    env = env_for(tmp_path, SCREEPS_CONFIG=str(tmp_path / "nope.yaml"))
    with pytest.raises(AuthError) as info:
        resolve_auth("official", server(credentials="main"), env, cwd=tmp_path)
    assert str(info.value) == (
        f"SCREEPS_CONFIG names {tmp_path / 'nope.yaml'}, which is not a file.\n"
        "Point SCREEPS_CONFIG at your .screeps.yaml, or unset it to use the usual places."
    )


def test_bad_yaml_names_file_and_line_without_the_secret(tmp_path: Path) -> None:
    path = write(tmp_path / ".screeps.yaml", f"servers:\n  main:\n    token: {SECRET}\n    host: [screeps.com\n")
    with pytest.raises(AuthError) as info:
        resolve_auth("official", server(credentials="main"), env_for(tmp_path), cwd=tmp_path)
    message = str(info.value)
    assert info.value.exit_code == 7
    assert message.startswith(
        f"the credentials file {path} is invalid (1 problem):\n  - {path}:5:1: not valid YAML: expected ',' or ']', "
        "but got '<stream end>' (while parsing a flow sequence); check the indentation"
    )
    assert SECRET not in message


def test_missing_entry_lists_the_entries(tmp_path: Path) -> None:
    path = write(
        tmp_path / ".screeps.yaml",
        f"servers:\n  ptr: {{token: {SECRET}}}\n  season: {{token: tok-season-entry-0001}}\n",
    )
    with pytest.raises(AuthError) as info:
        resolve_auth("official", server(credentials="main"), env_for(tmp_path), cwd=tmp_path)
    assert str(info.value) == (
        f"server 'official' reads entry 'main', but the credentials file {path} has no such entry (it has: ptr, "
        "season).\n"
        f"Add servers.main to {path}, or fix 'credentials' of servers.official in the manifest."
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[1, 2]", [":1: (top level): the file has no 'servers' mapping; write `servers:` with one entry per server"]),
        (
            "servers: 5\n",
            [":1: servers: the file has no 'servers' mapping; write `servers:` with one entry per server"],
        ),
        (
            "servers:\n  main: 5\n",
            [":2: servers.main: is not a mapping; write the entry as host: ..., token: ... (or username and password)"],
        ),
        (
            "servers:\n  main: {token: [a], host: screeps.com, secure: 'yes'}\n",
            [
                ":2: servers.main.token: must be a string; put the value in quotes",
                ":2: servers.main.secure: must be true or false",
            ],
        ),
        (
            "servers:\n  main: {host: screeps.com}\n",
            [
                ":2: servers.main: has neither 'token' nor both 'username' and 'password'; official servers use "
                "'token' (created in the account settings), private servers 'username' and 'password'"
            ],
        ),
        (
            "servers:\n  main:\n    token: tok-5e5e5e5e5e5e5e5e5e5e5e5e\n    token: tok-5e5e5e5e5e5e5e5e5e5e5e5e\n",
            [":4: servers.main.token: appears twice (also on line 3), and YAML keeps only the last; keep one"],
        ),
    ],
)
def test_bad_shapes_list_every_problem_with_line_and_key(tmp_path: Path, text: str, expected: list[str]) -> None:
    path = write(tmp_path / ".screeps.yaml", text)
    with pytest.raises(CredentialsFileError) as info:
        resolve_auth("official", server(credentials="main"), env_for(tmp_path), cwd=tmp_path)
    assert info.value.exit_code == 7
    assert info.value.problems == [f"{path}{line}" for line in expected]
    assert SECRET not in str(info.value)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("!!int x", "the value is not a whole number, as its tag !!int says"),
        ("!!float x", "the value is not a number, as its tag !!float says"),
        ("!!timestamp x", "the value is not a date or timestamp, as its tag !!timestamp says"),
        ("!!bool x", "the value is not true or false, as its tag !!bool says"),
        ("!!binary aGVsbG8=", "the YAML tag !!binary on a value is not supported"),
        ("!!set {a, b}", "the YAML tag !!set on a mapping is not supported"),
        ("!!python/object/apply:os.system [ls]", "the YAML tag !!python/object/apply:os.system on a list is not"),
        ("!custom x", "the YAML tag !custom on a value is not supported"),
    ],
)
def test_odd_yaml_tags_are_problems_with_line_and_key(tmp_path: Path, value: str, problem: str) -> None:
    path = write(tmp_path / ".screeps.yaml", f"servers:\n  main:\n    host: screeps.com\n    token: {value}\n")
    with pytest.raises(CredentialsFileError) as info:
        resolve_auth("official", server(credentials="main"), env_for(tmp_path), cwd=tmp_path)
    [only] = info.value.problems
    assert only.startswith(f"{path}:4: servers.main.token: {problem}")


def test_a_credentials_file_over_1_mb_is_refused_unread(tmp_path: Path) -> None:
    path = write(tmp_path / ".screeps.yaml", "servers: {}\n" + "#" * 2_000_000 + "\n")
    with pytest.raises(CredentialsFileError) as info:
        resolve_auth("official", server(credentials="main"), env_for(tmp_path), cwd=tmp_path)
    assert info.value.exit_code == 7
    assert info.value.problems == [
        f"{path}:1: the file is 2,000,013 bytes (1.9 MB), and a credentials file may have at most 1,048,576 bytes "
        "(1.0 MB); it was not read: check that this is the right file"
    ]


def test_entry_for_another_address_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path / ".screeps.yaml",
        f"servers:\n  main: {{host: evil.example, secure: false, port: 8080, token: {SECRET}}}\n",
    )
    with pytest.raises(AuthError) as info:
        resolve_auth("official", server(credentials="main"), env_for(tmp_path), cwd=tmp_path)
    assert str(info.value) == (
        f"entry 'main' of the credentials file {path} cannot be used for server 'official' (https://screeps.com) "
        "(3 problems):\n"
        f"  - {path}:2: servers.main.host: 'evil.example' is not the manifest's host 'screeps.com'\n"
        f"  - {path}:2: servers.main.secure: false does not match the manifest's scheme 'https'\n"
        f"  - {path}:2: servers.main.port: 8080 is not the manifest's port 443\n"
        "The entry's secret is not sent to another address than it was written for; fix the entry, or name the "
        "right entry in the manifest's 'credentials'."
    )
    assert SECRET not in str(info.value)


@pytest.mark.parametrize(
    ("entry", "url"),
    [
        ("{host: screeps.com, secure: true, path: /ptr, token: tok-matching-entry-0001}", "https://screeps.com/ptr"),
        ("{host: screeps.com, secure: true, ptr: true, token: tok-matching-entry-0001}", "https://screeps.com/ptr/"),
        ("{host: Screeps.com, port: 443, token: tok-matching-entry-0001}", "https://screeps.com"),
        ("{token: tok-matching-entry-0001}", "https://screeps.com/season"),
    ],
)
def test_matching_entries(tmp_path: Path, entry: str, url: str) -> None:
    write(tmp_path / ".screeps.yaml", f"servers:\n  main: {entry}\n")
    auth = resolve_auth("official", server(url=url, credentials="main"), env_for(tmp_path), cwd=tmp_path)
    assert isinstance(auth, TokenAuth)
    assert auth.token.reveal() == "tok-matching-entry-0001"


def test_ptr_entry_does_not_match_the_main_server(tmp_path: Path) -> None:
    write(
        tmp_path / ".screeps.yaml", "servers:\n  main: {host: screeps.com, ptr: true, token: tok-matching-entry-0001}\n"
    )
    with pytest.raises(AuthError, match=r"servers\.main\.ptr: '/ptr' is not the manifest's path '/'"):
        resolve_auth("official", server(credentials="main"), env_for(tmp_path), cwd=tmp_path)


def test_private_server_entry(tmp_path: Path) -> None:
    write(
        tmp_path / ".screeps.yaml",
        "servers:\n  local: {host: 127.0.0.1, port: 21025, secure: false, username: alice,\n"
        "    password: 'pw-local-entry-0001'}\n",
    )
    config = server(url="http://127.0.0.1:21025", credentials="local")
    auth = resolve_auth("local", config, env_for(tmp_path), cwd=tmp_path)
    assert isinstance(auth, PasswordAuth)
    assert (auth.username, auth.password.reveal()) == ("alice", "pw-local-entry-0001")


def test_a_broken_credentials_file_is_reported_not_taken_for_no_credentials(tmp_path: Path) -> None:
    path = write(tmp_path / ".screeps.yaml", f"servers:\n  main:\n    token: {SECRET}\n    host: [screeps.com\n")
    with pytest.raises(AuthError) as info:
        auth_available(server(credentials="main"), env_for(tmp_path), cwd=tmp_path)
    assert str(info.value).startswith(f"the credentials file {path} is invalid (1 problem):\n  - {path}:5:1: ")
    # No credentials file anywhere, by contrast, is simply "no credentials" (a fork's pull request plans without).
    path.unlink()
    assert auth_available(server(credentials="main"), env_for(tmp_path), cwd=tmp_path) is False


def test_a_credentials_file_git_would_commit_is_refused_with_the_fix(tmp_path: Path) -> None:
    from gitops.config.credentials import CredentialsFileError, resolve_auth
    from gitops.config.manifest import ServerConfig
    from tests.factories import git

    repo = tmp_path / "bot"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / ".screeps.yaml").write_text(
        "servers:\n  main:\n    host: screeps.com\n    secure: true\n    token: 0123456789abcdef0123456789abcdef\n",
        encoding="utf-8",
    )
    env = {"HOME": str(tmp_path / "home")}
    server = ServerConfig(url="https://screeps.com", credentials="main")
    with pytest.raises(CredentialsFileError) as caught:
        resolve_auth("main", server, env, cwd=repo)
    text = str(caught.value)
    assert "Git does not ignore it: 'git add -A' would commit the token in it; it was not read." in text
    assert f"echo .screeps.yaml >> {repo.resolve() / '.gitignore'}" in text
    assert "0123456789abcdef" not in text
    (repo / ".gitignore").write_text(".screeps.yaml\n", encoding="utf-8")
    auth = resolve_auth("main", server, env, cwd=repo)
    assert auth.fingerprint()
