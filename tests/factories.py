"""Factories for tests: real files, real Git repositories, manifests built from a few keyword arguments.

Git is never mocked: ``make_repo`` runs ``git init``/``add``/``commit`` with a fixed identity and no signing, so
the tests do not depend on the machine's Git configuration.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

Files = Mapping[str, str | bytes]

#: The server every default manifest names (nothing listens there: validation never uses the network).
LOCAL_URL = "http://127.0.0.1:21025"


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` with a fixed identity; returns its standard output."""
    done = subprocess.run(
        [
            "git",
            "-c",
            "user.name=Test",
            "-c",
            "user.email=test@example.com",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
            *args,
        ],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout


def write_files(root: Path, files: Files) -> None:
    """Write ``{"src/main.js": "...", "src/lib/x.wasm": b"..."}`` under ``root`` (text as UTF-8)."""
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def commit_all(repo: Path, message: str = "change") -> str:
    """Stage everything and commit; returns the new commit id."""
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def make_repo(root: Path, files: Files, *, commit: bool = True, message: str = "initial") -> Path:
    """A Git repository at ``root`` holding ``files``, committed unless ``commit=False``."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    write_files(root, files)
    if commit:
        commit_all(root, message)
    return root


def manifest_data(
    branches: list[dict[str, Any]] | None = None,
    servers: dict[str, dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A manifest as data: by default server ``local`` (token in ``SCREEPS_TOKEN``) and branch ``main`` with root
    ``src``. Branch entries name server ``local`` unless they say otherwise."""
    if servers is None:
        servers = {"local": {"url": LOCAL_URL, "token_env": "SCREEPS_TOKEN"}}
    if branches is None:
        branches = [{"branch": "main", "root": "src"}]
    return {
        "version": 1,
        "servers": servers,
        "branches": [{"server": "local", **b} for b in branches],
        **extra,
    }


def write_manifest(
    folder: Path,
    data: Mapping[str, Any] | str | None = None,
    *,
    name: str = "gitops.yaml",
    **kwargs: Any,
) -> Path:
    """Write a manifest into ``folder``: YAML text as given, data dumped as YAML, or ``manifest_data(**kwargs)``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if isinstance(data, str):
        text = data
    else:
        text = yaml.safe_dump(dict(data) if data is not None else manifest_data(**kwargs), sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return path


#: Runs ``python ARGS...`` with SIGINT at its default disposition, as a program started at a terminal has it.
#: A process started as a background job of a non-interactive shell (a CI script's ``cmd &``) inherits SIGINT as
#: *ignored*, and Python then installs no KeyboardInterrupt handler: a test that presses Ctrl-C must not depend on
#: how the suite itself was started. (A shim that resets and execs, not ``preexec_fn``: that is unsafe with the
#: stand-in's threads running in the test process.)
_FOREGROUND_SHIM = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


def interruptible_python(*args: str) -> list[str]:
    """The argv of ``python ARGS...`` that Ctrl-C (SIGINT) reaches, whatever the test process inherited."""
    return [sys.executable, "-c", _FOREGROUND_SHIM, *args]


def record_calls(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[Any]:
    """Wrap ``owner.name`` for the test: each call still runs, and its first argument is appended to the list
    returned."""
    calls: list[Any] = []
    original = getattr(owner, name)

    def recording(argument: Any, *rest: Any) -> Any:
        calls.append(argument)
        return original(argument, *rest)

    monkeypatch.setattr(owner, name, recording)
    return calls


def wait_while_running(proc: subprocess.Popen[Any], condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Poll ``condition`` every 20 ms until it holds, ``proc`` has ended or ``timeout`` seconds have passed; the
    caller asserts what it waited for."""
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)


@contextlib.contextmanager
def reaped(proc: subprocess.Popen[Any]) -> Iterator[subprocess.Popen[Any]]:
    """``proc`` for the block; killed and collected after it if it still runs (a test that failed midway leaves no
    process behind)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def ledger_of(state_dir: Path) -> dict[str, Any]:
    """The one ledger under a state folder (``--state-dir``, ``GITOPS_STATE_DIR``), as JSON."""
    [path] = list((state_dir / "ledger").glob("*/*.json"))
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def verification_state(state_dir: Path, branch: str) -> str | None:
    """The recorded verification state of ``branch`` in the one ledger under ``state_dir``; ``None`` while there
    is none (no ledger yet, no record, or the file mid-replace)."""
    try:
        return str(ledger_of(state_dir)["verifications"][branch]["state"])
    except (ValueError, KeyError):
        return None
