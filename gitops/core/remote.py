"""What the tool knows of a server, and the two views of it that planning and applying get.

Planning gets a :class:`RemoteReader` (read-only); applying gets a :class:`RemoteWriter`. The HTTP client
(``gitops.edges.client.ServiceClient``) implements both; these types are pure data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from gitops.config.manifest import ActiveName
from gitops.core.codeset import CodeSet, WireModule

#: How the tool learnt the state of a branch: a download now, its own upload (from the ledger), or the ledger.
Provenance = Literal["download", "own-upload", "ledger"]


@dataclass(frozen=True, slots=True)
class BranchInfo:
    """A branch of the account, as ``GET /api/user/branches`` lists it."""

    name: str
    active_world: bool = False
    active_sim: bool = False

    def is_active(self, which: ActiveName) -> bool:
        return self.active_world if which == "world" else self.active_sim


@dataclass(frozen=True, slots=True)
class ModuleFacts:
    """What is known of one module on the server: always digest and size, the content when downloaded."""

    name: str
    digest: str
    size: int
    is_binary: bool
    text: str | None = None


@dataclass(frozen=True, slots=True)
class RemoteBranch:
    """The server's state of one branch. ``modules`` is ``None`` when the branch does not exist."""

    name: str
    modules: Mapping[str, ModuleFacts] | None
    digest: str | None
    learnt_at: float
    how: Provenance

    @property
    def exists(self) -> bool:
        return self.modules is not None

    @classmethod
    def missing(cls, name: str, learnt_at: float, how: Provenance = "download") -> RemoteBranch:
        return cls(name, None, None, learnt_at, how)

    @classmethod
    def from_code(cls, name: str, code: CodeSet, learnt_at: float, how: Provenance = "download") -> RemoteBranch:
        facts = {m.name: ModuleFacts(m.name, m.digest, m.size, m.is_binary, m.text) for m in code.modules.values()}
        return cls(name, facts, code.digest, learnt_at, how)


@dataclass(frozen=True, slots=True)
class RemoteView:
    """What the planner knows of one server: its branch list (``None``: unknown) and the branches it needs.

    ``branches`` maps each branch name of the manifest to its state, or to ``None`` when nothing is known of it
    (planning from an empty ledger).
    """

    server: str
    branch_list: tuple[BranchInfo, ...] | None
    branches: Mapping[str, RemoteBranch | None]
    learnt_at: float | None = None

    def info(self, name: str) -> BranchInfo | None:
        for entry in self.branch_list or ():
            if entry.name == name:
                return entry
        return None


class RemoteReader(Protocol):
    """Read-only access to one server account."""

    def list_branches(self) -> list[BranchInfo]:
        """All branches of the account with their active flags."""
        ...

    def get_code(self, branch: str) -> CodeSet | None:
        """The modules of ``branch``, or ``None`` when the branch does not exist."""
        ...


class RemoteWriter(RemoteReader, Protocol):
    """Read and write access to one server account."""

    def upload_code(self, branch: str, modules: Mapping[str, WireModule]) -> None:
        """Replace every module of ``branch`` (``POST /api/user/code``)."""
        ...

    def clone_branch(self, new_name: str, source: str | None = None) -> None:
        """Create ``new_name`` (``POST /api/user/clone-branch``), empty when ``source`` is ``None``."""
        ...

    def set_active_branch(self, branch: str, which: ActiveName) -> None:
        """Make ``branch`` the active branch for the world or the simulation."""
        ...
