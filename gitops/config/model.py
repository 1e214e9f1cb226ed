"""The manifest's one definition: every class and field, its type, default, description and constraints.

These frozen dataclasses are what the rest of the tool uses. The validator (:mod:`gitops.config.validation`)
derives its pydantic models from them, field by field, and the JSON Schema comes from those models; it adds only
what a field cannot say: each named :class:`Rule`'s check and message, and the rules that relate fields.

Why the dataclasses are the definition and pydantic is derived, not the reverse: a manifest validated before is
built from the validated-manifest cache (:mod:`gitops.config.manifestcache`) straight into these classes, and that
path must import neither pydantic nor pyyaml. So this module imports neither: a field's description and
constraints are plain data in its ``metadata`` (:func:`schema`), a value's rule a :class:`Rule` marker in
``Annotated`` (stripped by :func:`typing.get_type_hints`, read by the validator).

Defaults are kept as written (``VerifyConfig.timeout`` is the ``int`` ``120``): the manifest's digest is taken over
these values and a saved plan compares it. A class built directly (tests, ``gitops init``) checks nothing:
:func:`gitops.config.manifest.manifest_from_data` validates data.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from gitops.config.reading import Loc, format_loc, line_of

__all__ = [
    "DEFAULT_MANIFEST",
    "ActiveName",
    "BranchConfig",
    "BudgetConfig",
    "BuildCommand",
    "CpuConfig",
    "CredentialRole",
    "LoadedManifest",
    "Manifest",
    "Naming",
    "RequiresConfig",
    "Rule",
    "ServerConfig",
    "VerifyConfig",
    "credential",
    "credential_roles",
    "deployed_names",
    "manifest_digest",
    "named_variables",
    "route_fields",
    "schema",
]

DEFAULT_MANIFEST = "gitops.yaml"
#: A usable server name (the key under ``servers``), a regular expression.
SERVER_NAME = "[A-Za-z0-9][A-Za-z0-9_.-]*"


@dataclass(frozen=True, slots=True)
class Rule:
    """A named rule a value must follow; :mod:`gitops.config.valuerules` holds its check, message and JSON Schema."""

    name: str


def schema(description: str | None = None, **constraints: Any) -> dict[str, Any]:
    """A field's ``metadata``: its description and constraints, as the validator's fields take them (``ge``, ``le``,
    ``gt``; ``json_schema_extra`` for what only the JSON Schema says)."""
    return {"description": description, **constraints} if description is not None else dict(constraints)


#: The ``metadata`` key of a server field that takes part in its credentials (:func:`credential`); the validator
#: leaves it out of the JSON Schema.
CREDENTIAL_KEY = "gitops.credential"


@dataclass(frozen=True, slots=True)
class CredentialRole:
    """How a server's field takes part in its credentials: marked once, on the field (:func:`credential`).

    Every marked field is a route: it decides where a credential goes or which one, so a pull request that changes
    it is not planned with one (:mod:`gitops.config.routes`). The build's environment scrub
    (:mod:`gitops.edges.build`), the redaction of the run's secrets and the Action's checks of the step's
    environment (:mod:`gitops.github.trust`) read the marks too (:func:`named_variables`), so the field of a new
    login kind, marked here, is covered by all of them.
    """

    #: The value names an environment variable the credential is read from: no build ever sees that variable.
    variable: bool = False
    #: That variable holds a secret (a token, a password): its value is redacted and masked in every output, and the
    #: Action takes it from an input only, never from the step's ``env:``. A user name is none (the game shows it).
    secret: bool = False


def credential(description: str, *, variable: bool = False, secret: bool = False, **constraints: Any) -> dict[str, Any]:
    """A server field's ``metadata`` (:func:`schema`) with its :class:`CredentialRole`."""
    return {**schema(description, **constraints), CREDENTIAL_KEY: CredentialRole(variable, secret)}


def credential_roles(server: ServerConfig | type[ServerConfig]) -> list[tuple[str, CredentialRole]]:
    """The fields of ``server`` (a :class:`ServerConfig`, its class, or a class extending it) that take part in its
    credentials, with their roles, in definition order."""
    marked = (spec for spec in dataclasses.fields(server) if CREDENTIAL_KEY in spec.metadata)
    return [(spec.name, spec.metadata[CREDENTIAL_KEY]) for spec in marked]


def route_fields(server: ServerConfig | type[ServerConfig]) -> tuple[str, ...]:
    """The names of the fields of ``server`` that decide where its credential goes and which one."""
    return tuple(name for name, _ in credential_roles(server))


def named_variables(server: ServerConfig, *, secret: bool = False) -> list[str]:
    """The environment variables ``server`` reads its credentials from (``secret``: only those holding a secret),
    in field order."""
    return [
        value
        for name, role in credential_roles(server)
        if role.variable and (role.secret or not secret) and (value := getattr(server, name))
    ]


# The values that follow a rule of their own (the rule's check and message: gitops.config.valuerules).
EnvName = Annotated[str, Rule("env_name")]
CredentialsEntry = Annotated[str, Rule("credentials_entry")]
BranchName = Annotated[str, Rule("branch_name")]
RootPath = Annotated[str, Rule("root")]
Glob = Annotated[str, Rule("glob")]
Separator = Annotated[str, Rule("separator")]
Suffix = Annotated[str, Rule("suffix")]
Url = Annotated[str, Rule("url")]
#: A regular expression a console line is matched against (``fail_on``).
FailPattern = Annotated[str, Rule("fail_pattern")]
#: A regular expression matched against whole lines (``ignore_lines``).
LinePattern = Annotated[str, Rule("line_pattern")]
ActiveName = Literal["world", "sim"]
#: A build command: a string runs through the shell (``sh -c``), a list is the program and its arguments.
BuildCommand = Annotated[str | list[str], Rule("build")]
#: Requests kept back per endpoint of the limits table (``gitops.core.endpoints``).
ReserveTable = Annotated[dict[str, Annotated[int, Rule("strict_int")]], Rule("reserve")]

_BUILD_DESCRIPTION = (
    "A command that writes the branch's root (a build output folder such as dist), run once before the code is "
    "read, with the manifest's folder as working directory: a string runs through the shell (sh -c), a list is "
    "the program and its arguments. With --ref it runs in a temporary checkout of that commit. Branches sharing "
    "a command run it once. See: gitops help layouts."
)


@dataclass(frozen=True, slots=True)
class CpuConfig:
    """The account's CPU on this server, for ``gitops rehearse``: its bots tick with this limit and bucket."""

    limit: int = field(
        default=100,
        metadata=schema(
            "The account's CPU limit per tick (Game.cpu.limit); the rehearsal's bots get it.", ge=1, le=300
        ),
    )
    bucket: int = field(
        default=10_000,
        metadata=schema(
            "The CPU bucket a rehearsal's bot starts with (Game.cpu.bucket; 10000: full, as on an account that has "
            "been running). A tick may use up to min(500, bucket + limit).",
            ge=0,
            le=10_000,
        ),
    )


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """A game server and how to authenticate to it. Credentials are only ever named, never written here.

    Exactly one way of credentials: ``token_env``; or ``username_env`` with ``password_env``; or ``credentials``.
    """

    url: Url = field(
        metadata=credential(
            "Base URL, with any path prefix: https://screeps.com, https://screeps.com/ptr, "
            "https://screeps.com/season, http://127.0.0.1:21025. No user name, password, query or fragment; a "
            "trailing '/' is dropped.",
            json_schema_extra={"pattern": "^https?://[^/?#@]+"},
        )
    )
    token_env: EnvName | None = field(
        default=None,
        metadata=credential(
            "Name of the environment variable that holds the token (official servers).", variable=True, secret=True
        ),
    )
    username_env: EnvName | None = field(
        default=None,
        metadata=credential(
            "Private servers: name of the environment variable holding the user name or e-mail "
            "(together with password_env).",
            variable=True,
        ),
    )
    password_env: EnvName | None = field(
        default=None,
        metadata=credential(
            "Private servers: name of the environment variable holding the password.", variable=True, secret=True
        ),
    )
    credentials: CredentialsEntry | None = field(
        default=None,
        metadata=credential("Name of a server entry in the screepers unified credentials file (.screeps.yaml)."),
    )
    compress: Literal["auto", "always", "never"] = field(
        default="auto",
        metadata=schema(
            "Send uploads compressed (Content-Encoding: deflate; Screeps code shrinks 4 to 7 times): 'auto' "
            "where the server is known to take it (a private server signed in with a password, or learnt once with "
            "a harmless probe and kept in the ledger), 'always' (no probe), 'never'."
        ),
    )
    cpu: CpuConfig | None = field(
        default=None,
        metadata=schema(
            "The account's CPU limit and bucket on this server, for gitops rehearse (default: limit 100, "
            "bucket 10000); --cpu and --bucket override it."
        ),
    )


@dataclass(frozen=True, slots=True)
class Naming:
    """How a file's path under the branch root becomes a module name."""

    separator: Separator = field(
        default="/",
        metadata=schema(
            "What a folder boundary becomes in the module name: role/harvester.js becomes "
            "'role/harvester' with '/', 'role.harvester' with '.' (require('role.harvester')), 'role_harvester' "
            "with '_'. Any one character the code's requires use."
        ),
    )
    strip_suffixes: list[Suffix] = field(
        default_factory=lambda: [".js"],
        metadata=schema(
            "Suffixes removed from module names (the longest that matches), binary modules included: "
            "add '.wasm' to name pkg/mybot_bg.wasm 'pkg/mybot_bg' (require('mybot_bg') with root: pkg). With the "
            "default, lib/pathfinder.wasm stays 'lib/pathfinder.wasm'.",
            json_schema_extra={"default": [".js"]},
        ),
    )


@dataclass(frozen=True, slots=True)
class RequiresConfig:
    """The check of literal require('name') calls against the modules the branch will hold."""

    check: bool = field(
        default=True, metadata=schema("Refuse a branch whose JavaScript requires a module it will not hold.")
    )
    ignore: list[str] = field(
        default_factory=list,
        metadata=schema(
            "Module names a require may name without the branch holding them (optional or dynamic requires)."
        ),
    )


@dataclass(frozen=True, slots=True)
class VerifyConfig:
    """Watch the game's console after apply and judge whether the new code runs (gitops help safe-deploys)."""

    ticks: int = field(default=10, metadata=schema("Ticks to watch after the code landed.", ge=1, le=1000))
    error_share: float = field(
        default=0.5,
        metadata=schema(
            "The deploy is failing when at least this share of the watched ticks failed (an uncaught "
            "error, a CPU-limit termination, a line matching fail_on); 0: any failed tick.",
            ge=0,
            le=1,
        ),
    )
    timeout: float = field(
        default=120,
        metadata=schema("Seconds to wait for the ticks; fewer ticks in that time: unknown.", gt=0, le=3600),
    )
    on_failure: Literal["report", "rollback"] = field(
        default="report",
        metadata=schema("When failing: 'report' (leave the code in place) or 'rollback' (undo the deploy)."),
    )
    rollback: Literal["restore", "standby"] = field(
        default="restore",
        metadata=schema(
            "How to undo: 'restore' uploads the code the server held before (1 upload, reserved in the "
            "plan); 'standby' (blue/green) deploys to whichever of the branch and its standby is not active, "
            "activates it, and on failure activates the other again (no upload; 1 activation reserved per activate "
            "entry)."
        ),
    )
    standby: BranchName | None = field(
        default=None,
        metadata=schema("rollback: standby: the second branch, taking turns with this one (not in branches)."),
    )
    fail_on: list[FailPattern] = field(
        default_factory=list,
        metadata=schema(
            "Regular expressions: a console log line matching one makes its tick a failed one (errors "
            "the bot catches and logs itself)."
        ),
    )


@dataclass(frozen=True, slots=True)
class BranchConfig:
    """One code branch on one server, and the files that make it up."""

    server: str = field(metadata=schema("Key of an entry under 'servers'."))
    branch: BranchName = field(
        metadata=schema("Branch name on the server; it must exist there or be created by apply.")
    )
    root: RootPath = field(
        default=".",
        metadata=schema("Folder, relative to the manifest's folder, that globs and module names are relative to."),
    )
    include: Annotated[list[Glob], Rule("include")] = field(
        default_factory=lambda: ["**/*.js"],
        metadata=schema(
            "Globs of the files under root that are modules ('**' spans folders; '*' does not match a "
            "leading dot). Every glob must match at least one file.",
            json_schema_extra={"minItems": 1, "default": ["**/*.js"]},
        ),
    )
    exclude: list[Glob] = field(
        default_factory=list, metadata=schema("Globs of files under root to leave out, even if included.")
    )
    binary: list[Glob] = field(
        default_factory=lambda: ["**/*.wasm"],
        metadata=schema(
            "Globs picking which included files are binary modules, sent as {'binary': base64}. They "
            "must be included too: include: ['**/*.js', '**/*.wasm'].",
            json_schema_extra={"default": ["**/*.wasm"]},
        ),
    )
    naming: Naming = field(default_factory=Naming)
    activate: Annotated[list[ActiveName], Rule("activate")] = field(
        default_factory=list,
        metadata=schema(
            "Make this branch the active one for the world and/or the simulation: [world], [sim], [world, sim]."
        ),
    )
    remote_only: Literal["remove", "keep"] = field(
        default="remove",
        metadata=schema(
            "Modules on the server but not in the repository: 'remove' them (default; an upload replaces "
            "the branch) or 'keep' them (re-sent with every upload)."
        ),
    )
    build: BuildCommand | None = field(default=None, metadata=schema(_BUILD_DESCRIPTION))
    source_maps: Literal["wrap", "raw", "omit"] = field(
        default="wrap",
        metadata=schema(
            "What a matched *.js.map file becomes: 'wrap' (module NAME.js.map holding "
            "'module.exports = <the map>;', as rollup-plugin-screeps uploads it), 'raw' (the file as it is) or "
            "'omit' (left out)."
        ),
    )
    requires: RequiresConfig = field(default_factory=RequiresConfig)
    verify: VerifyConfig | None = field(
        default=None,
        metadata=schema(
            "After apply, watch the account's console and judge the deploy; off when left out. Needs "
            "activate (the console shows the active code)."
        ),
    )
    #: See :func:`gitops.core.diff.differ_only_in`.
    ignore_lines: list[LinePattern] = field(
        default_factory=list,
        metadata=schema(
            "Regular expressions matched against whole lines of the text modules (a build's time stamp: "
            "'// Built at .*'): the comparison with the server ignores lines that match, so a module whose only "
            "differences are such lines is not uploaded. The upload, when something else changed, sends every "
            "module as built."
        ),
    )


@dataclass(frozen=True, slots=True)
class BudgetConfig:
    """How the tool spends the token's rate limits."""

    reserve: ReserveTable = field(
        default_factory=dict,
        metadata=schema(
            "Requests kept back for the person, per endpoint of the limits table "
            "('POST /api/user/code': 20). Each value is 0 or more and below that limit."
        ),
    )
    trust_own_upload_seconds: int = field(
        default=600,
        metadata=schema(
            "With --refresh=auto, a branch this tool uploaded less than this long ago is planned from "
            "the ledger instead of downloaded.",
            ge=0,
        ),
    )


@dataclass(frozen=True, slots=True)
class Manifest:
    """The whole manifest (gitops.yaml)."""

    version: Literal[1] = field(metadata=schema("Manifest format version; 1."))
    servers: dict[str, ServerConfig] = field(
        metadata=schema(
            "Game servers by name (letters, digits, '-', '_', '.'); branches refer to these names.",
            json_schema_extra={"minProperties": 1, "propertyNames": {"pattern": f"^{SERVER_NAME}$"}},
        )
    )
    branches: list[BranchConfig] = field(
        metadata=schema("The code branches to deploy; each (server, branch) once.", json_schema_extra={"minItems": 1})
    )
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    build: BuildCommand | None = field(
        default=None,
        metadata=schema(_BUILD_DESCRIPTION + " Here: for every branch that names no build of its own."),
    )
    install: BuildCommand = field(
        default="auto",
        metadata=schema(
            "Before a build, when the manifest's folder has a package.json with dependencies and no node_modules "
            "(a fresh checkout: --ref, --base, the GitHub Action's build job): 'auto' (default) installs them as "
            "the lockfile says (npm ci, yarn install --frozen-lockfile, pnpm install --frozen-lockfile; npm install "
            "without a lockfile), 'never' runs nothing, any other value is the command to run instead (a string "
            "through sh -c, a list without a shell). Not when the build command installs itself (npm ci && ...)."
        ),
    )
    build_timeout: int = field(
        default=600,
        metadata=schema(
            "Seconds each build command (and the install before it) may run; one still running then is stopped "
            "with its processes, and the run fails with exit 6 (a build that watches for changes never ends).",
            ge=1,
            le=86400,
        ),
    )


#: Every class of the manifest, by name (the validator derives a model of the same name from each).
CLASSES: Mapping[str, type] = {
    cls.__name__: cls
    for cls in (CpuConfig, ServerConfig, Naming, RequiresConfig, VerifyConfig, BranchConfig, BudgetConfig, Manifest)
}


def manifest_digest(manifest: Manifest) -> str:
    """SHA-256 of the canonical JSON of a validated manifest (the same JSON pydantic's ``model_dump(mode="json")``
    gives of the validated model: every value is a string, number, boolean, null, list or mapping)."""
    canonical = json.dumps(dataclasses.asdict(manifest), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class LoadedManifest:
    """A validated manifest and where it came from.

    ``path`` is the manifest file (absolute), ``base_dir`` its folder (roots are relative to it), ``digest`` the
    SHA-256 of the canonical JSON of the validated manifest (a saved plan compares it). ``display`` is the path as
    the user gave it (for messages) and ``locations`` maps a key path such as ``("branches", 0, "include", 1)``
    to its line in the file.
    """

    manifest: Manifest
    path: Path
    base_dir: Path
    digest: str
    display: str = DEFAULT_MANIFEST
    locations: Mapping[Loc, int] = field(default_factory=dict, repr=False, compare=False)
    #: Every server of the file, also when a run is narrowed to some (``--server``): a build must see none of their
    #: credentials, whichever servers the run talks to.
    all_servers: Mapping[str, ServerConfig] = field(default_factory=dict, repr=False, compare=False)
    #: Every branch of the file, also when a run is narrowed: a code set file may hold each of them.
    all_branches: tuple[BranchConfig, ...] = field(default=(), repr=False, compare=False)

    @property
    def every_server(self) -> Mapping[str, ServerConfig]:
        """The servers of the whole file (:attr:`all_servers`), or of the manifest when it was made in memory."""
        return self.all_servers or self.manifest.servers

    @property
    def every_branch(self) -> tuple[BranchConfig, ...]:
        """The branches of the whole file (:attr:`all_branches`), or of the manifest when it was made in memory."""
        return self.all_branches or tuple(self.manifest.branches)

    def where(self, loc: Loc) -> str:
        """``gitops.yaml:12: branches[0].include[1]`` (the line of the nearest key that exists)."""
        return f"{self.display}:{line_of(self.locations, loc)}: {format_loc(loc)}"


def deployed_names(config: BranchConfig) -> set[str]:
    """The server branches a manifest branch may be deployed to: itself, and its standby (blue/green)."""
    names = {config.branch}
    if config.verify is not None and config.verify.rollback == "standby" and config.verify.standby:
        names.add(config.verify.standby)
    return names
