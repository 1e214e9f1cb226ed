"""Pure factories for the unit tests of the core: manifests, code sets, server views and budget facts as values.

Nothing here touches a file, a process, git or the network: a :class:`LoadedManifest` is built from a dict (the
model validates it exactly as ``load_manifest`` would, cross-field rules included), and the server's state is a
:class:`RemoteView` built from code sets.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from gitops.config.manifest import LoadedManifest, manifest_digest, manifest_from_data
from gitops.core.budget import BudgetFacts, WindowState
from gitops.core.codeset import CodeSet, Module
from gitops.core.local import LocalBranch, LocalCode, SourceInfo
from gitops.core.plan import Plan
from gitops.core.planbuild import build_plan
from gitops.core.remote import BranchInfo, ModuleFacts, Provenance, RemoteBranch, RemoteView

#: A fixed "now" (2027-01-15 08:00 UTC): every time in these tests is relative to it.
NOW = 1_800_000_000.0

#: Where the factories pretend the manifest lives (never read: nothing here touches the disk).
MANIFEST_PATH = Path("/project/gitops.yaml")

Contents = Mapping[str, str | bytes]


def code(modules: Contents) -> CodeSet:
    """A code set from ``{name: text or bytes}`` (bytes make a binary module)."""
    return CodeSet.of([Module(n, binary=v) if isinstance(v, bytes) else Module(n, text=v) for n, v in modules.items()])


def branch(server: str = "local", name: str = "main", **options: Any) -> dict[str, Any]:
    """One ``branches`` entry of a manifest, as YAML would give it."""
    return {"server": server, "branch": name, **options}


def manifest(*branches: dict[str, Any], servers: Mapping[str, Any] | None = None, **top: Any) -> LoadedManifest:
    """A validated manifest from plain data (defaults: one server ``local`` with a token, one branch ``main``)."""
    servers = servers or {"local": {"url": "http://127.0.0.1:21025", "token_env": "SCREEPS_TOKEN"}}
    model = manifest_from_data(
        {"version": 1, "servers": dict(servers), "branches": list(branches) or [branch()], **top}
    )
    return LoadedManifest(
        manifest=model,
        path=MANIFEST_PATH,
        base_dir=MANIFEST_PATH.parent,
        digest=manifest_digest(model),
        display="gitops.yaml",
    )


def local(
    *entries: tuple[str, str, Contents],
    warnings: list[str] | None = None,
    source: SourceInfo | None = None,
) -> LocalCode:
    """The repository's code: ``(server, branch, {name: content})`` per branch, in manifest order."""
    branches = [
        LocalBranch(server, name, code(modules), {m: f"src/{m}.js" for m in modules})
        for server, name, modules in entries
    ]
    return LocalCode(
        branches=branches,
        source=source or SourceInfo(kind="ref", ref="main", commit="1a2b3c4d5e6f7a8b9c0d", dirty=None),
        warnings=list(warnings or []),
    )


def on_server(
    name: str,
    modules: Contents | None,
    *,
    how: Provenance = "download",
    ago: float = 60.0,
    with_text: bool = True,
) -> RemoteBranch:
    """A branch as the server holds it (``modules=None``: it does not exist). ``with_text=False`` is what the
    ledger knows: digests and sizes, no content."""
    if modules is None:
        return RemoteBranch.missing(name, NOW - ago, how)
    seen = RemoteBranch.from_code(name, code(modules), NOW - ago, how)
    if with_text:
        return seen
    assert seen.modules is not None
    facts = {n: ModuleFacts(f.name, f.digest, f.size, f.is_binary, None) for n, f in seen.modules.items()}
    return RemoteBranch(name, facts, seen.digest, seen.learnt_at, how)


def view(
    server: str = "local",
    *branches: RemoteBranch | tuple[str, None],
    listed: list[BranchInfo] | None = None,
) -> RemoteView:
    """What is known of one server: its branches (``(name, None)``: nothing known) and, optionally, its branch
    list (``None``: not fetched)."""
    known: dict[str, RemoteBranch | None] = {}
    for entry in branches:
        if isinstance(entry, RemoteBranch):
            known[entry.name] = entry
        else:
            known[entry[0]] = None
    return RemoteView(server, None if listed is None else tuple(listed), known, NOW - 60)


def listed(*names: str, world: str | None = None, sim: str | None = None) -> list[BranchInfo]:
    """A branch list as ``GET /api/user/branches`` gives it, with the active world and sim branches."""
    return [BranchInfo(n, active_world=n == world, active_sim=n == sim) for n in names]


def window(
    endpoint: str,
    limit: int,
    remaining: int,
    *,
    reset_in: float = 3600,
    source: Literal["headers", "counted"] = "headers",
) -> WindowState:
    """A known rate-limit window that resets ``reset_in`` seconds after :data:`NOW`."""
    return WindowState(endpoint, limit, remaining, NOW + reset_in, NOW - 10, source)


def facts(
    *windows: WindowState,
    unlimited_until: float | None = None,
    reserve: Mapping[str, int] | None = None,
    limited: bool = True,
) -> BudgetFacts:
    """Budget facts of one server from its known windows."""
    return BudgetFacts({w.endpoint: w for w in windows}, unlimited_until, reserve, limited)


def plan(
    loaded: LoadedManifest,
    code_: LocalCode,
    *views: RemoteView,
    budgets: Mapping[str, BudgetFacts] | None = None,
    refresh: str = "always",
) -> Plan:
    """``build_plan`` at :data:`NOW` with the given server views."""
    return build_plan(
        loaded=loaded,
        local=code_,
        remote={v.server: v for v in views},
        budgets=dict(budgets or {}),
        refresh=refresh,
        now=NOW,
    )
