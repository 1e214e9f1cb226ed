"""The house's rules (docs/architecture.md, "The layers" and "The import rule"), checked over gitops/'s source.

- No import circle between gitops' modules, counting imports made inside functions: a circle that only a deferred
  import keeps from failing at start-up is still a circle for a reader.
- An import inside a function is allowed only at a boundary the architecture document names: each such import is
  marked ``# noqa: PLC0415 (boundary: NAME)`` and NAME appears in the document's table of boundaries. ruff's PLC0415
  refuses any unmarked one; this test refuses a mark whose boundary the document does not name.
- The layer table, read from the document: each folder imports only what its row's "may import" names (type-only
  imports count: a type named is a dependency of the reader), the foundation row is open to every layer, and every
  module of gitops/ has a row. The session imports no use case.
- The rooms: no module over 600 lines, no function or method whose body is over 80 lines, no class name defined
  twice (private ones included).

Known exceptions that other branches of issue 47 remove each sit in one named constant below; the lead empties it
when the branches are merged, and the test then holds without exceptions.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
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


#: At most this many imports inside functions in gitops/ (issue 47): each boundary is crossed once per place.
MOST_DEFERRED_IMPORTS = 30


def _deferred_imports(source: str, where: str) -> list[str]:
    """Each import statement inside a function or method of ``source`` (nested ones counted once), as file:line."""
    found: dict[int, int] = {}  # by the statement's identity: a nested function's imports are walked twice
    for function in ast.walk(ast.parse(source)):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            found |= {
                id(node): node.lineno for node in ast.walk(function) if isinstance(node, ast.Import | ast.ImportFrom)
            }
    return [f"{where}:{line}" for line in sorted(found.values())]


def test_at_most_30_imports_inside_functions() -> None:
    deferred = [
        found
        for path in sorted(MODULES.values())
        for found in _deferred_imports(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
    ]
    assert len(deferred) > 10  # the count sees the package's deferred imports
    assert len(deferred) <= MOST_DEFERRED_IMPORTS, "\n".join(deferred)


def test_the_import_count_sees_imports_in_functions_methods_and_nested_ones_only() -> None:
    source = (
        "import os\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    import json\n"
        "def f():\n"
        "    import a, b; import c\n"
        "    def g():\n"
        "        from c import d\n"
        "class K:\n"
        "    async def m(self):\n"
        "        from . import e\n"
    )
    assert _deferred_imports(source, "made-up.py") == ["made-up.py:6", "made-up.py:6", "made-up.py:8", "made-up.py:11"]


def test_the_session_imports_no_use_case() -> None:
    use_cases = {
        target
        for target in GRAPH["gitops.app.session"]
        if target.startswith("gitops.app.") and target not in {"gitops.app.options", "gitops.app.targets"}
    }
    assert use_cases == set()


# --- the layer table --------------------------------------------------------------------------------------------

_TABLE_HEAD = "| folder | layer | may import | never does |"
_TOKEN = re.compile(r"`([^`]+)`(?:\s+(models|constants)\b)?")
#: What "`config/` models" means: the manifest's classes, defined in config/model.py and re-exported (with the
#: helpers that read them) by config/manifest.py.
_MODELS = ("gitops.config.model", "gitops.config.manifest")
_CONSTANT = re.compile(r"^[A-Z][A-Z0-9_]*$")


def _dotted(token: str) -> str:
    """``gitops/edges/clock.py``, ``edges/clock.py``, ``gitops/__init__.py`` or ``core/`` as a module name, or a
    folder's as ``gitops.core.`` (the trailing dot: every module under it)."""
    token = token.strip().removeprefix("gitops/")
    if token.endswith("/"):
        return "gitops." + token.replace("/", ".")
    path = token.removesuffix(".py").removesuffix("__init__")
    return ".".join(["gitops", *(part for part in path.split("/") if part)])


@dataclass(frozen=True)
class Row:
    """One row of the layer table: the modules it holds, and what it may import (``None``: everything)."""

    holds: tuple[str, ...]
    layer: str
    #: Module or package name -> "" (all of it), "models" or "constants".
    may: dict[str, str] | None


def _rows(text: str) -> list[Row]:
    lines = text.splitlines()
    start = lines.index(_TABLE_HEAD) + 2  # after the head and its rule
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        folder, layer, may, _never = (cell.strip() for cell in line.strip("|").split("|"))
        holds = tuple(_dotted(token) for token, _ in _TOKEN.findall(folder))
        allowed = None if may == "everything" else {_dotted(token): kind for token, kind in _TOKEN.findall(may)}
        rows.append(Row(holds, layer, allowed))
    return rows


ROWS = _rows(ARCHITECTURE.read_text(encoding="utf-8"))


def _within(module: str, name: str) -> bool:
    """Whether ``module`` is the module ``name``, or under the folder ``name`` (``gitops.core.``)."""
    return module.startswith(name) or module == name.removesuffix(".") if name.endswith(".") else module == name


def _row_of(module: str) -> Row | None:
    """The row holding ``module``: the one naming it most closely (a file before its folder)."""
    matches = [(len(name), row) for row in ROWS for name in row.holds if _within(module, name)]
    return max(matches, key=lambda match: match[0])[1] if matches else None


def _names_imported(module: str) -> dict[str, set[str]]:
    """Per gitops module ``module`` imports (type-only imports too), the names it takes (``*``: the module itself)."""
    path = MODULES[module]
    names: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import | ast.ImportFrom):
            for target, alias in zip(_targets(module, path, node), node.names, strict=True):
                owner = _owner(target)
                if owner and owner != module:
                    # The module itself (``import a.b``, ``from a import b``), or a name defined in it.
                    whole = isinstance(node, ast.Import) or (owner == target and target.endswith(f".{alias.name}"))
                    taken = "*" if whole else alias.name
                    names.setdefault(owner, set()).add(taken)
    return names


IMPORTS = {module: _names_imported(module) for module in MODULES}


def _allowed(row: Row, target: str, names: set[str]) -> bool:
    if row.may is None or any(_within(target, name) for name in row.holds):
        return True
    if any(_within(target, name) for other in ROWS if other.layer.startswith("the foundation") for name in other.holds):
        return True
    for name, kind in row.may.items():
        if not _within(target, name):
            continue
        if kind == "models" and target in _MODELS:
            return True
        if kind == "constants" and all(_CONSTANT.match(taken) for taken in names):
            return True
        if kind == "":
            return True
    return False


def _layer_violations(imports: dict[str, dict[str, set[str]]]) -> set[tuple[str, str]]:
    found = set()
    for module, targets in imports.items():
        row = _row_of(module)
        assert row is not None, f"{module} has no row in the layer table"
        found |= {(module, target) for target, names in targets.items() if not _allowed(row, target, names)}
    return found


def test_the_layer_table_has_a_row_for_every_module() -> None:
    assert len(ROWS) >= 7, "the layer table of docs/architecture.md was not read"
    assert [m for m in sorted(MODULES) if _row_of(m) is None] == []


def test_every_layer_imports_only_what_its_row_allows() -> None:
    assert _layer_violations(IMPORTS) == set()


def test_the_layer_check_sees_an_arrow_up() -> None:
    # The check itself, on made-up imports: the test above would pass on a check that finds nothing.
    made_up = {
        "gitops.core.plan": {"gitops.app.planning": {"make_plan"}, "gitops.errors": {"PlanFileError"}},
        "gitops.render.deploys": {"gitops.app.status": {"StatusReport"}, "gitops.core.deploys": {"Deploy"}},
        "gitops.config.model": {"gitops.core.endpoints": {"MAX_BRANCHES"}},
        "gitops.config.scaffold": {"gitops.core.layout": {"Layout"}},
        "gitops.core.local": {"gitops.config.manifest": {"BranchConfig"}, "gitops.config.yamlload": {"load"}},
        "gitops.cli.plan": {"gitops.standin.app": {"create_app"}},
    }
    assert _layer_violations(made_up) == {
        ("gitops.core.plan", "gitops.app.planning"),
        ("gitops.render.deploys", "gitops.app.status"),
        ("gitops.config.scaffold", "gitops.core.layout"),
        ("gitops.core.local", "gitops.config.yamlload"),
    }


# --- the rooms ----------------------------------------------------------------------------------------------------

MOST_MODULE_LINES = 600
MOST_FUNCTION_LINES = 80


def test_no_module_over_600_lines() -> None:
    long = {
        path.relative_to(ROOT).as_posix()
        for path in MODULES.values()
        if len(path.read_text(encoding="utf-8").splitlines()) > MOST_MODULE_LINES
    }
    assert long == set()


def _body_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's length as the house counts it: the lines of its body after the docstring, blank lines and
    comments among them included; the signature (a command's many options) and the docstring are not counted."""
    body = function.body
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    end = function.end_lineno or body[-1].lineno
    return end - body[0].lineno + 1


def _long_functions(source: str, where: str) -> list[str]:
    return [
        f"{where}:{node.lineno} {node.name} ({_body_lines(node)} lines)"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _body_lines(node) > MOST_FUNCTION_LINES
    ]


def test_no_function_over_80_lines() -> None:
    long = [
        found
        for path in sorted(MODULES.values())
        for found in _long_functions(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
    ]
    assert long == []


def test_the_function_count_leaves_out_the_signature_and_the_docstring() -> None:
    signature = "def f(\n" + "    a: int,\n" * 30 + ") -> None:\n"
    docstring = '    """' + "words\n" * 20 + '    """\n'
    body = "    x = 1\n" * MOST_FUNCTION_LINES
    assert _long_functions(signature + docstring + body, "made-up.py") == []
    assert _long_functions(signature + docstring + body + "    return None\n", "made-up.py") == [
        "made-up.py:1 f (81 lines)"
    ]


def _classes(source: str, where: str) -> list[tuple[str, str]]:
    return [
        (node.name, f"{where}:{node.lineno}") for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ClassDef)
    ]


def _defined_twice(classes: list[tuple[str, str]]) -> dict[str, list[str]]:
    places: dict[str, list[str]] = {}
    for name, where in classes:
        places.setdefault(name, []).append(where)
    return {name: found for name, found in places.items() if len(found) > 1}


def test_no_class_name_defined_twice() -> None:
    classes = [
        found
        for path in sorted(MODULES.values())
        for found in _classes(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
    ]
    assert _defined_twice(classes) == {}


def test_the_class_check_sees_a_private_class_defined_twice() -> None:
    classes = _classes("class _Read:\n    pass\n", "a.py") + _classes("def f():\n    class _Read: ...\n", "b.py")
    assert _defined_twice(classes) == {"_Read": ["a.py:1", "b.py:2"]}
