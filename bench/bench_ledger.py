"""Micro-benchmark of the ledger file (issue 23): open a ledger remembering 2,000 modules of one branch (with the
branch's applied and pending records, 6,000 module entries in all), then change and save it five times.

    .venv/bin/python bench/bench_ledger.py [--rounds 9] [--durable]

Prints the median (and min/max) of the rounds in milliseconds: ``open`` (read, verify or validate, build), ``saves``
(five ``save`` calls, each after one request is recorded, each checking ``changed`` first as the session does) and
``total``. In-process, after one warm-up round, so that imports are not counted (the fresh-process cost of importing
pydantic is what ``tests/test_startup_imports.py`` and ``bench/README.md`` speak of). ``--durable`` adds the
``fsync``s (disk time, not CPU); without it each save is still atomic.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

from gitops.core.applied import AppliedRecord
from gitops.core.codeset import CodeSet, Module
from gitops.core.remote import BranchInfo, RemoteBranch
from gitops.edges.clock import ManualClock
from gitops.edges.ledger import Ledger

URL = "https://screeps.com"
FP = "0123456789abcdef"
START = 1_800_000_000.25


def _fill(state: Path, clock: ManualClock) -> None:
    code = CodeSet.of(
        [
            Module(f"group{i // 100:02d}/module{i:04d}", text=f"module.exports.n = {i}; // {'x' * 40}")
            for i in range(2000)
        ]
    )
    ledger = Ledger.open(state, URL, FP, clock=clock)
    ledger.remember_branch(RemoteBranch.from_code("default", code, clock.now(), "own-upload", "1799999999123"))
    record = AppliedRecord(
        "default", dict(RemoteBranch.from_code("default", code, 0).modules or {}), code.digest, clock.now(), "upload"
    )
    ledger.record_applied(dataclasses.replace(record, commit="a" * 40, source="worktree"))
    ledger.record_pending(record)
    ledger.remember_branch_list([BranchInfo("default", True, True), BranchInfo("sim")])
    for endpoint in ("GET /api/user/branches", "GET /api/user/code", "POST /api/user/code"):
        for _ in range(20):
            ledger.record_sent(endpoint)
            clock.advance(0.125)
        ledger.record_response(
            endpoint,
            200,
            {"X-RateLimit-Limit": "120", "X-RateLimit-Remaining": "100", "X-RateLimit-Reset": str(int(START) + 60)},
        )
    ledger.save()


def _round(state: Path, clock: ManualClock, durable: bool) -> tuple[float, float]:
    started = time.perf_counter()
    ledger = Ledger.open(state, URL, FP, clock=clock)
    opened = time.perf_counter()
    assert not ledger.warnings, ledger.warnings
    for _ in range(5):
        ledger.record_sent("GET /api/user/code")
        clock.advance(0.5)
        if ledger.changed:
            ledger.save(durable=durable)
    done = time.perf_counter()
    return (opened - started) * 1000, (done - opened) * 1000


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--durable", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        state = Path(folder)
        clock = ManualClock(START)
        _fill(state, clock)
        size = Ledger.path_for(state, URL, FP)[0].stat().st_size
        _round(state, clock, args.durable)  # warm-up: imports, first use
        opens, saves, totals = [], [], []
        for _ in range(args.rounds):
            opened, saved = _round(state, clock, args.durable)
            opens.append(opened)
            saves.append(saved)
            totals.append(opened + saved)
    print(f"ledger file {size:,} bytes, {args.rounds} rounds (median [min-max] ms)")
    for name, values in (("open", opens), ("5 saves", saves), ("total", totals)):
        print(f"  {name:8} {statistics.median(values):7.2f}  [{min(values):.2f}-{max(values):.2f}]")


if __name__ == "__main__":
    main(sys.argv[1:])
