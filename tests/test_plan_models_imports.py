"""The plan's models and the code that plans, renders and applies with them never import pydantic (issue 23).

pydantic validates untrusted input only: the manifest, a ledger and a plan file (``gitops.edges.planfile``, inside
the function that reads or writes one). Importing pydantic and building models cost more CPU than the rest of a
plan, so the plan models are stdlib dataclasses, and this test keeps them so.

How it checks, in a fresh interpreter: importing the plan's modules leaves ``pydantic`` out of ``sys.modules``;
and a spy on ``builtins.__import__`` records which module asks for ``pydantic`` or ``pydantic_core``
(``__import__`` is called for every ``import`` statement, also of a module already imported and inside a
function), so that building, narrowing, comparing and rendering a plan is checked too, after the test's own
manifest was validated through pydantic (which ``sys.modules`` alone could not tell apart).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PLAN_MODULES = (
    "gitops.core.plan",
    "gitops.core.planbuild",
    "gitops.core.planseal",
    "gitops.core.diff",
    "gitops.core.drift",
    "gitops.core.budget",
    "gitops.render.plan",
    "gitops.render.drift",
    "gitops.edges.planfile",
    "gitops.app.targets",
    "gitops.app.applying",
)

SPY = """
import builtins, json, sys
real = builtins.__import__
asked = []
def spy(name, globals=None, locals=None, fromlist=(), level=0):
    if level == 0 and name.split(".")[0] in ("pydantic", "pydantic_core"):
        who = (globals or {}).get("__name__", "?")
        if who.split(".")[0] not in ("pydantic", "pydantic_core"):
            asked.append(who)
    return real(name, globals, locals, fromlist, level)
builtins.__import__ = spy
"""


def _askers(statements: str, setup: str = "") -> tuple[list[str], bool]:
    """The modules that asked for pydantic while ``statements`` ran (``setup`` runs before the spy starts), and
    whether pydantic was imported at the end."""
    code = f"{setup}\n{SPY}\n{statements}\nprint(json.dumps([sorted(set(asked)), 'pydantic' in sys.modules]))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    asked, loaded = json.loads(done.stdout.splitlines()[-1])
    return asked, loaded


def test_importing_the_plan_modules_asks_for_no_pydantic() -> None:
    asked, loaded = _askers("\n".join(f"import {name}" for name in PLAN_MODULES))
    assert asked == [], f"{asked} import pydantic"
    assert not loaded


def test_the_spy_sees_an_import_inside_a_function() -> None:
    # The check above is not vacuous: reading or writing a plan file makes pydantic's TypeAdapter, in a function.
    asked, loaded = _askers("import gitops.edges.planfile as f\nf._adapter()")
    assert asked == ["gitops.edges.planfile"]
    assert loaded


def test_planning_and_rendering_ask_for_no_pydantic() -> None:
    # The factories build a manifest through pydantic first (untrusted input); then the spy starts.
    setup = """
from tests.core.factories import NOW, branch, facts, listed, local, manifest, on_server, view, window
loaded = manifest(branch(activate=["world"], verify={"ticks": 5, "on_failure": "rollback"}))
code = local(("local", "main", {"main": "new\\n", "lib": "lib\\n"}))
server = view("local", on_server("main", {"main": "old\\n"}), listed=listed("main", world="main"))
budgets = {"local": facts(window("POST /api/user/code", 10, 5))}
"""
    work = """
from gitops.core.drift import compare, record_from_branch, with_drift
from gitops.core.plan import narrow_plan, plan_for_server
from gitops.core.planbuild import build_plan
from gitops.core.planseal import seal_problems
from gitops.render.plan import render_json, render_markdown, render_text
plan = build_plan(loaded=loaded, local=code, remote={"local": server}, budgets=budgets, refresh="always", now=NOW)
applied = record_from_branch(on_server("main", {"main": "elsewhere\\n"}), how="upload")
plan = with_drift(plan, {("local", "main"): compare(server.branches["main"], applied)})
plan = plan_for_server(narrow_plan(plan, loaded), "local")
assert plan.branches[0].verify is not None and plan.budget and plan.rollbacks and not seal_problems(plan)
for render in (render_json, render_text, render_markdown):
    render(plan, now=NOW)
"""
    asked, _ = _askers(work, setup)
    assert asked == [], f"{asked} import pydantic while planning"
