"""The text of a new, commented manifest (``gitops init``): pure, so every layout's text is tested without files.

:func:`manifest_text` writes YAML by hand rather than dumping a model, because the point of the file is its
comments: each key says what it does and what else it could say. Much of what it writes comes from outside: a
server's ``/api/version`` answer, entry names of a ``.screeps.yaml``, file and script names of the repository. So
every value is emitted by the YAML library (:func:`_scalar`; plain only when it reads back as the same string) and
every comment goes through :func:`_comment` (one line, control characters and line breaks escaped): no outside text
can end a comment or a value and add a key. :func:`manifest_data` is what the text means, and
:func:`check_reads_back` (run by ``gitops init`` on the text and again on the file it wrote) refuses a text that
parses as anything else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import yaml

from gitops.core.endpoints import is_official
from gitops.core.layout import Layout
from gitops.errors import ManifestError

DEFAULT_URL = "https://screeps.com"
DEFAULT_TOKEN_ENV = "SCREEPS_TOKEN"  # noqa: S105 - the name of a variable, not a secret
DEFAULT_USERNAME_ENV = "SCREEPS_USERNAME"
DEFAULT_PASSWORD_ENV = "SCREEPS_PASSWORD"  # noqa: S105 - the name of a variable, not a secret

#: The branch every account starts with, and the one the game's editor opens; ``--branch`` picks another.
DEFAULT_BRANCH = "default"

_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./:-]*")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}
#: What may not stand raw in a comment: C0 and C1 controls, DEL, the line breaks YAML and terminals know (NEL, LS,
#: PS), the bidirectional overrides that make a line read differently than it parses, and the backslash (escaped so
#: that an escape in the text is told apart from one made here).
_UNSAFE_IN_COMMENT = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff\\]")
_COMMENT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}
#: The budget every new manifest keeps back (uploads of the 240 a day).
RESERVED_UPLOADS = 20


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
            f"{url} could not be reached, and it is not screeps.com: a private server signing in with a "
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
    """``value`` as a YAML scalar on one line: plain when that reads back as the same string, else double-quoted as
    the YAML library emits it (every line break and control character escaped)."""
    if _PLAIN.fullmatch(value) and value.lower() not in _YAML_WORDS and not _looks_numeric(value):
        return value
    return _quoted(value)


def _comment(text: str) -> str:
    """``text`` made safe for a YAML comment: one line, control characters, line breaks and backslashes escaped
    (``\\n``, ``\\u001b``)."""
    return _UNSAFE_IN_COMMENT.sub(lambda m: _COMMENT_ESCAPES.get(m.group(), f"\\u{ord(m.group()):04x}"), text)


def _looks_numeric(value: str) -> bool:
    try:
        float(value.replace("_", ""))
    except ValueError:
        return value[:1].isdigit() and ":" in value  # YAML 1.1 sexagesimal numbers such as 1:20
    return True


def _flow(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(_quoted(v) for v in values) + "]"


def _quoted(value: str) -> str:
    """``value`` double-quoted, as the YAML library emits it (globs read better quoted, whatever they hold)."""
    emitted = yaml.safe_dump(value, default_style='"', width=2**31 - 1, allow_unicode=True, explicit_end=False)
    return emitted.rstrip("\n")


def _credentials_data(server: ServerChoice) -> dict[str, str]:
    if server.credentials is not None:
        return {"credentials": server.credentials}
    if server.username_env is not None and server.password_env is not None:
        return {"username_env": server.username_env, "password_env": server.password_env}
    return {"token_env": server.token_env or DEFAULT_TOKEN_ENV}


def _branch_data(layout: Layout, server: ServerChoice, branch: str, root: str) -> dict[str, Any]:
    data: dict[str, Any] = {"server": server.name, "branch": branch, "root": root}
    if layout.build is not None:
        data["build"] = layout.build.replace("{server}", server.name)
    data["include"] = list(layout.include)
    if layout.exclude:
        data["exclude"] = list(layout.exclude)
    data["binary"] = list(layout.binary)
    naming: dict[str, Any] = {}
    if layout.separator != "/":
        naming["separator"] = layout.separator
    if layout.strip_suffixes is not None:
        naming["strip_suffixes"] = list(layout.strip_suffixes)
    if naming:
        data["naming"] = naming
    if layout.source_maps is not None:
        data["source_maps"] = layout.source_maps
    return data


def manifest_data(layout: Layout, server: ServerChoice, branch: str) -> dict[str, Any]:
    """What :func:`manifest_text` means: the data its YAML must parse to, and nothing else."""
    return {
        "version": 1,
        "servers": {server.name: {"url": server.url, **_credentials_data(server)}},
        "branches": [
            _branch_data(layout, server, folder if layout.branch_roots else branch, folder)
            for folder in layout.branch_roots or (layout.root,)
        ],
        "budget": {"reserve": {"POST /api/user/code": RESERVED_UPLOADS}},
    }


def _credentials_lines(data: Mapping[str, str]) -> list[str]:
    if "credentials" in data:
        return [
            f"    credentials: {_scalar(data['credentials'])}   # an entry of the screepers credentials file "
            "(.screeps.yaml; gitops help credentials)",
        ]
    if "username_env" in data:
        return [
            f"    username_env: {_scalar(data['username_env'])}   # the environment variable holding the user name",
            f"    password_env: {_scalar(data['password_env'])}   # ... and the one holding the password "
            "(screepsmod-auth)",
        ]
    return [
        f"    token_env: {_scalar(data['token_env'])}   # the environment variable holding the token; never the token "
        "itself",
        "    # or: credentials: NAME  (an entry of .screeps.yaml), or username_env + password_env (private servers)",
    ]


def _branch_lines(layout: Layout, data: Mapping[str, Any]) -> list[str]:
    lines = [
        f"  - server: {_scalar(data['server'])}",
        f"    branch: {_scalar(data['branch'])}   # created by apply when the server does not have it",
        f"    root: {_scalar(data['root'])}   # module names are paths under this folder",
    ]
    if "build" in data:
        lines.append(f"    build: {_scalar(data['build'])}   # run before the code is read (validate, plan, apply)")
    else:
        lines.append('    # build: "npm run build"   # a command that writes root, run before the code is read')
    lines.append(f"    include: {_flow(tuple(data['include']))}")
    if "exclude" in data:
        lines.append(f"    exclude: {_flow(tuple(data['exclude']))}")
    else:
        lines.append('    # exclude: ["test/**"]')
    lines.append(f"    binary: {_flow(tuple(data['binary']))}   # sent as {{binary: base64}}")
    naming = data.get("naming", {})
    parts: list[str] = []
    if "separator" in naming:
        parts.append(f"separator: {_quoted(naming['separator'])}")
    if "strip_suffixes" in naming:
        parts.append(f"strip_suffixes: {_flow(tuple(naming['strip_suffixes']))}")
    if "separator" in naming:
        example = _comment(f"role{naming['separator']}harvester")
        lines.append(f"    naming: {{{', '.join(parts)}}}   # role/harvester.js -> require('{example}')")
    elif parts:
        lines.append(f"    naming: {{{', '.join(parts)}}}   # compiled.wasm -> require('compiled')")
    else:
        lines.append('    # naming: {separator: "."}   # "/" (default): role/harvester.js -> require("role/harvester")')
    if "source_maps" in data:
        lines.append(
            f"    source_maps: {_scalar(data['source_maps'])}   # what a *.js.map file becomes (wrap, raw or omit)"
        )
    elif layout.kind in ("build", "wasm"):
        lines.append(
            "    # source_maps: wrap   # main.js.map -> module 'main.js.map' (module.exports = <map>;); or raw, omit"
        )
    if layout.optional_requires:
        lines.append("    # The code requires these in try blocks, functions or blocks, and no file holds them: plan")
        lines.append("    # warns about each; listed here, it does not.")
        lines.append("    # requires:")
        lines.append(f"    #   ignore: {_comment(_flow(layout.optional_requires))}")
    lines += [
        "    # activate: [world]   # make this branch the active one (world and/or sim) after each upload",
        "    # remote_only: remove   # modules only on the server are removed (default) or kept",
    ]
    return lines


def manifest_text(layout: Layout, server: ServerChoice, branch: str) -> str:
    """A commented ``gitops.yaml`` for ``layout``, deploying to ``branch`` on ``server`` (for the game client's
    layout, one branch per folder, named by the folder). It parses to :func:`manifest_data`'s data."""
    data = manifest_data(layout, server, branch)
    [(name, server_data)] = data["servers"].items()
    lines = [
        "# gitops.yaml: which files make up which branch on which server (written by 'gitops init').",
        "# Reference: gitops help manifest (all topics: gitops help). For completion in your editor: gitops schema >",
        "# gitops.schema.json, then make the first line: # yaml-language-server: $schema=gitops.schema.json",
        "#",
        f"# Detected layout: {_comment(layout.kind)}",
        *[f"#   - {_comment(line)}" for line in layout.seen],
    ]
    if layout.assumed or server.assumed:
        lines.append("# Assumed (check these):")
        lines += [f"#   - {_comment(line)}" for line in dict.fromkeys((*layout.assumed, *server.assumed))]
    lines += [
        f"version: {data['version']}",
        "servers:",
        f"  {_scalar(name)}:",
        f"    url: {_scalar(server_data['url'])}   # with its path prefix for /ptr or /season",
        *_credentials_lines(server_data),
        "branches:",
    ]
    for branch_data in data["branches"]:
        lines += _branch_lines(layout, branch_data)
    lines += [
        "budget:",
        f'  reserve: {{"POST /api/user/code": {RESERVED_UPLOADS}}}   # uploads kept back for you, of the 240 a day',
        "",
    ]
    return "\n".join(lines)


def check_reads_back(text: str, meant: Mapping[str, Any], *, where: str) -> None:
    """:class:`ManifestError` unless ``text`` parses as exactly ``meant`` (``where``: the file, for the message).

    The serializers above make this hold for any input; the check is what makes it true for the file on disk:
    outside text that found a way to end a comment or a value and add a key (a ``build:`` that ``validate`` would
    run) is refused instead of written.
    """
    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError:
        parsed = None
    if parsed != meant:
        raise ManifestError(
            f"{where}: the manifest gitops init wrote does not read back as what it meant to write; nothing was "
            "written",
            hint="Some text init found (a server's /api/version answer, a .screeps.yaml entry name, a file name) "
            "could not be written safely: write gitops.yaml by hand (gitops help manifest), and please report this.",
        )
