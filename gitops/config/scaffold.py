"""The text of a new, commented manifest (``gitops init``): pure, so every layout's text is tested without files.

:func:`manifest_text` writes YAML by hand rather than dumping a model, because the point of the file is its
comments: each key says what it does and what else it could say. Every value goes through :func:`_scalar`, so a
branch or variable name can never break the YAML around it, and the tests load each text with
:func:`gitops.config.manifest.manifest_from_data`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from gitops.core.endpoints import is_official
from gitops.core.layout import Layout

DEFAULT_URL = "https://screeps.com"
DEFAULT_TOKEN_ENV = "SCREEPS_TOKEN"  # noqa: S105 - the name of a variable, not a secret
DEFAULT_USERNAME_ENV = "SCREEPS_USERNAME"
DEFAULT_PASSWORD_ENV = "SCREEPS_PASSWORD"  # noqa: S105 - the name of a variable, not a secret

#: The branch every account starts with, and the one the game's editor opens; ``--branch`` picks another.
DEFAULT_BRANCH = "default"

_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./:-]*")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}


@dataclass(frozen=True)
class ServerChoice:
    """The server a new manifest names, and how its credentials are named (exactly one way)."""

    name: str
    url: str = DEFAULT_URL
    token_env: str | None = DEFAULT_TOKEN_ENV
    credentials: str | None = None
    username_env: str | None = None
    password_env: str | None = None
    #: What was guessed about the server (how it signs in), for the manifest's comments and the terminal.
    assumed: tuple[str, ...] = ()


def signin_for(url: str, version: Mapping[str, object] | None) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """How a new manifest's server signs in when no option says: ``"token"`` or ``"password"``, with what was seen
    and what was assumed. ``version`` is the server's ``/api/version`` answer, ``None`` when it was not reached.

    The official server takes tokens (its account settings make them); so does this tool's stand-in. A private
    server (``@screeps/backend`` answers ``packageVersion``) has no token settings: screepsmod-auth signs in with
    the user's name and password.
    """
    if is_official(url):
        return "token", (), ()
    if version is not None and version.get("standin") is True:
        return "token", ("the server is screeps-gitops' stand-in (its /api/version says so): it takes tokens",), ()
    if version is not None:
        package = version.get("packageVersion")
        shown = f" (server package {package})" if isinstance(package, str) else ""
        return (
            "password",
            (f"the server answers /api/version as a private server{shown}: it signs in with a password",),
            (),
        )
    return (
        "password",
        (),
        (
            f"{url} could not be reached, and it is not screeps.com: assumed a private server signing in with a "
            "user name and password (screepsmod-auth); for a token, run init again with --token-env NAME",
        ),
    )


def server_name_for(url: str) -> str:
    """A short name for a server URL: ``mmo``, ``ptr`` and ``season`` for the official ones, ``local`` for
    loopback, else the host's first label (``private`` when that is not a usable name)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    path = parts.path.strip("/").lower()
    if host in ("screeps.com", "www.screeps.com"):
        return path if path in ("ptr", "season") else "mmo"
    if host in ("127.0.0.1", "localhost", "::1"):
        return "local"
    label = host.split(".")[0]
    return label if re.fullmatch(r"[a-z0-9][a-z0-9_-]*", label) and not label.isdigit() else "private"


def _scalar(value: str) -> str:
    """``value`` as a YAML scalar: plain when that reads back as the same string, else double-quoted (JSON's
    escaping, which YAML reads the same)."""
    if _PLAIN.fullmatch(value) and value.lower() not in _YAML_WORDS and not _looks_numeric(value):
        return value
    return json.dumps(value, ensure_ascii=False)


def _looks_numeric(value: str) -> bool:
    try:
        float(value.replace("_", ""))
    except ValueError:
        return value[:1].isdigit() and ":" in value  # YAML 1.1 sexagesimal numbers such as 1:20
    return True


def _flow(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(json.dumps(v, ensure_ascii=False) for v in values) + "]"


def _credentials_lines(server: ServerChoice) -> list[str]:
    if server.credentials is not None:
        return [
            f"    credentials: {_scalar(server.credentials)}   # an entry of the screepers credentials file "
            "(.screeps.yaml; gitops help credentials)",
        ]
    if server.username_env is not None and server.password_env is not None:
        return [
            f"    username_env: {_scalar(server.username_env)}   # the environment variable holding the user name",
            f"    password_env: {_scalar(server.password_env)}   # ... and the one holding the password "
            "(screepsmod-auth)",
        ]
    token_env = server.token_env or DEFAULT_TOKEN_ENV
    return [
        f"    token_env: {_scalar(token_env)}   # the environment variable holding the token; never the token itself",
        "    # or: credentials: NAME  (an entry of .screeps.yaml), or username_env + password_env (private servers)",
    ]


def _branch_lines(layout: Layout, server: ServerChoice, branch: str, root: str) -> list[str]:
    lines = [
        f"  - server: {_scalar(server.name)}",
        f"    branch: {_scalar(branch)}   # created by apply when the server does not have it",
        f"    root: {_scalar(root)}   # module names are paths under this folder",
    ]
    if layout.build is not None:
        build = layout.build.replace("{server}", server.name)
        lines.append(f"    build: {_scalar(build)}   # run before the code is read (validate, plan, apply)")
    else:
        lines.append('    # build: "npm run build"   # a command that writes root, run before the code is read')
    lines.append(f"    include: {_flow(layout.include)}")
    if layout.exclude:
        lines.append(f"    exclude: {_flow(layout.exclude)}")
    else:
        lines.append('    # exclude: ["test/**"]')
    lines.append(f"    binary: {_flow(layout.binary)}   # sent as {{binary: base64}}")
    naming: list[str] = []
    if layout.separator != "/":
        naming.append(f"separator: {json.dumps(layout.separator)}")
    if layout.strip_suffixes is not None:
        naming.append(f"strip_suffixes: {_flow(layout.strip_suffixes)}")
    if layout.separator != "/":
        example = f"role{layout.separator}harvester"
        lines.append(f"    naming: {{{', '.join(naming)}}}   # role/harvester.js -> require('{example}')")
    elif naming:
        lines.append(f"    naming: {{{', '.join(naming)}}}   # compiled.wasm -> require('compiled')")
    else:
        lines.append('    # naming: {separator: "."}   # "/" (default): role/harvester.js -> require("role/harvester")')
    if layout.source_maps is not None:
        lines.append(f"    source_maps: {layout.source_maps}   # what a *.js.map file becomes (wrap, raw or omit)")
    elif layout.kind in ("build", "wasm"):
        lines.append(
            "    # source_maps: wrap   # main.js.map -> module 'main.js.map' (module.exports = <map>;); or raw, omit"
        )
    if layout.optional_requires:
        lines.append("    # The code requires these inside try blocks and no file holds them (optional modules): plan")
        lines.append("    # warns about each; listed here, it does not.")
        lines.append("    # requires:")
        lines.append(f"    #   ignore: {_flow(layout.optional_requires)}")
    lines += [
        "    # activate: [world]   # make this branch the active one (world and/or sim) after each upload",
        "    # remote_only: remove   # modules only on the server are removed (default) or kept",
    ]
    return lines


def manifest_text(layout: Layout, server: ServerChoice, branch: str) -> str:
    """A commented ``gitops.yaml`` for ``layout``, deploying to ``branch`` on ``server`` (for the game client's
    layout, one branch per folder, named by the folder)."""
    lines = [
        "# gitops.yaml: which files make up which branch on which server (written by 'gitops init').",
        "# Reference: gitops help manifest (all topics: gitops help). For completion in your editor: gitops schema >",
        "# gitops.schema.json, then make the first line: # yaml-language-server: $schema=gitops.schema.json",
        "#",
        f"# Detected layout: {layout.kind}",
        *[f"#   - {line}" for line in layout.seen],
    ]
    if layout.assumed or server.assumed:
        lines.append("# Assumed (check these):")
        lines += [f"#   - {line}" for line in (*layout.assumed, *server.assumed)]
    lines += [
        "version: 1",
        "servers:",
        f"  {_scalar(server.name)}:",
        f"    url: {_scalar(server.url)}   # with its path prefix for /ptr or /season",
        *_credentials_lines(server),
        "branches:",
    ]
    for folder in layout.branch_roots or (layout.root,):
        lines += _branch_lines(layout, server, folder if layout.branch_roots else branch, folder)
    lines += [
        "budget:",
        '  reserve: {"POST /api/user/code": 20}   # uploads kept back for you, of the 240 a day',
        "",
    ]
    return "\n".join(lines)
