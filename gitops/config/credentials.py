"""Credentials for a server: where they come from, and the two kinds the client can use.

A manifest only ever *names* credentials (``token_env``, ``username_env``/``password_env``, ``credentials``); this
module turns those names into an :class:`Auth` from an environment mapping or from the screepers unified
credentials file (SS3, ``.screeps.yaml``). Values are wrapped in :class:`~gitops.secrets.Secret` the moment they
are read, so no message, log line or ``repr`` can show them.

A server names exactly one way (the manifest checks it; see ``docs/credentials.md``):

* ``token_env``: a persistent token (official servers);
* ``username_env`` and ``password_env``: a user name (or e-mail) and password (private servers, screepsmod-auth);
* ``credentials: NAME``: entry ``NAME`` of the first credentials file found in the SS3 search order.
"""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol
from urllib.parse import urlsplit

from gitops.config.logins import LoginKind, account_fingerprint, value_problem
from gitops.config.manifest import ServerConfig
from gitops.config.reading import MAX_FILE_BYTES, Loc, Unreadable, counted
from gitops.config.yamlload import Problems, read_yaml  # loaded already: every manifest load parses YAML first
from gitops.errors import AuthError, ProblemsError
from gitops.secrets import Secret

__all__ = [
    "LOGIN_KINDS",
    "MAX_CREDENTIALS_BYTES",
    "Auth",
    "CredentialsFileError",
    "PasswordAuth",
    "TokenAuth",
    "auth_available",
    "credentials_file_candidates",
    "find_credentials_file",
    "resolve_auth",
]


class Auth(Protocol):
    """What every login kind's credentials say; the session, the Action's masks and the client ask only this.

    A login kind is one class here, in :data:`LOGIN_KINDS` (which of a server's fields name it, and how its
    credentials are read from them), the fields it reads in the manifest's model (marked there as credential fields:
    :func:`gitops.config.model.credential`), and its sign-in in :func:`gitops.edges.service.auth.login_for`.
    """

    @property
    def source(self) -> str:
        """Where the credentials were read (for messages)."""
        ...

    @property
    def kind(self) -> str:
        """Which kind of login this is."""
        ...

    @property
    def rate_limited(self) -> bool:
        """Its requests count against the server's rate limits, and it has a scope and a token query (an official
        server's persistent token); otherwise it spends no budget (a private server's sign-in)."""
        ...

    @property
    def signs_in(self) -> bool:
        """It signs in to a private server (screepsmod-auth), whose body parser inflates compressed uploads."""
        ...

    def fingerprint(self) -> str:
        """A non-reversible name of the account, used as the ledger key."""
        ...

    @property
    def persistent_token(self) -> Secret | None:
        """The persistent token (``None`` for a login that has none)."""
        ...

    def secret_texts(self) -> tuple[tuple[str, bool], ...]:
        """Each text that would reveal the credentials, with whether it is a Screeps token (whose first characters
        the official server echoes, so that they are hidden too)."""
        ...


class LoginKindReader(Protocol):
    """How a login kind is read from a server's fields (the class of its credentials)."""

    @staticmethod
    def named_by(server: ServerConfig) -> bool:
        """Whether ``server`` names this kind of login."""
        ...

    @staticmethod
    def from_env(server_name: str, server: ServerConfig, env: Mapping[str, str]) -> Auth:
        """The credentials from ``env``; :class:`AuthError` naming what is missing, never a value."""
        ...


@dataclass(frozen=True, slots=True)
class TokenAuth:
    """A persistent token, sent as ``X-Token``. ``source`` says where it was read (for messages)."""

    token: Secret
    source: str
    #: Which kind of login this is (:func:`gitops.edges.service.auth.login_for` signs it in); the rest of the tool
    #: asks what it is (rate limited, a sign-in), never its kind.
    kind: ClassVar[LoginKind] = "token"
    rate_limited: ClassVar[bool] = True
    signs_in: ClassVar[bool] = False

    @staticmethod
    def named_by(server: ServerConfig) -> bool:
        return bool(server.token_env)

    @staticmethod
    def from_env(server_name: str, server: ServerConfig, env: Mapping[str, str]) -> Auth:
        assert server.token_env is not None
        value = env.get(server.token_env, "").strip()
        if value:
            where = f"the environment variable {server.token_env}"
            _check(server_name, where, "token", value)
            return TokenAuth(Secret(value), where)
        raise AuthError(
            f"no credentials for server '{server_name}': the environment variable {server.token_env} is "
            f"{_state(server.token_env, env)}.",
            hint=_ci_hint((server.token_env, "token")),
        )

    def fingerprint(self) -> str:
        """A non-reversible name of the token, used as the ledger key (never the token itself)."""
        return self.token.fingerprint()

    @property
    def persistent_token(self) -> Secret | None:
        """The persistent token (``None`` for a login that has none)."""
        return self.token

    def secret_texts(self) -> tuple[tuple[str, bool], ...]:
        """Each text that would reveal the credentials, with whether it is a Screeps token (whose first characters
        the official server echoes, so that they are hidden too)."""
        return ((self.token.reveal(), True),)


@dataclass(frozen=True, slots=True)
class PasswordAuth:
    """A user name (or e-mail) and password for a private server's ``/api/auth/signin`` (screepsmod-auth).

    The user name is not treated as a secret (it is shown to other players in the game); the password is.
    ``url`` is the server's base URL, part of the fingerprint because a user name means nothing across servers.
    """

    username: str
    password: Secret
    url: str
    source: str
    #: Which kind of login this is (:func:`gitops.edges.service.auth.login_for` signs it in); the rest of the tool
    #: asks what it is (rate limited, a sign-in), never its kind.
    kind: ClassVar[LoginKind] = "password"
    rate_limited: ClassVar[bool] = False
    signs_in: ClassVar[bool] = True

    @staticmethod
    def named_by(server: ServerConfig) -> bool:
        return bool(server.username_env and server.password_env)

    @staticmethod
    def from_env(server_name: str, server: ServerConfig, env: Mapping[str, str]) -> Auth:
        assert server.username_env is not None
        assert server.password_env is not None
        user, password = env.get(server.username_env, "").strip(), env.get(server.password_env, "")
        if user and password:
            _check(server_name, f"the environment variable {server.username_env}", "user name", user)
            _check(server_name, f"the environment variable {server.password_env}", "password", password)
            return PasswordAuth(
                user,
                Secret(password),
                server.url,
                f"the environment variables {server.username_env} and {server.password_env}",
            )
        missing = [var for var, value in ((server.username_env, user), (server.password_env, password)) if not value]
        raise AuthError(
            f"no credentials for server '{server_name}': "
            + " and ".join(f"the environment variable {var} is {_state(var, env)}" for var in missing)
            + ".",
            hint=_ci_hint(*((var, "username" if var == server.username_env else "password") for var in missing)),
        )

    def fingerprint(self) -> str:
        """A hash of server URL and user name: one ledger per account, the same across password changes."""
        return account_fingerprint(self.url, self.username)

    @property
    def persistent_token(self) -> Secret | None:
        """``None``: a password login has no persistent token (its session token is the client's)."""
        return None

    def secret_texts(self) -> tuple[tuple[str, bool], ...]:
        """Each text that would reveal the credentials: the password, and the HTTP Basic form of the login."""
        basic = base64.b64encode(f"{self.username}:{self.password.reveal()}".encode()).decode("ascii")
        return ((self.password.reveal(), False), (basic, False))


#: The login kinds a server's environment variables can name, in the order they are tried; the one place that
#: asks which kind a server names (a credentials file entry holds a token or a login: :func:`_entry_auth`).
LOGIN_KINDS: tuple[LoginKindReader, ...] = (TokenAuth, PasswordAuth)


#: The largest credentials file read (one holds a few entries); a larger one is refused before it is parsed.
MAX_CREDENTIALS_BYTES = MAX_FILE_BYTES

_ENTRY_TEXT_KEYS = ("token", "username", "password", "host", "path")
_FILE_HINT = (
    "The file's format is the screepers SS3 standard (servers: NAME: host, token, ...); see gitops help credentials."
)


class CredentialsFileError(ProblemsError, AuthError):
    """The unified credentials file is unreadable, not YAML, or not shaped as SS3 describes (exit code 7).

    ``problems`` lists every problem found, each as ``file:line: key: problem``; no value of the file is quoted.
    """


#: The Action's inputs that carry each kind of credential, the input that names its variable, and that input's
#: default (action.yml): the advice below names what the Action accepts, never the step's ``env:`` (refused there
#: with exit code 13, ``gitops.github.trust``) nor the ``token`` input (``screeps-token``'s deprecated old name).
_ACTION_INPUTS = {
    "token": ("screeps-token", "token-env", "SCREEPS_TOKEN"),
    "username": ("username", "username-env", "SCREEPS_USERNAME"),
    "password": ("password", "password-env", "SCREEPS_PASSWORD"),
}


def _ci_hint(*missing: tuple[str, Literal["token", "username", "password"]]) -> str:
    """How to provide the ``missing`` variables (each with its kind), locally and in the Action; every one of them,
    so that the advice followed as written is enough (tests/action/test_advice.py follows it)."""
    names = [var for var, _ in missing]
    inputs = [_ACTION_INPUTS[kind] for _, kind in missing]
    given = ", ".join(
        f"`{value_input}: ${{{{ secrets.{var} }}}}`" for var, (value_input, _, _) in zip(names, inputs, strict=True)
    )
    named = [
        f"`{name_input}: {var}`" for var, (_, name_input, default) in zip(names, inputs, strict=True) if var != default
    ]
    given += f" with {', '.join(named)}" if named else ""
    if len(missing) == 1:
        where = f"secret to the action's `{inputs[0][0]}` input ({given}) or its `credentials` input (`credentials: "
        where += f"{names[0]}=${{{{ secrets.{names[0]} }}}}`)"
    else:
        lines = ", ".join(f"`{var}=${{{{ secrets.{var} }}}}`" for var in names)
        where = f"secrets to the action's {' and '.join(f'`{i[0]}`' for i in inputs)} inputs ({given}) or its "
        where += f"`credentials` input, one line each ({lines})"
    return (
        f"Set {' and '.join(names)} in the environment; in GitHub Actions pass the repository {where}, never "
        "through the step's `env:`, which every step of the action sees (refused with exit code 13). Secrets are "
        "not given to pull requests from forks: plan those with --refresh=never."
    )


def resolve_auth(server_name: str, server: ServerConfig, env: Mapping[str, str], *, cwd: Path) -> Auth:
    """The credentials for ``server``, read from ``env`` or the unified credentials file.

    The manifest names exactly one way (it checks that); ``cwd`` is where ``./.screeps.yaml`` is looked for.
    Raises :class:`~gitops.errors.AuthError` naming the server, what was looked for and how to provide it. Never
    puts a secret value in a message.
    """
    for kind in LOGIN_KINDS:
        if kind.named_by(server):
            return kind.from_env(server_name, server, env)
    if server.credentials:
        return _from_file(server_name, server.url, server.credentials, env, cwd=cwd)
    raise AuthError(
        f"server '{server_name}' names no credentials.",
        hint=f"Add token_env (official servers), username_env and password_env (private servers), or "
        f"credentials (an entry of .screeps.yaml) to servers.{server_name} in the manifest.",
    )


def _check(server_name: str, where: str, what: Literal["token", "user name", "password"], value: str) -> None:
    """Refuse a value that cannot travel as the server needs it, naming where it is and what is wrong, never it.

    Tokens and user names go in HTTP headers (``X-Token``, ``X-Username``): printable ASCII without whitespace,
    or httpx refuses the header with an error that quotes it. A password travels in a JSON body, so any printable
    text will do (spaces and non-ASCII letters too), but a control character is a copy-and-paste accident.
    """
    problem = value_problem(value, header=what != "password")
    if problem is None:
        return
    if what == "token":
        hint = (
            "Copy the token again from the account settings (Account, Auth tokens) and set it without quotes, spaces "
            "or line endings (a file written on Windows ends its lines with a carriage return)."
        )
    else:
        hint = f"Set the {what} again without line endings or other control characters."
    raise AuthError(f"the {what} for server '{server_name}' in {where} {problem}; it is not used.", hint=hint)


def _state(var: str, env: Mapping[str, str]) -> str:
    return "empty" if var in env else "not set"


def auth_available(server: ServerConfig, env: Mapping[str, str], *, cwd: Path | None = None) -> bool:
    """Whether :func:`resolve_auth` would find credentials (for planning without them: forks, --refresh=never)."""
    try:
        resolve_auth("?", server, env, cwd=cwd or Path.cwd())
    except CredentialsFileError:
        raise  # a broken credentials file is reported, not taken for "no credentials"
    except AuthError:
        return False
    return True


# --- the unified credentials file (SS3) ----------------------------------------------------------------------


def credentials_file_candidates(env: Mapping[str, str], *, cwd: Path) -> list[Path]:
    """Where the unified credentials file is looked for, in the SS3 order (``$SCREEPS_CONFIG`` first)."""
    home = Path(env["HOME"]) if env.get("HOME") else Path(env.get("USERPROFILE") or Path.home())
    out: list[Path] = []
    if env.get("SCREEPS_CONFIG"):
        out.append(Path(env["SCREEPS_CONFIG"]).expanduser())
    out.append(cwd / ".screeps.yaml")
    if env.get("XDG_CONFIG_HOME"):
        out.append(Path(env["XDG_CONFIG_HOME"]) / "screeps" / "config.yaml")
    out.append(home / ".config" / "screeps" / "config.yaml")
    if env.get("APPDATA"):
        out.append(Path(env["APPDATA"]) / "screeps" / "config.yaml")
    out.append(home / ".screeps.yaml")
    return out


def find_credentials_file(env: Mapping[str, str], *, cwd: Path) -> Path | None:
    """The first credentials file that exists, or ``None``.

    ``$SCREEPS_CONFIG`` naming a file that does not exist is an error rather than a silent fall-through: the
    user asked for that file.
    """
    if env.get("SCREEPS_CONFIG"):
        named = Path(env["SCREEPS_CONFIG"]).expanduser()
        if not named.is_file():
            raise CredentialsFileError(
                f"SCREEPS_CONFIG names {named}, which is not a file.",
                hint="Point SCREEPS_CONFIG at your .screeps.yaml, or unset it to use the usual places.",
            )
        return named
    for candidate in credentials_file_candidates(env, cwd=cwd):
        if candidate.is_file():
            return candidate
    return None


def _exposed_to_git(path: Path) -> str | None:
    """The top of the Git work tree that holds ``path`` when Git does not ignore it (a ``git add -A`` would stage
    it), else ``None`` (ignored, outside any work tree, or no git to ask)."""
    folder = path.resolve().parent
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    try:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], cwd=folder, env=env, capture_output=True, text=True, check=False
        )
        if top.returncode != 0:
            return None
        ignored = subprocess.run(
            ["git", "check-ignore", "-q", "--", path.name], cwd=folder, env=env, capture_output=True, check=False
        )
    except OSError:
        return None
    return top.stdout.strip() if ignored.returncode == 1 else None


def _invalid(header: str, problems: list[str], hint: str = _FILE_HINT) -> CredentialsFileError:
    count = counted(problems)
    return CredentialsFileError(f"{header} ({count}):", problems, hint=hint)


def _from_file(server_name: str, url: str, entry_name: str, env: Mapping[str, str], *, cwd: Path) -> Auth:
    """The credentials of entry ``entry_name`` of the credentials file, for ``server_name`` at ``url``."""
    path = _found_file(server_name, entry_name, env, cwd=cwd)
    _refuse_exposed(path)
    file_header = f"the credentials file {path} is invalid"
    data, problems = _read_file(path, file_header)
    entry = _entry(server_name, entry_name, path, data, problems, file_header)
    at: Loc = ("servers", entry_name)
    _check_entry_types(entry, at, problems, file_header)
    return _entry_auth(server_name, url, entry_name, path, entry, problems)


def _found_file(server_name: str, entry_name: str, env: Mapping[str, str], *, cwd: Path) -> Path:
    """Finding the file: the first in the SS3 order; none at all is "no credentials", as an unset variable."""
    path = find_credentials_file(env, cwd=cwd)
    if path is not None:
        return path
    places = ", ".join(str(p) for p in credentials_file_candidates(env, cwd=cwd))
    raise AuthError(
        f"server '{server_name}' reads entry '{entry_name}' of the credentials file, but none was found "
        f"(looked in: {places}).",
        hint="Create .screeps.yaml with `servers: {"
        + entry_name
        + ": {host: ..., token: ...}}`, or set SCREEPS_CONFIG to its path.",
    )


def _refuse_exposed(path: Path) -> None:
    """Refusing a file that a ``git add -A`` would commit, before it is read."""
    exposed = _exposed_to_git(path)
    if exposed is None:
        return
    raise CredentialsFileError(
        f"the credentials file {path} is in the Git work tree {exposed} and Git does not ignore it: "
        "'git add -A' would commit the token in it; it was not read.",
        hint=f"Ignore it (echo {path.name} >> {Path(exposed) / '.gitignore'}), or move it out of the repository "
        "(~/.config/screeps/config.yaml is read too).",
    )


def _read_file(path: Path, file_header: str) -> tuple[Any, Problems]:
    """Reading the file: its data, and the problems found so far (each placed at its line)."""
    try:
        document = read_yaml(path, str(path), what="a credentials file", limit=MAX_CREDENTIALS_BYTES)
    except OSError as exc:
        raise CredentialsFileError(
            f"the credentials file {path} cannot be read: {exc.strerror or type(exc).__name__}."
        ) from None
    except Unreadable as exc:
        raise _invalid(file_header, exc.problems) from None
    problems = Problems(str(path), document.locations)
    problems.cover(document.problems)
    return document.data, problems


def _entry(
    server_name: str, entry_name: str, path: Path, data: Any, problems: Problems, file_header: str
) -> dict[Any, Any]:
    """Finding the entry: the file's ``servers`` mapping must hold ``entry_name``, as a mapping."""
    servers = data.get("servers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        at_servers: Loc = ("servers",) if isinstance(data, dict) and "servers" in data else ()
        problems.add(at_servers, "the file has no 'servers' mapping; write `servers:` with one entry per server")
        raise _invalid(file_header, problems.texts())
    if entry_name not in servers:
        names = ", ".join(sorted(str(n) for n in servers)) or "none"
        if problems:
            problems.add(("servers",), f"has no entry '{entry_name}' (it has: {names}); add servers.{entry_name}")
            raise _invalid(file_header, problems.texts())
        raise CredentialsFileError(
            f"server '{server_name}' reads entry '{entry_name}', but the credentials file {path} has no such "
            f"entry (it has: {names}).",
            hint=f"Add servers.{entry_name} to {path}, or fix 'credentials' of servers.{server_name} in the manifest.",
        )
    entry = servers[entry_name]
    if not isinstance(entry, dict):
        problems.add(
            ("servers", entry_name),
            "is not a mapping; write the entry as host: ..., token: ... (or username and password)",
        )
        raise _invalid(file_header, problems.texts())
    return entry


def _check_entry_types(entry: Mapping[str, Any], at: Loc, problems: Problems, file_header: str) -> None:
    """Checking the entry's value types; a problem anywhere in the file: the entry's values are not trusted yet."""
    for key in _ENTRY_TEXT_KEYS:
        value = entry.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, str | int)):
            problems.add((*at, key), "must be a string; put the value in quotes")
    for key in ("secure", "ptr", "season"):
        if entry.get(key) is not None and not isinstance(entry[key], bool):
            problems.add((*at, key), "must be true or false")
    if problems:
        raise _invalid(file_header, problems.texts())


def _entry_auth(
    server_name: str, url: str, entry_name: str, path: Path, entry: Mapping[str, Any], problems: Problems
) -> Auth:
    """Taking the entry's credentials: written for the manifest's address, with a token or a whole login."""
    at: Loc = ("servers", entry_name)
    _check_address(server_name, url, entry, at, problems)
    token = entry.get("token")
    user, password = entry.get("username"), entry.get("password")
    has_token = token is not None and bool(str(token).strip())
    has_login = user is not None and bool(str(user).strip()) and password is not None and bool(str(password))
    if not (has_token or has_login):
        problems.add(
            at,
            "has neither 'token' nor both 'username' and 'password'; official servers use 'token' (created in the "
            "account settings), private servers 'username' and 'password'",
        )
    if problems:
        raise _invalid(
            f"entry '{entry_name}' of the credentials file {path} cannot be used for server '{server_name}' ({url})",
            problems.texts(),
            hint="The entry's secret is not sent to another address than it was written for; fix the entry, "
            "or name the right entry in the manifest's 'credentials'.",
        )
    where = f"entry '{entry_name}' of the credentials file {path}"
    if has_token:
        _check(server_name, where, "token", str(token).strip())
        return TokenAuth(Secret(str(token).strip()), where)
    _check(server_name, where, "user name", str(user).strip())
    _check(server_name, where, "password", str(password))
    return PasswordAuth(str(user).strip(), Secret(str(password)), url, where)


def _check_address(server_name: str, url: str, entry: Mapping[str, Any], at: Loc, problems: Problems) -> None:
    """Refuse an entry written for another address than the manifest's URL.

    Only what the entry states is compared (host, port, secure, path/ptr/season). A mismatch would send the
    entry's secret to a server it was not written for, so it is an error, not a warning.
    """
    parts = urlsplit(url)
    host = entry.get("host")
    if host is not None and str(host).strip().lower() != (parts.hostname or "").lower():
        problems.add((*at, "host"), f"'{host}' is not the manifest's host '{parts.hostname}'")
    secure = entry.get("secure")
    if secure is not None and secure != (parts.scheme == "https"):
        problems.add((*at, "secure"), f"{str(secure).lower()} does not match the manifest's scheme '{parts.scheme}'")
    port = entry.get("port")
    if port is not None:
        actual = parts.port or (443 if parts.scheme == "https" else 80)
        if str(port).strip() != str(actual):
            problems.add((*at, "port"), f"{port} is not the manifest's port {actual}")
    path, key = entry.get("path"), "path"
    if path is None and entry.get("ptr"):
        path, key = "/ptr", "ptr"
    if path is None and entry.get("season"):
        path, key = "/season", "season"
    if path is not None and str(path).strip("/") != parts.path.strip("/"):
        problems.add((*at, key), f"'{path}' is not the manifest's path '{parts.path or '/'}'")


def entry_for(folder: Path, url: str) -> tuple[str, Path] | None:
    """``gitops init``'s look at a screepers credentials file in the repository (``.screeps.yaml``, else the
    ``.example-screeps.yaml`` starters ship): the name of the first entry written for ``url`` (same host, and port,
    scheme and path where the entry states them), and the file it is in; ``None`` when there is none. Only names and
    addresses are read; a secret in the file is never looked at."""
    for name in (".screeps.yaml", ".example-screeps.yaml"):
        path = folder / name
        if not path.is_file() or path.is_symlink():
            continue
        try:
            document = read_yaml(path, str(path), what="a credentials file", limit=MAX_CREDENTIALS_BYTES)
        except (OSError, Unreadable):
            continue
        servers = document.data.get("servers") if isinstance(document.data, dict) else None
        if not isinstance(servers, dict):
            continue
        for entry_name, entry in servers.items():
            if not isinstance(entry, dict) or not isinstance(entry_name, str) or entry.get("host") is None:
                continue
            problems = Problems(str(path), {})
            _check_address("init", url, entry, ("servers", entry_name), problems)
            stated = entry.get("path") or ("/ptr" if entry.get("ptr") else "/season" if entry.get("season") else "/")
            # An entry that states no path is the main world's, not /ptr's.
            if not problems.texts() and str(stated).strip("/") == urlsplit(url).path.strip("/"):
                return entry_name, path
    return None
