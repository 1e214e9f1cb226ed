"""Micro-benchmark of planning a 2,000-module branch (issue 23): ``build_plan`` and ``render_json`` in four shapes.

    .venv/bin/python bench/bench_plan.py [--rounds 31] [--modules 2000]

Shapes: a first deploy (the branch does not exist: every module is a row ``added``), one module changed against a
download and against the ledger (digests only), and nothing changed. Prints, per shape, the median and minimum CPU
time (``time.process_time``) in milliseconds of ``build_plan`` and of ``render_json``. In-process, after one
warm-up round, so that imports are not counted (their cost is measured as whole processes, see ``bench/README.md``).
For a before/after pair run it alternately against an export of the older ``gitops/`` (``git archive REV gitops |
tar -x -C DIR``, then ``PYTHONPATH=DIR``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from gitops.config.manifest import LoadedManifest, manifest_digest, manifest_from_data
from gitops.core.codeset import CodeSet, Module
from gitops.core.local import LocalBranch, LocalCode, SourceInfo
from gitops.core.plan import Plan
from gitops.core.planbuild import build_plan
from gitops.core.remote import ModuleFacts, RemoteBranch, RemoteView
from gitops.render.plan import render_json

NOW = 1_800_000_000.0


def _code(modules: dict[str, str]) -> CodeSet:
    return CodeSet.of([Module(name, text=text) for name, text in modules.items()])


def _shapes(count: int) -> tuple[LoadedManifest, LocalCode, dict[str, RemoteView]]:
    data = {
        "version": 1,
        "servers": {"bench": {"url": "http://127.0.0.1:21025", "token_env": "BENCH_TOKEN"}},
        "branches": [{"server": "bench", "branch": "main", "root": "src"}],
    }
    manifest = manifest_from_data(data)
    path = Path("/bench/gitops.yaml")
    loaded = LoadedManifest(manifest, path, path.parent, manifest_digest(manifest), "gitops.yaml")
    body = "module.exports.run = function (creep) { creep.say('work'); };\n" * 30
    modules = {"main": "module.exports.loop = function () {};\n"}
    modules.update({f"group{i % 40:02d}/module{i:04d}": f"// {i}\n{body}" for i in range(count - 1)})
    one = dict(modules, **{"group07/module0007": "// changed\n" + body})
    local = LocalCode([LocalBranch("bench", "main", _code(modules), {})], SourceInfo("ref", "main", "0" * 40, None), [])
    downloaded = RemoteBranch.from_code("main", _code(one), NOW - 60)
    facts = {n: ModuleFacts(f.name, f.digest, f.size, f.is_binary, None) for n, f in (downloaded.modules or {}).items()}
    views = {
        "first deploy (every module added)": RemoteView("bench", None, {"main": RemoteBranch.missing("main", NOW)}),
        "one changed (download)": RemoteView("bench", None, {"main": downloaded}),
        "one changed (ledger)": RemoteView(
            "bench", None, {"main": RemoteBranch("main", facts, downloaded.digest, NOW - 60, "ledger")}
        ),
        "nothing changed": RemoteView("bench", None, {"main": RemoteBranch.from_code("main", _code(modules), NOW)}),
    }
    return loaded, local, views


def _cpu_ms(work: Callable[[], object], rounds: int) -> list[float]:
    work()  # warm-up
    times = []
    for _ in range(rounds):
        start = time.process_time()
        work()
        times.append((time.process_time() - start) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--modules", type=int, default=2000)
    args = parser.parse_args()
    loaded, local, views = _shapes(args.modules)
    print(f"{'shape':36} {'build_plan ms (median/min)':>27} {'render_json ms (median/min)':>28}")
    for shape, view in views.items():

        def plan(view: RemoteView = view) -> Plan:
            return build_plan(loaded=loaded, local=local, remote={"bench": view}, budgets={}, refresh="auto", now=NOW)

        built = plan()
        build = _cpu_ms(plan, args.rounds)

        def render(built: Plan = built) -> str:
            return render_json(built, now=NOW)

        rendering = _cpu_ms(render, args.rounds)
        print(
            f"{shape:36} {statistics.median(build):19.2f} / {min(build):5.2f} "
            f"{statistics.median(rendering):20.2f} / {min(rendering):5.2f}"
        )


if __name__ == "__main__":
    main()
