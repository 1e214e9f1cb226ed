"""Issue 41: a JavaScript syntax error (``var x = ;``) passed validate, plan and apply and was uploaded. validate and
build now parse every JavaScript module (tree-sitter's grammar); every syntax the game's runtime takes still passes."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from gitops.app import localcode
from gitops.cli import run
from gitops.edges.jssyntax import first_syntax_problem
from gitops.errors import ExitCode
from gitops.standin.testing import ALICE, StandIn
from tests.factories import git, record_calls
from tests.project import Project, edit_on_server, one_branch_project

MANIFEST = """version: 1
servers:
  local: {url: "http://127.0.0.1:9", token_env: SCREEPS_TOKEN}
branches:
  - {server: local, branch: main, root: src, requires: {check: false}}
"""

#: Syntax a Screeps bot uses today (Node.js 10 to 20 runtimes), each of which must parse.
MODERN = [
    "return module.exports;  // a module is a function body in game",
    "const a = b?.c ?? d; a ||= 1; a &&= 2; a ??= 3;",
    "class C extends Creep { #cache = new Map(); static count = 0; static { this.count = 1; } get x() { return 1; } }",
    "async function f() { for await (const x of g()) { await x; } }",
    "const {a, ...rest} = obj; const [b, , c = 2] = list; fn(...args);",
    "const big = 1_000_000n; const re = /a+(?<name>b)/gu; const t = `x ${y} z`;",
    "label: for (const k in o) { if (!k) continue label; }",
    "module.exports.loop = function* () { yield* other(); };",
    "try { x(); } catch { y(); } finally { z(); }",
    "const o = { [key]: 1, method() {}, async *gen() {}, get v() { return 1; } };",
    "if (a) b(); else c()\nlet d = 1\n;[1, 2].forEach(e => e)",
    "x = a / b / c; y = /re/.test(s) ? 1 : 2;",
]
BROKEN = ["var x = ;", "function f( {", "const = 1;", "if (a {\n}", "let s = 'open;"]


@pytest.mark.parametrize("text", MODERN)
def test_modern_javascript_parses(text: str) -> None:
    assert first_syntax_problem(text) is None


@pytest.mark.parametrize("text", BROKEN)
def test_broken_javascript_is_found(text: str) -> None:
    problem = first_syntax_problem(text)
    assert problem is not None
    assert problem.line == 1


def test_the_examples_parse() -> None:
    root = Path(__file__).resolve().parents[2] / "examples"
    files = [p for p in root.rglob("*.js") if "node_modules" not in p.parts]
    assert len(files) >= 5
    for path in files:
        assert first_syntax_problem(path.read_text("utf-8")) is None, path


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "bot"
    (root / "src" / "role").mkdir(parents=True)
    (root / "gitops.yaml").write_text(MANIFEST, "utf-8")
    (root / "src" / "main.js").write_text("module.exports.loop = () => {};\n", "utf-8")
    (root / "src" / "role" / "harvester.js").write_text(
        "// harvest\nmodule.exports.run = (creep) => {\n  creep.say(;\n};\n"
    )
    git(root, "init", "-q", "-b", "main")
    monkeypatch.chdir(root)
    monkeypatch.delenv("GITOPS_MANIFEST", raising=False)
    return root


def test_validate_names_the_module_file_line_and_column(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["validate"]) == ExitCode.LOCAL_CODE
    err = capsys.readouterr().err
    assert "has JavaScript that does not parse (1 module)" in err
    assert "local/main: module 'role/harvester' (src/role/harvester.js) line 3, column" in err
    assert "creep.say(;" in err
    (repo / "src" / "role" / "harvester.js").write_text("module.exports.run = (creep) => creep?.say('hi');\n")
    assert run(["validate"]) == 0


def test_build_out_writes_no_code_set_that_cannot_parse(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "codeset.json"
    assert run(["build", "--out", str(out)]) == ExitCode.LOCAL_CODE
    assert "does not parse" in capsys.readouterr().err
    assert not out.exists()


# --- apply refuses what validate refuses (issue 46, point 3) --------------------------------------------------------


def test_apply_yes_uploads_nothing_when_a_module_it_would_send_does_not_parse(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": "module.exports.loop = () => {};\n", "src/role.js": "var x = ;\n"})
    p.manifest([{"branch": "main", "root": "src"}])
    p.commit()
    for args in (("--yes",), ("--yes", "--ref", "HEAD")):
        result = p.apply(*args)
        assert result.code == ExitCode.LOCAL_CODE, result.err
        assert "has JavaScript that does not parse (1 module)" in result.err
        assert "local/main: module 'role' (src/role.js) line 1, column" in result.err
        assert standin.branch_modules(ALICE, "main") is None  # nothing was sent
    assert p.plan().code == ExitCode.LOCAL_CODE  # the plan shows what apply would refuse


def test_a_deploy_checks_only_the_modules_it_uploads(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module the server already holds as it is is not uploaded anew: it is not judged (the game runs it now),
    while an edited one is."""
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": "module.exports.loop = () => {};\n", "src/role.js": "module.exports = 1;\n"})
    p.manifest([{"branch": "main", "root": "src", "remote_only": "keep"}])
    p.commit()
    assert p.apply("--yes").code == 0
    # remote_only: keep holds the server's own module as it is; the local change alone is checked.
    edit_on_server(standin, "main", {"legacy": "var broken = ;"})
    p.write({"src/role.js": "module.exports = 2;\n"})
    result = p.apply("--yes")
    assert result.code == 0, result.err
    assert standin.branch_modules(ALICE, "main") == {
        "main": "module.exports.loop = () => {};\n",
        "role": "module.exports = 2;\n",
        "legacy": "var broken = ;",
    }
    p.write({"src/role.js": "module.exports = (;\n"})
    result = p.apply("--yes")
    assert result.code == ExitCode.LOCAL_CODE, result.err
    assert "module 'role' (src/role.js) line 1" in result.err
    assert "legacy" not in result.err
    assert (standin.branch_modules(ALICE, "main") or {}).get("role") == "module.exports = 2;\n"


def test_no_deploy_parses_what_it_does_not_upload_nor_a_code_set_already_checked(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = one_branch_project(tmp_path, standin, capsys, monkeypatch)
    parsed = record_calls(monkeypatch, localcode, "syntax_problems")
    assert p.apply("--yes").code == 0
    assert len(parsed) == 1  # the first deploy: its module
    assert p.apply("--yes").code == 0
    assert len(parsed) == 1  # nothing to upload: nothing parsed
    p.write({"src/main.js": "module.exports.loop = () => { return 2; };\n"})
    out = tmp_path / "codeset.json"
    assert run(["build", "--out", str(out), "-m", str(p.root / "gitops.yaml")]) == 0
    assert len(parsed) == 2  # gitops build checks every module before it writes the file
    result = p.apply("--yes", "--codeset", str(out))
    assert result.code == 0, result.err
    assert len(parsed) == 2  # so the deploy of that file does not parse them again
    assert (standin.branch_modules(ALICE, "main") or {})["main"] == "module.exports.loop = () => { return 2; };\n"


def test_the_benchmarks_bots_parse(tmp_path: Path) -> None:
    """bench/ deploys these bots: a module cut mid-statement would stop every deploy at the check."""
    bench = Path(__file__).resolve().parents[2] / "bench"
    sys.path.insert(0, str(bench))
    try:
        bench_network = importlib.import_module("bench_network")
        bench_deploy = importlib.import_module("bench_deploy")
    finally:
        sys.path.remove(str(bench))
    for name, make in (("network", bench_network.make_repo), ("deploy", bench_deploy.make_repo)):
        root = tmp_path / name
        root.mkdir()
        make(root, 60, 137_400)
        files = sorted((root / "src").rglob("*.js"))
        assert len(files) == 60
        assert [f for f in files if first_syntax_problem(f.read_text("utf-8")) is not None] == []
        assert sum(f.stat().st_size for f in files) > 130_000
