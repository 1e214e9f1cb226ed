"""The manifest (``gitops.yaml``): servers, branches, and the module globs that make up each branch.

The whole schema is readable here. ``schemas/gitops.schema.json`` is generated from these models
(``gitops schema``); a test keeps the two in sync.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ActiveName = Literal["world", "sim"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerConfig(_Model):
    """A game server and how to authenticate to it. Credentials are only ever named, never written here."""

    url: str = Field(
        description="Base URL, with any path prefix: https://screeps.com, https://screeps.com/ptr, "
        "https://screeps.com/season, http://127.0.0.1:21025."
    )
    token_env: str | None = Field(None, description="Name of the environment variable that holds the token.")
    username_env: str | None = Field(
        None, description="Private servers: environment variable holding the user name or e-mail."
    )
    password_env: str | None = Field(
        None, description="Private servers: environment variable holding the password."
    )
    credentials: str | None = Field(
        None, description="Name of a server entry in the screepers unified credentials file (.screeps.yaml)."
    )


class Naming(_Model):
    """How a file's path under the branch root becomes a module name."""

    separator: Literal["/", "."] = Field(
        "/", description="What a folder boundary becomes in the module name: 'role/harvester' or 'role.harvester'."
    )
    strip_suffixes: list[str] = Field(
        default_factory=lambda: [".js"], description="File suffixes removed from module names."
    )


class BranchConfig(_Model):
    """One code branch on one server, and the files that make it up."""

    server: str = Field(description="Key of an entry under 'servers'.")
    branch: str = Field(description="Branch name on the server.")
    root: str = Field(".", description="Folder (relative to the manifest) that module names are relative to.")
    include: list[str] = Field(
        default_factory=lambda: ["**/*.js"], description="Globs (with **) of files under root that are modules."
    )
    exclude: list[str] = Field(default_factory=list, description="Globs of files under root to leave out.")
    binary: list[str] = Field(
        default_factory=lambda: ["**/*.wasm"],
        description="Globs of included files sent as binary modules ({'binary': base64}).",
    )
    naming: Naming = Field(default_factory=Naming)  # type: ignore[arg-type]
    activate: list[ActiveName] = Field(
        default_factory=list, description="Make this branch the active one for the world and/or the simulation."
    )
    remote_only: Literal["remove", "keep"] = Field(
        "remove",
        description="Modules on the server but not in the repository: 'remove' them (default; an upload replaces "
        "the branch) or 'keep' them (re-sent with every upload).",
    )


class BudgetConfig(_Model):
    """How the tool spends the token's rate limits."""

    reserve: dict[str, int] = Field(
        default_factory=dict,
        description="Requests kept back for the person, per endpoint ('POST /api/user/code': 20).",
    )
    trust_own_upload_seconds: int = Field(
        600,
        ge=0,
        description="With --refresh=auto, a branch this tool uploaded less than this long ago is planned from "
        "the ledger instead of downloaded.",
    )


class Manifest(_Model):
    """The whole manifest."""

    version: Literal[1] = Field(description="Manifest format version; 1.")
    servers: dict[str, ServerConfig]
    branches: list[BranchConfig]
    budget: BudgetConfig = Field(default_factory=BudgetConfig)  # type: ignore[arg-type]
