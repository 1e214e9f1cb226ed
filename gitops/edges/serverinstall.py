"""The install of the real Screeps private server that ``gitops rehearse`` runs (npm ``screeps``, pinned).

Beside :mod:`gitops.edges.privateserver` (a world's life cycle on an install): :func:`find_install` gives the folder
of a usable install: ``--server-dir`` or ``GITOPS_PRIVATE_SERVER``, else the tool's cache folder, installed there
once with ``npm ci`` from the pinned lock and reused while its stamp (the pinned files and the Node.js ABI) holds.
The node-side files ship inside the package (``gitops._privateserver``, from ``scripts/private-server/``):
:func:`node_files`. What node and npm get of the environment is :func:`clean_env`'s: no credential reaches them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import filelock

from gitops.config.folders import user_folder
from gitops.errors import RehearsalError

#: An existing install of the pinned server (a folder with ``node_modules/screeps``): used instead of the cache.
INSTALL_ENV = "GITOPS_PRIVATE_SERVER"
CACHE_ENV = "GITOPS_CACHE_DIR"
MARKER = ".install-complete"
#: In the cache folder: the last node binary's ABI (:func:`node_abi`).
ABI_CACHE = "node-abi.json"
#: Files an install needs (the install scripts build the native ones).
NEEDED = (
    "node_modules/screeps/bin/screeps.js",
    "node_modules/screepsmod-auth/package.json",
    "node_modules/@screeps/driver/native/build/Release/native.node",
    "node_modules/@screeps/driver/build/runtime.bundle.js",
    "node_modules/@screeps/launcher/init_dist/db.json",
)
#: ``npm ci`` of the pinned server (about 90 s on a 2-core machine; native modules are built).
INSTALL_TIMEOUT = 900.0


def node_files() -> Path:
    """The shipped node-side files: package.json, package-lock.json and the preloads.

    An installed tool has them as ``gitops._privateserver``; an editable install from a checkout finds them in the
    checkout's ``scripts/private-server/`` (setuptools' editable finder does not resolve a mapped data folder).
    """
    candidates: list[Path] = []
    with contextlib.suppress(ModuleNotFoundError):
        candidates.extend(folders_on_disk(resources.files("gitops._privateserver"), "package-lock.json"))
    candidates.append(Path(__file__).resolve().parents[2] / "scripts" / "private-server")
    for candidate in candidates:
        if (candidate / "package-lock.json").is_file() and (candidate / "no_snapshot.js").is_file():
            return candidate
    raise RehearsalError(
        "the private server's package files are not part of this installation of screeps-gitops",
        hint="Reinstall screeps-gitops (pip install, pipx install).",
    )


def folders_on_disk(root: Traversable, name: str) -> list[Path]:
    """The folders on disk of the package ``root`` that hold a file ``name``, in import order.

    The shipped folder has no ``__init__.py``, so ``files()`` of a pip or pipx install is a namespace package's
    ``MultiplexedPath`` (one folder per ``sys.path`` entry that has one), whose ``str()`` is not a path; its files
    are. Looking at the files works for that, a regular package's ``Path`` and every Python from 3.11 on; a package
    that is not on disk (a zip import) has no folder the server's ``node`` could read, hence none here.
    """
    with contextlib.suppress(OSError):
        return [child.parent for child in root.iterdir() if child.name == name and isinstance(child, Path)]
    return []


def node_binary(env: Mapping[str, str]) -> str:
    node = shutil.which("node", path=env.get("PATH"))
    if node is None:
        raise RehearsalError(
            "node is not on PATH: the rehearsal runs the real Screeps private server, a Node.js program",
            hint="Install Node.js 20 or newer (in the GitHub Action: actions/setup-node with node-version: 20).",
        )
    return node


def install_stamp(files: Path, env: Mapping[str, str]) -> str:
    """What an install depends on: the pinned package files and the Node ABI (as ``scripts/private-server.sh``)."""
    abi = node_abi(node_binary(env), env)
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((files / name).read_bytes())
    digest.update(abi.encode())
    return digest.hexdigest()


def node_abi(node: str, env: Mapping[str, str]) -> str:
    """``node``'s platform, architecture and module ABI (``linux-x64-abi115``): asked of node once per binary (its
    path, size and modification time), then kept in the tool's cache folder (:data:`ABI_CACHE`), as a node start
    costs 40 to 250 ms on a loaded 2-core machine and every rehearsal needs the answer first; asked again when the
    binary changed or the cache cannot be read or written."""
    key = None
    with contextlib.suppress(OSError):
        path = Path(node).resolve()
        info = path.stat()
        key = f"{path}:{info.st_size}:{info.st_mtime_ns}"
    cache = user_folder(env, CACHE_ENV, "XDG_CACHE_HOME", (".cache",)) / ABI_CACHE
    if key is not None:
        with contextlib.suppress(OSError, ValueError):
            known = json.loads(cache.read_text("utf-8"))
            if isinstance(known, dict) and isinstance(known.get(key), str):
                return str(known[key])
    asked = subprocess.run(
        [node, "-p", 'process.platform + "-" + process.arch + "-abi" + process.versions.modules'],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env=clean_env(env),
    )
    if asked.returncode != 0:
        raise RehearsalError(f"node did not run ({asked.stderr.strip()[:200]})", hint="Check the Node.js installation.")
    abi = asked.stdout.strip()
    if key is not None:
        with contextlib.suppress(OSError):
            cache.parent.mkdir(parents=True, exist_ok=True)
            partial = cache.with_name(f"{cache.name}.{os.getpid()}.partial")
            partial.write_text(json.dumps({key: abi}), "utf-8")
            os.replace(partial, cache)  # whole or not at all: another run may read it meanwhile
    return abi


def default_install_dir(env: Mapping[str, str]) -> Path:
    return (user_folder(env, CACHE_ENV, "XDG_CACHE_HOME", (".cache",)) / "private-server").resolve()


def install_problem(folder: Path, stamp: str) -> str | None:
    """Why ``folder`` is not a complete, current install (``None`` when it is)."""
    marker = folder / MARKER
    if not marker.is_file():
        return f"{folder} holds no complete install (no {MARKER})"
    if marker.read_text().strip() != stamp:
        return f"the install in {folder} is stale (the pinned versions or the Node.js version changed)"
    missing = [name for name in NEEDED if not (folder / name).is_file()]
    if missing:
        return f"the install in {folder} is broken ({missing[0]} is missing)"
    return None


def find_install(
    env: Mapping[str, str], given: Path | None = None, *, say: Callable[[str], None] = lambda _: None
) -> Path:
    """The folder of a usable install: ``given`` (or ``$GITOPS_PRIVATE_SERVER``, e.g. the one of ``bash
    scripts/private-server.sh install``), else the cache's (``$GITOPS_CACHE_DIR``, ``$XDG_CACHE_HOME/screeps-gitops``
    or ``~/.cache/screeps-gitops``, then ``private-server``), installed there with ``npm ci`` from the pinned
    package.json and lock on first use and reused afterwards (``say`` gets the progress lines)."""
    files = node_files()
    stamp = install_stamp(files, env)
    chosen = _chosen(env, given)
    if chosen is not None:
        problem = install_problem(chosen, stamp)
        if problem:
            raise RehearsalError(
                f"{problem} (--server-dir or ${INSTALL_ENV})",
                hint="Point it at a folder installed by 'bash scripts/private-server.sh install', or leave it unset: "
                "the tool then installs the server into its cache folder on first use.",
            )
        return chosen
    folder = default_install_dir(env)
    if install_problem(folder, stamp) is None:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(folder / ".install.lock"), timeout=INSTALL_TIMEOUT):
        if install_problem(folder, stamp) is None:  # another run installed it meanwhile
            return folder
        _install(folder, files, stamp, env, say)
    return folder


def ready_install(env: Mapping[str, str], given: Path | None = None) -> Path | None:
    """The folder :func:`find_install` would give when a usable install is there already, else ``None`` (nothing
    installed, nothing raised: :func:`find_install` says why, in its turn): ``gitops rehearse`` launches its world
    from it before it reads the code, and checks the code before it installs or reports a broken install."""
    try:
        stamp = install_stamp(node_files(), env)
        chosen = _chosen(env, given)
        folder = chosen if chosen is not None else default_install_dir(env)
        return folder if install_problem(folder, stamp) is None else None
    except (OSError, subprocess.SubprocessError, RehearsalError):
        return None


def _chosen(env: Mapping[str, str], given: Path | None) -> Path | None:
    """The install named by ``--server-dir`` (``given``) or ``$GITOPS_PRIVATE_SERVER``, if one is."""
    chosen = given or (Path(env[INSTALL_ENV]) if env.get(INSTALL_ENV) else None)
    return chosen.expanduser().resolve() if chosen is not None else None


def _install(folder: Path, files: Path, stamp: str, env: Mapping[str, str], say: Callable[[str], None]) -> None:
    node = node_binary(env)
    npm = shutil.which("npm", path=env.get("PATH"))
    if npm is None:
        raise RehearsalError("npm is not on PATH", hint="Install Node.js 20 or newer (it ships npm).")
    say(f"rehearse: installing the Screeps private server (npm screeps, pinned) into {folder}; first use only, ~2 min")
    started = time.monotonic()
    (folder / MARKER).unlink(missing_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(files / name, folder / name)
    install_env = clean_env(env)
    install_env["npm_config_build_from_source"] = "true"  # isolated-vm has no prebuilt binary for every Node.js
    headers = Path(node).resolve().parent.parent
    if (headers / "include" / "node" / "common.gypi").is_file():
        install_env["npm_config_nodedir"] = str(headers)  # node-gyp uses these instead of downloading them
    log = folder / "install.log"
    try:
        with log.open("wb") as out:
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--engine-strict=false", "--loglevel=warn"],
                cwd=folder,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=install_env,
                timeout=INSTALL_TIMEOUT,
                check=False,
            )
    except subprocess.TimeoutExpired:
        raise RehearsalError(
            f"installing the private server took longer than {INSTALL_TIMEOUT:.0f} s (log: {log})",
            hint="Run it again (a partial install is finished), or install it once with "
            "'bash scripts/private-server.sh install' and point GITOPS_PRIVATE_SERVER at it.",
        ) from None
    if done.returncode != 0:
        tail = "\n".join(log.read_text("utf-8", errors="replace").splitlines()[-15:])
        raise RehearsalError(
            f"installing the private server failed (npm ci exited {done.returncode}; log: {log}):\n{tail}",
            hint="It needs the npm registry, a C++ compiler and make (native modules are built from source).",
        )
    missing = [name for name in NEEDED if not (folder / name).is_file()]
    if missing:
        raise RehearsalError(f"the private server's install in {folder} is incomplete ({missing[0]} was not built)")
    (folder / MARKER).write_text(stamp + "\n")
    say(f"rehearse: installed the private server in {time.monotonic() - started:.0f} s")


def clean_env(env: Mapping[str, str]) -> dict[str, str]:
    """The server's environment: what node and npm need, and nothing else (no credential reaches the world)."""
    kept = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT", "npm_config_cache", "npm_config_registry")
    return {name: env[name] for name in kept if env.get(name)}


__all__ = [
    "ABI_CACHE",
    "CACHE_ENV",
    "INSTALL_ENV",
    "MARKER",
    "NEEDED",
    "clean_env",
    "default_install_dir",
    "find_install",
    "folders_on_disk",
    "install_problem",
    "install_stamp",
    "node_abi",
    "node_binary",
    "node_files",
    "ready_install",
]
