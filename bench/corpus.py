"""Measure ``gitops init`` on a corpus of real public Screeps bots (issue 46): not part of the test suite.

    .venv/bin/python bench/corpus.py --from DIR [--only NAME ...] [--work DIR] [--no-build] [--json FILE]

``bench/corpus.json`` lists the bots: repository, pinned commit, layout, the bot's OWN build and its OWN upload list
(the files its own tool, grunt-screeps, gulp-screeps, rollup-plugin-screeps, the screeps-api CLI..., uploads, and
how that tool names them). For each bot the script

1. copies the checkout at the pinned commit into a work folder (``--from DIR`` holds one checkout or mirror per bot,
   named ``owner+name``; without ``--from`` it clones from GitHub, which needs a network this project's machines do
   not have: the fetch tool of a session brings the mirrors);
2. runs the bot's own install (``npm ci``, or ``npm install`` without a lockfile; scripts ignored, a checkout's own
   ``node_modules`` reused by hard links when it has one) and the bot's own build, where it runs here;
3. runs ``gitops init`` against a local ``gitops serve`` (a fresh stand-in per bot, on a loopback port) and records
   its guess (root, build, include);
4. compares ``gitops validate --list --json`` (which runs init's build) with the bot's own upload list: module
   names and bytes;
5. ``gitops apply --yes``, then ``gitops plan``, which must be a verified no-op (exit 0); these and the round trip
   read what validate's build wrote (``GITOPS_SKIP_BUILD=1``: a large bot's build takes minutes on this machine);
6. the adopting round trip: ``gitops init --pull`` into an empty folder brings back the same modules.

It prints one block per bot and a summary table (Markdown, for docs/your-layout.md). The bots' code stays in the work
folder, never in this project. Only :func:`compare_lists` and :func:`own_upload_list` are unit-tested
(tests/test_bench_corpus.py); the rest drives real processes.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

DATA = Path(__file__).with_name("corpus.json")
BUILD_TIMEOUT = 600.0
STEP_TIMEOUT = 300.0


@dataclass(frozen=True)
class Comparison:
    """The bot's own upload list against gitops' module list (``name -> bytes`` each)."""

    same: int
    only_own: tuple[str, ...]
    only_gitops: tuple[str, ...]
    #: Modules both hold with other sizes: (name, own bytes, gitops bytes).
    sizes: tuple[tuple[str, int, int], ...]

    @property
    def equal(self) -> bool:
        return not (self.only_own or self.only_gitops or self.sizes)

    def describe(self) -> str:
        if self.equal:
            return f"same {self.same} modules, same bytes"
        parts = [f"{self.same} same"]
        if self.only_own:
            parts.append(
                f"only the bot's tool: {', '.join(self.only_own[:5])}" + (" ..." if len(self.only_own) > 5 else "")
            )
        if self.only_gitops:
            parts.append(
                f"only gitops: {', '.join(self.only_gitops[:5])}" + (" ..." if len(self.only_gitops) > 5 else "")
            )
        if self.sizes:
            shown = ", ".join(f"{n} {a}/{b}" for n, a, b in self.sizes[:3])
            parts.append(f"other bytes (own/gitops): {shown}" + (" ..." if len(self.sizes) > 3 else ""))
        return "; ".join(parts)


def compare_lists(own: Mapping[str, int], gitops: Mapping[str, int]) -> Comparison:
    """Module names and bytes of the bot's own upload against gitops'."""
    both = sorted(set(own) & set(gitops))
    return Comparison(
        same=sum(1 for n in both if own[n] == gitops[n]),
        only_own=tuple(sorted(set(own) - set(gitops))),
        only_gitops=tuple(sorted(set(gitops) - set(own))),
        sizes=tuple((n, own[n], gitops[n]) for n in both if own[n] != gitops[n]),
    )


def _module_name(relative: str, names: str) -> str:
    base = relative.rsplit("/", 1)[-1]
    if names == "path":
        return relative[: -len(".js")] if relative.endswith(".js") else relative
    if names == "stem":  # grunt-screeps, gulp-screeps: the last suffix goes, whatever it is
        return base.rsplit(".", 1)[0] if "." in base else base
    if names == "js-stem":  # rollup-plugin-screeps, the screeps-api CLI: '.js' goes, '.wasm' stays
        return base[: -len(".js")] if base.endswith(".js") else base
    raise ValueError(f"unknown naming {names!r}")


def own_upload_list(folder: Path, spec: Mapping[str, Any]) -> dict[str, int]:
    """What the bot's own tool uploads from ``folder``: module name -> bytes, from the data file's ``upload``."""
    base = folder / spec["base"]
    leave_out = set(spec.get("leave_out", ()))
    found: dict[str, int] = {}
    if not base.is_dir():
        return found
    for path in sorted(base.rglob("*")):
        if not path.is_file() or "node_modules" in path.relative_to(base).parts:
            continue
        relative = path.relative_to(base).as_posix()
        if relative in leave_out or not any(_glob_match(relative, g) for g in spec["files"]):
            continue
        found[_module_name(relative, spec["names"])] = path.stat().st_size
    return found


def _glob_match(relative: str, glob: str) -> bool:
    if glob.startswith("**/"):
        return fnmatch.fnmatch(relative.rsplit("/", 1)[-1], glob[3:])
    return "/" not in relative and fnmatch.fnmatch(relative, glob)


@dataclass
class Row:
    """One bot's results, for the table."""

    name: str
    repo: str
    commit: str
    layout: str
    guess: str = ""
    own_build: str = ""
    gitops_list: str = ""
    compare: str = ""
    apply: str = ""
    noop: str = ""
    roundtrip: str = ""
    notes: list[str] = field(default_factory=list)


def _run(
    args: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float = STEP_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            list(args), cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return subprocess.CompletedProcess(list(args), 124, out, f"timed out after {timeout:.0f}s")


def _gitops(*args: str) -> list[str]:
    return [sys.executable, "-m", "gitops", *args]


def _tail(text: str, lines: int = 3) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(line.strip()[:160] for line in kept)


class StandIn:
    """A fresh ``gitops serve`` on a loopback port, with one full token."""

    def __init__(self, folder: Path) -> None:
        self.token = secrets.token_hex(16)
        accounts = folder / "accounts.yaml"
        accounts.write_text(
            yaml.safe_dump({"users": [{"username": "corpus", "tokens": [{"value": self.token, "full": True}]}]})
        )
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            _gitops("serve", "--port", str(self.port), "--accounts", str(accounts), "--data", str(folder / "db")),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/api/version", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("gitops serve did not answer within 30 s")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _checkout(bot: Mapping[str, Any], source: Path | None, work: Path) -> Path:
    """The bot at its pinned commit in ``work`` (a copy: the checkout it came from is left as it was)."""
    target = work / str(bot["name"])
    if target.exists():
        shutil.rmtree(target)
    origin = str(source) if source is not None else f"https://github.com/{bot['repo']}.git"
    done = _run(["git", "clone", "-q", "--no-checkout", origin, str(target)], work, os.environ)
    if done.returncode != 0:
        raise RuntimeError(f"git clone {origin}: {_tail(done.stderr)}")
    done = _run(["git", "checkout", "-q", bot["commit"]], target, os.environ)
    if done.returncode != 0:
        raise RuntimeError(f"the pinned commit {bot['commit'][:12]} is not in {origin}: {_tail(done.stderr)}")
    if source is not None and (source / "node_modules").is_dir():
        # The install was paid for once in the checkout: hard links, not a second download.
        _run(["cp", "-al", str(source / "node_modules"), str(target / "node_modules")], work, os.environ)
    return target


def _own_build(bot: Mapping[str, Any], folder: Path, env: Mapping[str, str], row: Row, build: bool) -> None:
    if bot.get("runs_here") not in (None, True):
        row.own_build = f"not run: {bot['runs_here']}"
        return
    if not build:
        row.own_build = "not run (--no-build)"
        return
    if bot.get("install_note"):
        # The lockfile cannot install here as it is: the checkout given with --from was installed by hand.
        row.notes.append(f"install: {bot['install_note']}")
    if (folder / "package.json").is_file() and not (folder / "node_modules").is_dir():
        install = ["npm", "ci"] if (folder / "package-lock.json").is_file() else ["npm", "install"]
        done = _run([*install, "--ignore-scripts", "--no-audit", "--no-fund"], folder, env, BUILD_TIMEOUT)
        if done.returncode != 0:
            row.own_build = f"install failed ({' '.join(install)}): {_tail(done.stderr)}"
            return
    if bot.get("setup"):
        # The bot's documented first steps (a player's own settings file copied from its example): a fresh clone
        # has neither, and its own build needs both.
        done = _run(["bash", "-c", bot["setup"]], folder, env)
        row.notes.append(f"setup (the bot's documented first step): {bot['setup']}")
        if done.returncode != 0:
            row.own_build = f"setup failed: {_tail(done.stderr)}"
            return
    if bot["build"] is None:
        row.own_build = "none (the files are the modules)"
        return
    started = time.monotonic()
    done = _run(["bash", "-c", bot["build"]], folder, env, BUILD_TIMEOUT)
    took = time.monotonic() - started
    if done.returncode != 0:
        row.own_build = f"`{bot['build']}` failed ({done.returncode}): {_tail(done.stderr or done.stdout)}"
    else:
        row.own_build = f"`{bot['build']}` ok, {took:.0f} s"


def _guess(folder: Path) -> str:
    data = yaml.safe_load((folder / "gitops.yaml").read_text())
    branch = data["branches"][0]
    parts = [f"root {branch['root']}", f"build {branch.get('build', '-')}", f"include {branch['include']}"]
    naming = branch.get("naming")
    if naming:
        parts.append(f"naming {naming}")
    if len(data["branches"]) > 1:
        parts.append(f"{len(data['branches'])} branches")
    return "; ".join(parts)


def _gitops_list(folder: Path, env: Mapping[str, str]) -> tuple[dict[str, int] | None, str]:
    done = _run(_gitops("validate", "--list", "--json"), folder, env, BUILD_TIMEOUT)
    if done.returncode != 0:
        return None, f"validate exit {done.returncode}: {_tail(done.stderr or done.stdout)}"
    document = json.loads(done.stdout)
    first = document["branches"][0]
    listed = {m["name"]: m["bytes"] for m in first["module_list"]}
    return listed, f"{len(listed)} modules, {first['bytes']:,} bytes"


def _measure(bot: Mapping[str, Any], folder: Path, work: Path, row: Row, build: bool) -> None:
    base_env = {**os.environ, "CI": "1", "GITOPS_STATE_DIR": str(work / f"{bot['name']}.state")}
    bot_dir = folder / bot.get("subdir", ".")
    _own_build(bot, bot_dir, base_env, row, build)
    own = own_upload_list(bot_dir, bot["upload"]) if row.own_build.startswith(("`", "none")) else None
    standin = StandIn(Path(tempfile.mkdtemp(prefix="standin-", dir=work)))
    env = {**base_env, "SCREEPS_TOKEN": standin.token}
    try:
        if bot.get("subdir"):
            # A monorepo: init at the top must not write a manifest of the tools' files, and must not stop init in
            # the bot's folder.
            done = _run(_gitops("init", "--server", standin.url), folder, env)
            row.notes.append(f"init at the top: exit {done.returncode}: {_tail(done.stderr or done.stdout, 1)}")
        done = _run(_gitops("init", "--server", standin.url), bot_dir, env)
        if done.returncode != 0:
            row.guess = f"init refused (exit {done.returncode}): {_tail(done.stderr)}"
            return
        row.guess = _guess(bot_dir)
        listed, row.gitops_list = _gitops_list(bot_dir, env)
        if listed is None:
            return
        row.compare = compare_lists(own, listed).describe() if own is not None else "bot's own list not made here"
        # validate ran init's build; the deploy steps read what it wrote (a big bot's build takes minutes here).
        env["GITOPS_SKIP_BUILD"] = "1"
        done = _run(_gitops("apply", "--yes"), bot_dir, env)
        row.apply = "ok" if done.returncode == 0 else f"exit {done.returncode}: {_tail(done.stderr)}"
        if done.returncode != 0:
            return
        done = _run(_gitops("plan"), bot_dir, env)
        row.noop = "no-op (exit 0)" if done.returncode == 0 else f"exit {done.returncode}: {_tail(done.stdout)}"
        row.roundtrip = _roundtrip(work / f"{bot['name']}.adopted", env, standin.url, listed)
    finally:
        standin.stop()


def _roundtrip(empty: Path, env: Mapping[str, str], url: str, listed: Mapping[str, int]) -> str:
    if empty.exists():
        shutil.rmtree(empty)
    empty.mkdir()
    _run(["git", "init", "-q"], empty, env)
    done = _run(_gitops("init", "--pull", "--server", url), empty, env)
    if done.returncode != 0:
        return f"init --pull exit {done.returncode}: {_tail(done.stderr)}"
    adopted, _ = _gitops_list(empty, env)
    if adopted is None:
        return "validate of the adopted folder failed"
    result = compare_lists(listed, adopted)
    return "same modules back" if result.equal else result.describe()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from", dest="source", type=Path, help="folder of checkouts or mirrors, one per bot")
    parser.add_argument("--only", action="append", default=[], help="measure this bot (by name); repeatable")
    parser.add_argument("--work", type=Path, help="work folder (default: a new temporary one)")
    parser.add_argument("--no-build", action="store_true", help="do not run the bots' own installs and builds")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON to this file")
    options = parser.parse_args(argv)
    bots = json.loads(DATA.read_text())["bots"]
    if options.only:
        bots = [b for b in bots if b["name"] in options.only]
    if options.source is None:
        print("no --from: cloning from GitHub, which needs a network (this project's machines have none)")
    work = options.work or Path(tempfile.mkdtemp(prefix="corpus-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for bot in bots:
        row = Row(bot["name"], bot["repo"], bot["commit"], bot["layout"])
        source = None
        if options.source is not None:
            source = options.source / bot.get("dir", bot["repo"].replace("/", "+"))
            if (source / "repo").is_dir():  # the fetch tool's mirror layout
                source = source / "repo"
        try:
            folder = _checkout(bot, source, work)
            _measure(bot, folder, work, row, not options.no_build)
        except (RuntimeError, OSError) as exc:
            row.notes.append(str(exc))
        _print_row(row)
        rows.append(row)
    print()
    print(markdown_table(rows))
    if options.json is not None:
        options.json.write_text(json.dumps([r.__dict__ for r in rows], indent=2) + "\n")
    return 0


def _print_row(row: Row) -> None:
    print(f"== {row.name} ({row.repo} @ {row.commit[:12]}): {row.layout}")
    for label, value in (
        ("init's guess", row.guess),
        ("own build", row.own_build),
        ("validate --list", row.gitops_list),
        ("against its own tool", row.compare),
        ("apply", row.apply),
        ("second plan", row.noop),
        ("init --pull round trip", row.roundtrip),
        *(("note", n) for n in row.notes),
    ):
        if value:
            print(f"   {label}: {value}")


def _cell(text: str, limit: int = 220) -> str:
    """A table cell: one line, pipes escaped, a long error cut (the per-bot block above has it whole)."""
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("|", "\\|")


def markdown_table(rows: Sequence[Row]) -> str:
    """The rows as the Markdown table docs/your-layout.md keeps."""
    lines = [
        "| bot (commit) | init's guess | own build | validate --list vs its own tool | apply / second plan "
        "| init --pull |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        cells = [
            f"{r.repo} ({r.commit[:10]})",
            r.guess,
            r.own_build,
            r.compare or r.gitops_list,
            f"{r.apply or '-'} / {r.noop or '-'}",
            r.roundtrip or "; ".join(r.notes) or "-",
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
