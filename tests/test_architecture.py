"""The house's import rules (docs/architecture.md, "The import rule"), checked over gitops/'s source.

- No import circle between gitops' modules, counting imports made inside functions: a circle that only a deferred
  import keeps from failing at start-up is still a circle for a reader.
- An import inside a function is allowed only at a boundary the architecture document names: each such import is
  marked ``# noqa: PLC0415 (boundary: NAME)`` and NAME appears in the document's table of boundaries. ruff's PLC0415
  refuses any unmarked one; this test refuses a mark whose boundary the document does not name.
- The layers point one way: the pure core imports no edge, app or front end; the session imports no use case.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gitops"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
BOUNDARY_MARK = re.compile(r"#\s*noqa:\s*PLC0415\s*\(boundary:\s*([^)]+)\)")


def _module_names() -> dict[str, Path]:
    names: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


MODULES = _module_names()


def _targets(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        package = package[: len(package) - node.level + 1]
        base = ".".join([*package, base] if base else package)
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]


def _owner(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(module: str) -> set[str]:
    """Every gitops module ``module`` imports, at its top or in a function (not under ``TYPE_CHECKING``)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if _is_type_checking(node):
            skipped.update(id(inner) for inner in ast.walk(node))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in skipped:
            for target in _targets(module, path, node):
                owner = _owner(target)
                # A package's __init__ re-exporting its modules is not a dependency of theirs.
                if (
                    owner
                    and owner != module
                    and not (MODULES[owner].name == "__init__.py" and module.startswith(owner))
                ):
                    found.add(owner)
    return found


GRAPH = {module: _imports(module) for module in MODULES}


def _circles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = 0
    for start in sorted(GRAPH):
        if start in index:
            continue
        work = [(start, iter(sorted(GRAPH[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(GRAPH[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_no_import_circles() -> None:
    assert _circles() == []


def test_the_circle_finder_finds_a_circle() -> None:
    # The finder itself, on a graph with one circle and one tail: the test above would pass on a broken finder.
    saved = dict(GRAPH)
    try:
        GRAPH.clear()
        GRAPH.update({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
        assert _circles() == [["a", "b", "c"]]
    finally:
        GRAPH.clear()
        GRAPH.update(saved)


def _boundary_marks() -> list[tuple[str, str]]:
    """Each line of gitops/ that mentions PLC0415, as (file:line, the boundary it names or "")."""
    marks = []
    for path in sorted(MODULES.values()):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if "PLC0415" in line:
                match = BOUNDARY_MARK.search(line)
                marks.append((f"{path.relative_to(ROOT)}:{number}", match.group(1).strip() if match else ""))
    return marks


def test_every_deferred_import_sits_at_a_named_boundary() -> None:
    named = set(re.findall(r"^\| \*\*([^*]+)\*\* \|", ARCHITECTURE.read_text(encoding="utf-8"), flags=re.MULTILINE))
    assert named, "docs/architecture.md lists no boundaries"
    unnamed = [(where, name) for where, name in _boundary_marks() if name not in named]
    assert unnamed == []


def test_layers_point_one_way() -> None:
    def imports_of(prefix: str) -> set[tuple[str, str]]:
        return {(m, t) for m, targets in GRAPH.items() if m.startswith(prefix) for t in targets}

    upward = {
        (m, t)
        for m, t in imports_of("gitops.core")
        if t.startswith(
            ("gitops.edges", "gitops.app", "gitops.cli", "gitops.github", "gitops.render", "gitops.standin")
        )
    }
    assert upward == set()
    use_cases = {
        t
        for m, t in imports_of("gitops.app.session")
        if t.startswith("gitops.app.") and t not in {"gitops.app.options", "gitops.app.targets"}
    }
    assert use_cases == set()
