"""What a plan or apply imports before its first request, and what ``gitops --help`` imports (issue 23).

Every module on this list costs start-up time that a deploy pays before the first byte leaves; the rest of a plan
(the plan models, rendering, applying) is imported by the local read's worker while the servers answer
(``gitops.app.planning.AFTER_THE_SERVERS``), and the console's socket library only by verify and ``console``.
Each check runs in a fresh interpreter, so that modules other tests imported do not count.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from gitops.app.planning import AFTER_THE_SERVERS, BEFORE_THE_WORKER, CLIENT
from gitops.config.manifest import load_manifest

ROOT = Path(__file__).resolve().parent.parent


def _imported_after(statements: str) -> set[str]:
    code = f"import sys\n{statements}\nimport json\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))  # the last line: what came before is the command's output


def test_the_plan_and_apply_commands_leave_the_plan_models_to_the_worker() -> None:
    before = ["gitops.cli", "gitops.cli.apply", "gitops.cli.plan", "gitops.app.planning", *BEFORE_THE_WORKER]
    loaded = _imported_after("\n".join(f"import {name}" for name in before))
    assert "gitops.config.manifest" in loaded  # the check sees the real path (it would pass vacuously otherwise)
    late_modules = (
        *AFTER_THE_SERVERS,
        "gitops.core.diff",
        "gitops.core.drift",
        "gitops.core.health",
        "tenacity",
        "zlib_ng",
    )
    for late in (*late_modules, "websockets", "gitops.edges.socket"):
        assert late not in loaded, f"{late} is imported before the first request"


def test_the_parent_of_a_forked_read_takes_its_code_without_the_glob_library() -> None:
    """The parent unpickles the code its child read, and plans with it: it imports what the code is made of
    (``gitops.core.local``), never the glob matching or the requires check that made it (~12 ms of CPU while the
    servers answer)."""
    import pickle

    from gitops.core.codeset import CodeSet, Module
    from gitops.core.local import LocalBranch, LocalCode, SourceInfo

    local = LocalCode(
        [
            LocalBranch(
                "s", "main", CodeSet.of([Module("main", text="x")]), {"main": "src/main.js"}, {"main": "javascript"}
            )
        ],
        SourceInfo("worktree", None, None, None),
        [],
    )
    names = ["gitops.cli", "gitops.cli.apply", "gitops.app.planning", *BEFORE_THE_WORKER, *AFTER_THE_SERVERS]
    loaded = _imported_after(
        "\n".join(f"import {name}" for name in names)
        + f"\nimport pickle\nlocal = pickle.loads(bytes.fromhex({pickle.dumps(local).hex()!r}))"
        + "\nassert local.branches[0].code.modules['main'].text == 'x'"
    )
    assert "gitops.core.local" in loaded  # the check sees the real path
    for matching in ("wcmatch", "bracex", "gitops.core.requires"):
        assert matching not in loaded, f"the parent of a forked read imports {matching}"


def test_help_imports_no_models_and_no_http() -> None:
    loaded = _imported_after("from gitops.cli import cli\ntry:\n    cli(['--help'])\nexcept SystemExit:\n    pass")
    assert "click" in loaded
    for heavy in ("pydantic", "httpx", "yaml", "gitops.config.manifest", "websockets"):
        assert heavy not in loaded, f"gitops --help imports {heavy}"


def test_a_plan_whose_manifest_was_validated_before_imports_no_validator(tmp_path: Path) -> None:
    """The manifest cache (``gitops/config/manifestcache.py``): with the manifest validated once, what a plan or an
    apply imports before its first request holds no validator (its pydantic models). pyyaml is imported: the file
    is parsed on every run, and the entry checked against it (``gitops/config/cachecheck.py``, issue 37)."""
    manifest = tmp_path / "gitops.yaml"
    manifest.write_bytes((ROOT / "examples" / "multi-server" / "gitops.yaml").read_bytes())
    env = {"GITOPS_CACHE_DIR": str(tmp_path / "cache")}
    load_manifest(manifest, env)  # validated once, here
    before = ["gitops.cli", "gitops.cli.apply", "gitops.cli.plan", "gitops.app.planning", *BEFORE_THE_WORKER]
    # And what the worker imports meanwhile, and the local read: no pydantic anywhere on the way (issue 23).
    worker = [*AFTER_THE_SERVERS, "gitops.edges.sources", "gitops.app.headstart.sidereads"]
    loaded = _imported_after(
        "\n".join(f"import {name}" for name in [*before, *worker])
        + f"\nfrom pathlib import Path\nfrom gitops.config.manifest import load_manifest\n"
        f"load_manifest(Path({str(manifest)!r}), {env!r})"
    )
    assert "gitops.config.manifestcache" in loaded  # the check sees the real path
    assert "gitops.config.cachecheck" in loaded
    for heavy in ("gitops.config.validation", "pydantic", "annotated_types"):
        assert heavy not in loaded, f"a plan with a cached manifest imports {heavy}"


def test_a_plan_whose_lists_were_read_ahead_imports_no_http_client() -> None:
    """With every branch list read on the early connection (``HeadStart.listed_ahead``), a plan that asks nothing
    more imports neither httpx nor the client: ~60 ms of a no-op deploy (issue 23). What the plan and its apply
    import on the way, the worker's share included."""
    before = ["gitops.cli", "gitops.cli.apply", "gitops.cli.plan", "gitops.app.planning"]
    ahead = [name for name in BEFORE_THE_WORKER if name != CLIENT]
    on_the_way = ["gitops.app.session", "gitops.edges.early", "gitops.edges.jsontext", "gitops.edges.bodies"]
    loaded = _imported_after("\n".join(f"import {name}" for name in [*before, *ahead, *on_the_way, *AFTER_THE_SERVERS]))
    assert CLIENT in BEFORE_THE_WORKER  # the check sees the real list
    assert "gitops.edges.ledger" in loaded
    for heavy in ("httpx", "httpcore", "h11", CLIENT, "gitops.edges.http"):
        assert heavy not in loaded, f"a plan whose lists were read ahead imports {heavy}"


def test_the_early_tls_context_imports_no_http_client() -> None:
    """Over https:// the early connection makes the client's TLS context before its handshake: without httpx, so
    that a plan whose lists were read ahead still imports no HTTP client (issue 40)."""
    loaded = _imported_after("from gitops.edges.tls import trust_context_early\ntrust_context_early()")
    assert "ssl" in loaded
    for heavy in ("httpx", "httpcore", "h11"):
        assert heavy not in loaded, f"the early TLS context imports {heavy}"


def test_no_module_of_the_package_imports_back_a_module_that_imports_it() -> None:
    """Two threads may import at once (the local read's worker, and a thread making the HTTP client when a list read
    ahead was not plain): without import cycles at module level, neither can see the other's module half made."""
    modules: dict[str, set[str]] = {}
    for path in (ROOT / "gitops").rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        modules[name] = _top_level_imports(ast.parse(path.read_text(encoding="utf-8")).body)
    graph = {name: {d for d in deps if d in modules and d != name} for name, deps in modules.items()}
    assert "gitops.app.session" in graph["gitops.app.planning"]  # it sees the imports
    assert _a_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]  # and would see a cycle
    cycle = _a_cycle(graph)
    assert cycle is None, f"modules that import each other at their top: {' -> '.join(cycle or [])}"


def _top_level_imports(body: list[ast.stmt]) -> set[str]:
    found: set[str] = set()
    for node in body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.If | ast.Try):
            found |= _top_level_imports([*node.body, *node.orelse])
            if isinstance(node, ast.Try):
                found |= _top_level_imports([s for handler in node.handlers for s in handler.body])
                found |= _top_level_imports(node.finalbody)
    return found


def _a_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (a path that comes back to its start), or ``None``: a depth-first search."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)) is not None:
            return found
    return None


def test_bodies_made_ahead_have_the_client_imported_beside_the_wait(tmp_path: Path) -> None:
    """``apply --yes`` whose local read made upload bodies (code the ledger says the server lacks) imports the HTTP
    client while it waits: its list may have been read without one, and the upload needs it. No body, no import."""
    manifest = tmp_path / "gitops.yaml"
    manifest.write_bytes((ROOT / "examples" / "multi-server" / "gitops.yaml").read_bytes())
    setup = (
        "from pathlib import Path\n"
        "from gitops.app.headstart.localread import UploadBody\n"
        "from gitops.app.headstart.start import HeadStart\n"
        "from gitops.app.options import Options\n"
        "from gitops.app.session import open_session\n"
        f"options = Options(manifest=Path({str(manifest)!r}), env={{}}, state_dir=Path({str(tmp_path / 's')!r}))\n"
        "with open_session(options) as s:\n"
        "    deflate, wanted = HeadStart(s).deflate_ahead()\n"
        "    assert wanted, 'no body is wanted: the check would pass vacuously'\n"
        "    deflate(BODIES)\n"
    )
    without = _imported_after(setup.replace("BODIES", "[]"))
    assert "gitops.app.session" in without
    assert CLIENT not in without
    made = "[UploadBody(*next(iter(wanted)), 'digest', lambda: b'{}')]"
    assert CLIENT in _imported_after(setup.replace("BODIES", made))
