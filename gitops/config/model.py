"""The manifest as the rest of the tool uses it: frozen stdlib dataclasses, without pydantic and without YAML.

:mod:`gitops.config.schema` holds the pydantic models that *validate* a manifest (every rule, every message, the
JSON Schema); a validated model is converted into these classes, which are all that ``app``, ``core``, ``edges``
and the front ends ever see. A manifest found in the validated-manifest cache (:mod:`gitops.config.manifestcache`)
is built straight into them, so a run whose manifest was validated before imports neither pydantic nor pyyaml.

Why the fields are written twice (here and in ``schema.py``) rather than one set being derived from the other:
the pydantic side carries what only validation needs (descriptions, JSON Schema extras, validators), and deriving
the models from these dataclasses would route the schema through a different generator, putting the byte-identical
``schemas/gitops.schema.json`` at risk; deriving these from the models would import pydantic. Instead one test
(``tests/test_manifest_model.py``) compares both sides class by class — field names, their order, their types
(with the validators' ``Annotated`` metadata removed) and their defaults — so they cannot drift apart.

Defaults are the models' exactly: ``VerifyConfig.timeout`` is ``120`` (an ``int``, as pydantic keeps an
unvalidated default), because the manifest's digest is taken over these values and a saved plan compares it.
A copy with one field changed is :func:`dataclasses.replace`; a class built directly (tests, ``gitops init``)
checks nothing: :func:`gitops.config.manifest.manifest_from_data` validates data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from gitops.config.reading import Loc, format_loc, line_of

__all__ = [
    "DEFAULT_MANIFEST",
    "ActiveName",
    "BranchConfig",
    "BudgetConfig",
    "BuildCommand",
    "LoadedManifest",
    "Manifest",
    "Naming",
    "RequiresConfig",
    "ServerConfig",
    "VerifyConfig",
    "deployed_names",
]

DEFAULT_MANIFEST = "gitops.yaml"

ActiveName = Literal["world", "sim"]
#: A build command: a string runs through the shell (``sh -c``), a list is the program and its arguments.
BuildCommand = str | list[str]


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """A game server and how to authenticate to it (the variables' names, never their values)."""

    url: str
    token_env: str | None = None
    username_env: str | None = None
    password_env: str | None = None
    credentials: str | None = None
    compress: Literal["auto", "always", "never"] = "auto"


@dataclass(frozen=True, slots=True)
class Naming:
    """How a file's path under the branch root becomes a module name."""

    separator: str = "/"
    strip_suffixes: list[str] = field(default_factory=lambda: [".js"])


@dataclass(frozen=True, slots=True)
class RequiresConfig:
    """The check of literal require('name') calls against the modules the branch will hold."""

    check: bool = True
    ignore: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class VerifyConfig:
    """Watch the game's console after apply and judge whether the new code runs."""

    ticks: int = 10
    error_share: float = 0.5
    timeout: float = 120
    on_failure: Literal["report", "rollback"] = "report"
    rollback: Literal["restore", "standby"] = "restore"
    standby: str | None = None
    fail_on: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class BranchConfig:
    """One code branch on one server, and the files that make it up."""

    server: str
    branch: str
    root: str = "."
    include: list[str] = field(default_factory=lambda: ["**/*.js"])
    exclude: list[str] = field(default_factory=list)
    binary: list[str] = field(default_factory=lambda: ["**/*.wasm"])
    naming: Naming = field(default_factory=Naming)
    activate: list[ActiveName] = field(default_factory=list)
    remote_only: Literal["remove", "keep"] = "remove"
    build: BuildCommand | None = None
    source_maps: Literal["wrap", "raw", "omit"] = "wrap"
    requires: RequiresConfig = field(default_factory=RequiresConfig)
    verify: VerifyConfig | None = None
    #: Regular expressions matched against whole lines: lines the comparison with the server ignores (never the
    #: upload); see :func:`gitops.core.diff.differ_only_in`.
    ignore_lines: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class BudgetConfig:
    """How the tool spends the token's rate limits."""

    reserve: dict[str, int] = field(default_factory=dict)
    trust_own_upload_seconds: int = 600


@dataclass(frozen=True, slots=True)
class Manifest:
    """The whole manifest (gitops.yaml)."""

    version: Literal[1]
    servers: dict[str, ServerConfig]
    branches: list[BranchConfig]
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    build: BuildCommand | None = None


#: Every class of the manifest, by name (the validator converts its models into the class of the same name).
CLASSES: Mapping[str, type] = {
    cls.__name__: cls
    for cls in (ServerConfig, Naming, RequiresConfig, VerifyConfig, BranchConfig, BudgetConfig, Manifest)
}


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

    @property
    def every_server(self) -> Mapping[str, ServerConfig]:
        """The servers of the whole file (:attr:`all_servers`), or of the manifest when it was made in memory."""
        return self.all_servers or self.manifest.servers

    def where(self, loc: Loc) -> str:
        """``gitops.yaml:12: branches[0].include[1]`` (the line of the nearest key that exists)."""
        return f"{self.display}:{line_of(self.locations, loc)}: {format_loc(loc)}"


def deployed_names(config: BranchConfig) -> set[str]:
    """The server branches a manifest branch may be deployed to: itself, and its standby (blue/green)."""
    names = {config.branch}
    if config.verify is not None and config.verify.rollback == "standby" and config.verify.standby:
        names.add(config.verify.standby)
    return names
