"""requirements/action.lock, what the Action installs (``--require-hashes``), kept in step with pyproject.toml:
every core dependency pinned to a version its specifier allows, every entry with hashes, nothing that only the
``serve`` extra needs, nothing that no core dependency needs. A stale lock fails here; its header says how to
regenerate it."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "action.lock"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def locked() -> dict[str, tuple[Version, list[str], str]]:
    """name -> (version, hashes, marker) of every entry of the lock."""
    entries: dict[str, tuple[Version, list[str], str]] = {}
    text = LOCK.read_text(encoding="utf-8")
    # An entry: "name==version [; marker] \" followed by "--hash=sha256:..." lines.
    for m in re.finditer(
        r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?)(?: ; ([^\\\n]+?))?\s*\\\n((?:\s+--hash=\S+.*\n?)+)", text, re.M
    ):
        name = canonicalize_name(m.group(1))
        hashes = re.findall(r"--hash=(sha256:[0-9a-f]{64})", m.group(4))
        assert name not in entries, f"{name} is locked twice"
        entries[name] = (Version(m.group(2)), hashes, m.group(3) or "")
    requirement_lines = [
        line for line in text.splitlines() if line and not line.startswith((" ", "#")) and "==" not in line
    ]
    assert not requirement_lines, f"lines of the lock that pin nothing: {requirement_lines}"
    return entries


def core() -> list[Requirement]:
    return [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]


def _requires(name: str, extras: set[str]) -> list[Requirement]:
    """The requirements of an installed distribution, with ``extras`` (any platform); [] when not installed here."""
    try:
        raw = metadata.requires(name) or []
    except metadata.PackageNotFoundError:
        return []
    found: list[Requirement] = []
    for text in raw:
        req = Requirement(text)
        marker = req.marker
        if marker is not None and "extra" in str(marker) and not any(marker.evaluate({"extra": e}) for e in extras):
            continue
        found.append(req)
    return found


def closure(roots: list[Requirement]) -> set[str]:
    """The names that ``roots`` need, following installed metadata (platform markers ignored: the lock is
    universal)."""
    seen: set[str] = set()
    name: str
    todo = list(roots)
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        todo.extend(_requires(name, set(req.extras)))
    return seen


def test_every_core_dependency_is_pinned_with_hashes_within_its_specifier() -> None:
    entries = locked()
    for req in core():
        name = canonicalize_name(req.name)
        assert name in entries, f"{req} is not in {LOCK.name}: regenerate it (the command is in its header)"
        version = entries[name][0]
        assert req.specifier.contains(version, prereleases=True), f"{name}=={version} does not satisfy {req}"
    for entry, (version, hashes, _) in entries.items():
        assert hashes, f"{entry}=={version} has no hashes: --require-hashes would refuse the lock"


def test_the_lock_holds_what_the_core_needs_and_nothing_else() -> None:
    entries = locked()
    needed = closure(core())
    extra_only = closure([Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"]["serve"]]) - needed
    assert {"starlette", "uvicorn", "watchfiles"} <= extra_only
    assert not set(entries) & extra_only, "the serve extra's packages are not for the Action's lock"
    assert set(entries) <= needed, f"locked but needed by no core dependency: {sorted(set(entries) - needed)}"
    # What the locked versions need on this platform is locked too (checked where that version is installed here).
    for name, (version, _, marker) in entries.items():
        if marker and not Marker(marker).evaluate():
            continue
        try:
            installed = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            continue
        if installed != version:
            continue
        for req in _requires(name, set()):
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            dep = canonicalize_name(req.name)
            assert dep in entries, f"{name}=={version} needs {req}, which is not locked"
            assert req.specifier.contains(entries[dep][0], prereleases=True), f"{name} needs {req}"


def test_the_header_says_how_to_regenerate_it() -> None:
    head = LOCK.read_text(encoding="utf-8").splitlines()[:3]
    assert any("uv pip compile pyproject.toml --generate-hashes --universal" in line for line in head)


def test_plan_apply_drift_and_the_action_do_not_import_the_serve_extra() -> None:
    script = (
        "import sys\n"
        "from gitops.cli import run\n"
        "for command in ('plan', 'apply', 'drift', 'build', 'action'):\n"
        "    assert run([command, '--help']) == 0\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('starlette', 'uvicorn', 'watchfiles'))\n"
        "print('LOADED', loaded)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stdout
