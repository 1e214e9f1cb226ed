"""A build done once per state of its inputs: the record of the last build, and whether its output can be reused.

A ``build:`` command (a TypeScript bot's takes long) ran before every ``validate``, ``plan`` and ``apply``. After a
build in the working tree the tool writes a record: the **key** of what the build read (:func:`inputs_key`) and the
digest of every file it left under its output roots (:class:`BuildRecord`). When the next run finds both unchanged,
it skips the build and says so; ``--rebuild`` (env ``GITOPS_REBUILD``) always builds.

A record only ever skips a build, and the output then read is the one on disk, which must match the record's
digests file by file: a forged or stale record cannot pass off other output, and whoever can write this user's
private cache folder can write the working tree as well. A record that cannot be read is a build (one line says
so); a record that cannot be written only makes the next run build. Outside Git, with an output root that holds the
manifest's folder, in a ``--ref`` checkout, in the GitHub Action (a fresh runner) and for ``gitops build --out``
(the code set file is the build's own), nothing is reused.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gitops
from gitops.config.manifest import LoadedManifest
from gitops.config.manifestcache import default_cache_dir
from gitops.edges.atomicfile import replace_atomically
from gitops.edges.gitout import git_output

__all__ = [
    "ALWAYS_READ",
    "FORMAT",
    "REBUILD_VARIABLE",
    "BuildRecord",
    "Reuse",
    "inputs_key",
    "output_digests",
    "rebuild",
]

#: ``--rebuild``: set (to 1) to always build, whatever the record says.
REBUILD_VARIABLE = "GITOPS_REBUILD"
#: The format of a record; a record of another format is a build.
FORMAT = 1
#: A larger record is not read (one line per output file).
_MAX_RECORD_BYTES = 16 * 1024 * 1024
#: Files read into the key even when Git ignores them, under the repository's top and the manifest's folder.
ALWAYS_READ = (
    "package.json",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "bun.lock",
    "bun.lockb",
    "Cargo.lock",
    "Cargo.toml",
    "tsconfig.json",
    ".npmrc",
    ".yarnrc.yml",
    ".nvmrc",
    ".node-version",
    ".tool-versions",
    "node_modules/.package-lock.json",
    "node_modules/.yarn-integrity",
    "node_modules/.modules.yaml",
    "node_modules/.yarn-state.yml",
)
#: Programs whose identity (path, size, time) is part of the key, beside the command's own.
_TOOLS = ("node", "npm", "npx", "yarn", "pnpm", "tsc", "bun", "cargo")
#: Variables of the build's environment that are part of the key.
_VARIABLES = ("PATH", "NODE_ENV")


def rebuild(env: Mapping[str, str]) -> bool:
    """Whether the run builds whatever the record says (``--rebuild``, :data:`REBUILD_VARIABLE`)."""
    return env.get(REBUILD_VARIABLE, "").strip().lower() in ("1", "true", "yes")


def output_roots(loaded: LoadedManifest) -> list[Path]:
    """The folders the builds write: the ``root`` of each branch that has a build (resolved, each once)."""
    manifest = loaded.manifest
    roots: dict[Path, None] = {}
    for branch in manifest.branches:
        if (branch.build if branch.build is not None else manifest.build) is not None:
            roots.setdefault((loaded.base_dir / branch.root).resolve(), None)
    return list(roots)


def _paths(out: bytes) -> list[str]:
    return [os.fsdecode(p) for p in out.split(b"\0") if p]


def _file_digest(path: Path) -> str:
    """``sha256:...`` of a file's content, ``link:...`` of a link's target, ``deleted`` or ``folder``."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return "deleted"
    if stat.S_ISLNK(info.st_mode):
        return "link:" + os.readlink(path)
    if stat.S_ISDIR(info.st_mode):
        return "folder"
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def _under(path: str, prefixes: Iterable[str]) -> bool:
    return any(path == p or path.startswith(p + "/") for p in prefixes)


def inputs_key(loaded: LoadedManifest, commands: list[str], env: Mapping[str, str]) -> str | None:
    """The key of what the builds read (``commands``: each as JSON; ``env``: the builds' environment); ``None`` when
    a build here cannot be reused: no Git repository (or Git cannot run), or an output root that is the manifest's
    folder, holds it, or lies outside the repository.

    The key is the SHA-256 over:

    * every file of the Git work tree that holds the manifest (the whole repository, not only the manifest's folder:
      a build in ``deploy/`` may read ``../src``), tracked or untracked-but-not-ignored, except those under the
      output roots: a tracked file unchanged since the index by its blob id from ``git ls-files -s`` (Git checks the
      content of a file whose stat data changed, and of a racily clean one), every other one (modified, untracked)
      by the SHA-256 of its content; a deleted tracked file counts as deleted, a symbolic link by its target;
    * the lockfiles and configuration files, and the package managers' own install records, under the repository's
      top and the manifest's folder, also when Git ignores them (:data:`ALWAYS_READ`): an ``npm install`` changes
      the build without changing a tracked file when the lockfile is ignored;
    * the build commands as written, the manifest's digest, this tool's version, ``PATH`` and ``NODE_ENV``, and for
      the usual tools (:data:`_TOOLS` and the command's own program) the path ``PATH`` finds and its size and
      modification time (a tool upgraded or switched, by nvm say, is another key; asked without running the tool).

    A build whose inputs changed while it ran (it rewrote a tracked file, or the player saved one) leaves no record:
    the next run builds again."""
    base = loaded.base_dir.resolve()
    top_out = git_output(["rev-parse", "--show-toplevel"], base)
    if top_out is None:
        return None
    top = Path(os.fsdecode(top_out.strip())).resolve()
    excluded: list[str] = []
    for root in output_roots(loaded):
        if root in (base, top) or base.is_relative_to(root) or not root.is_relative_to(top):
            return None
        excluded.append(root.relative_to(top).as_posix())
    staged = git_output(["ls-files", "-s", "-z"], top)
    modified = git_output(["ls-files", "-m", "-z"], top)
    untracked = git_output(["ls-files", "-o", "--exclude-standard", "-z"], top)
    if staged is None or modified is None or untracked is None:
        return None
    files: dict[str, str] = {}
    for entry in _paths(staged):
        meta, _, name = entry.partition("\t")
        if not _under(name, excluded):
            files[name] = "blob:" + meta  # mode, blob id and stage: a conflicted file is its stages
    for name in [*_paths(modified), *_paths(untracked)]:
        if not _under(name, excluded):
            files[name] = _file_digest(top / name)
    for folder in dict.fromkeys((top, base)):
        for name in ALWAYS_READ:
            path = folder / name
            shown = path.relative_to(top).as_posix()
            if shown not in files and not _under(shown, excluded) and (path.exists() or path.is_symlink()):
                files[shown] = _file_digest(path)
    digest = hashlib.sha256()
    head = {
        "format": FORMAT,
        "gitops": gitops.__version__,
        "manifest": loaded.digest,
        "commands": commands,
        "variables": {name: env.get(name) for name in _VARIABLES},
        "tools": _tools(commands, env),
    }
    digest.update(json.dumps(head, sort_keys=True).encode("utf-8", "surrogateescape"))
    for name in sorted(files):
        digest.update(f"\0{name}\0{files[name]}".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def _tools(commands: list[str], env: Mapping[str, str]) -> dict[str, str | None]:
    """Each usual tool's and each command's program: where ``PATH`` finds it, and its size and time."""
    names = list(_TOOLS)
    for written in commands:
        with contextlib.suppress(ValueError):
            command = json.loads(written)
            words = shlex.split(command) if isinstance(command, str) else command
            if words and isinstance(words[0], str):
                names.append(words[0])
    found: dict[str, str | None] = {}
    for name in dict.fromkeys(names):
        where = shutil.which(name, path=env.get("PATH"))
        if where is None:
            found[name] = None
            continue
        try:
            info = os.stat(where)
        except OSError:
            found[name] = where
            continue
        found[name] = f"{os.path.realpath(where)}:{info.st_size}:{info.st_mtime_ns}"
    return found


def output_digests(roots: Iterable[Path]) -> dict[str, dict[str, str]]:
    """Per output root, each file under it (relative, ``/``-separated) and its digest (:func:`_file_digest`); a
    root that does not exist holds nothing. Raises :class:`OSError` for a folder that cannot be read."""
    result: dict[str, dict[str, str]] = {}
    for root in roots:
        files: dict[str, str] = {}

        def fail(exc: OSError) -> None:
            raise exc

        for folder, dirs, names in os.walk(root, onerror=fail):
            here = Path(folder)
            for name in [*names, *(d for d in dirs if (here / d).is_symlink())]:
                files[(here / name).relative_to(root).as_posix()] = _file_digest(here / name)
        result[str(root)] = dict(sorted(files.items()))
    return result


@dataclass(frozen=True)
class Reuse:
    """What a lookup found: the time of the build whose output can be reused, or why none can (``None``: no
    record, or a record of other inputs or other output; a text: a record that cannot be read)."""

    built_at: float | None
    problem: str | None = None


class BuildRecord:
    """The record of the last build of one manifest's commands: the inputs' key and the SHA-256 of every file the
    build left under its output roots.

    It lives in ``<cache>/builds/<digest of the manifest's path and the commands>.json`` (``<cache>`` as the
    validated-manifest cache's: ``$GITOPS_CACHE_DIR``, else ``$XDG_CACHE_HOME/screeps-gitops``, else
    ``~/.cache/screeps-gitops``), folders 0700, the file 0600, written atomically (a temporary file renamed over
    it). A folder that is not the user's own or that others may write is not used."""

    def __init__(self, loaded: LoadedManifest, commands: list[str], env: Mapping[str, str]) -> None:
        name = hashlib.sha256("\0".join([str(loaded.path), *commands]).encode("utf-8", "surrogateescape"))
        self.folder = default_cache_dir(env) / "builds"
        self.path = self.folder / f"{name.hexdigest()[:32]}.json"
        self.roots = output_roots(loaded)

    def lookup(self, key: str) -> Reuse:
        """Whether the output on disk is the one the build of inputs ``key`` left."""
        try:
            if not _private(self.folder):
                return Reuse(None)
            with open(self.path, "rb") as stream:
                text = stream.read(_MAX_RECORD_BYTES + 1)
        except FileNotFoundError:
            return Reuse(None)
        except OSError as exc:
            return Reuse(None, f"cannot be read ({exc.strerror or exc})")
        try:
            record = _checked(json.loads(text)) if len(text) <= _MAX_RECORD_BYTES else None
        except ValueError:
            record = None
        if record is None:
            return Reuse(None, "does not hold a record of this version of screeps-gitops")
        if record["key"] != key:
            return Reuse(None)
        try:
            if output_digests(self.roots) != record["outputs"]:
                return Reuse(None)
        except OSError:
            return Reuse(None)
        return Reuse(float(record["built_at"]))

    def store(self, key: str, built_at: float) -> None:
        """Record that the output now on disk is the build of inputs ``key``; failures only cost the next run a
        build."""
        with contextlib.suppress(OSError, ValueError):
            outputs = output_digests(self.roots)
            data = json.dumps(
                {"format": FORMAT, "gitops": gitops.__version__, "key": key, "built_at": built_at, "outputs": outputs},
                ensure_ascii=False,
                separators=(",", ":"),
            ).encode("utf-8", "surrogateescape")
            self.folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.folder.mkdir(mode=0o700, exist_ok=True)
            if not _private(self.folder):
                return
            replace_atomically(self.path, data, temp_prefix=".record-")  # created 0600


def _checked(record: Any) -> dict[str, Any] | None:
    """The record when it holds what this version writes, with every value of its type; else ``None``."""
    if not isinstance(record, dict) or record.get("format") != FORMAT or record.get("gitops") != gitops.__version__:
        return None
    outputs = record.get("outputs")
    if (
        not isinstance(record.get("key"), str)
        or type(record.get("built_at")) not in (int, float)
        or not isinstance(outputs, dict)
        or not all(
            isinstance(files, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in files.items())
            for files in outputs.values()
        )
    ):
        return None
    return record


def _private(folder: Path) -> bool:
    """Whether ``folder`` is a real folder of this user that nobody else may write to."""
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return False
    getuid = getattr(os, "getuid", None)
    return getuid is None or info.st_uid == getuid()


def when(built_at: float) -> str:
    """The time of a build as the message says it: ``2026-11-27 05:12:03 UTC``."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(built_at))
