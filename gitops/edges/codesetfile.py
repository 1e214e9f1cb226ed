"""Code set files at the rim: write one after a build (``gitops build --out``), read one instead of the working tree
(``--codeset``), checked against the run's own manifest file and checkout (:mod:`gitops.core.artifact` says what
the file holds and why). The file is how a job without credentials hands built code to a job with them; reading
it refuses a file made for another commit or manifest, so a deploy job deploys only code built from its own.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gitops.config.manifest import LoadedManifest
from gitops.core.artifact import (
    ArtifactProblem,
    artifact_data,
    artifact_from_data,
    manifest_sha256,
    max_file_bytes,
    pick_branches,
)
from gitops.core.local import LocalCode, SourceInfo
from gitops.edges.gitout import git_text
from gitops.edges.outfile import write_out
from gitops.errors import SourceError

#: The environment variable (and the Action's input behind it) that names a code set file to deploy.
CODESET_VARIABLE = "GITOPS_CODESET"

_HINT = (
    "Make the code set with `gitops build --out FILE` (the Action's `command: build`) in the same commit and with "
    "the same gitops.yaml, and pass that file."
)


def codeset_path(env: Mapping[str, str]) -> Path | None:
    """The code set file this run deploys (``GITOPS_CODESET``), or ``None`` to read the working tree or a ref."""
    value = env.get(CODESET_VARIABLE, "").strip()
    return Path(value) if value else None


def write_codeset(path: Path, local: LocalCode, loaded: LoadedManifest) -> None:
    """Write ``local``'s code as a code set file at ``path``: a new file, or a regular file replaced atomically, never
    a link, device, FIFO or folder (:mod:`gitops.edges.outfile`)."""
    data = artifact_data(
        local.branches,
        commit=local.source.commit,
        manifest_raw=_manifest_bytes(loaded),
        manifest_name=loaded.display,
        warnings=local.warnings,
    )
    # ensure_ascii: a module may hold a lone surrogate, which JSON can carry only as an escape.
    write_out(path, json.dumps(data, ensure_ascii=True, separators=(",", ":")), what=OUT_WHAT)


#: How messages name a code set file (``--out`` refusals).
OUT_WHAT = "code set file"


def read_codeset(path: Path, loaded: LoadedManifest, *, base_of: str | None = None) -> LocalCode:
    """The code of the manifest's branches from the code set file at ``path``.

    Raises :class:`SourceError` (exit 6) when the file cannot be read, is not a code set, was cut or changed, was
    built from another manifest file or another commit than this run's, or lacks one of the branches.

    ``base_of``: the file is the base's code of a rehearsal (``gitops build --ref BASE --out``), built with this
    run's manifest from another commit than the checkout: its commit must be ``base_of`` (a full commit id; empty:
    any commit, which the report names)."""
    where = f"the code set file {path}"
    data = _parsed(path, where, max_file_bytes(len(loaded.every_branch)))
    try:
        artifact = artifact_from_data(data)
        branches = pick_branches(artifact, [(b.server, b.branch) for b in loaded.manifest.branches])
    except ArtifactProblem as exc:
        raise SourceError(f"{where} {exc}", hint=_HINT) from None
    del data  # the modules keep their texts; the rest of the parsed file goes now
    if artifact.manifest_sha256 != manifest_sha256(_manifest_bytes(loaded)):
        raise SourceError(
            f"{where} was built from another manifest than {loaded.display}; nothing was sent",
            hint="The deploy reads the servers, credentials and branches from its own checkout's manifest, and "
            "takes only code built from that very file. " + _HINT,
        )
    if base_of is not None:
        if base_of and artifact.commit != base_of:
            raise SourceError(
                f"{where} was built from commit {_short(artifact.commit)}, not from the base commit "
                f"{_short(base_of)}; nothing was rehearsed",
                hint="Build the base with `gitops build --ref BASE --out FILE` (the Action's `command: build` with "
                "`ref:` the pull request's base.sha) in the same run. " + _HINT,
            )
        return LocalCode(branches, SourceInfo("codeset", str(path), artifact.commit, None), list(artifact.warnings))
    commit = head_commit(loaded.base_dir)
    if commit != artifact.commit:
        raise SourceError(
            f"{where} was built from commit {_short(artifact.commit)}, but this checkout is at commit "
            f"{_short(commit)}; nothing was sent",
            hint="Check out the same commit in both jobs (actions/checkout without a ref: the commit of the event). "
            + _HINT,
        )
    source = SourceInfo("codeset", str(path), artifact.commit, None)
    return LocalCode(branches, source, [*artifact.warnings, f"code read from {where}, not from the working tree"])


def _parsed(path: Path, where: str, limit: int) -> Any:
    """The parsed JSON of the file at ``path``, refused (:class:`SourceError`) when it is not a regular file, is
    larger than ``limit`` bytes, or is not JSON."""
    text = _file_text(path, where, limit)
    try:
        return json.loads(text)
    except RecursionError:
        raise SourceError(
            f"{where} is not a code set: its JSON is nested deeper than any code set (whose is 5 levels)", hint=_HINT
        ) from None
    except ValueError as exc:
        raise SourceError(f"{where} is not JSON ({exc})", hint=_HINT) from None


def _file_text(path: Path, where: str, limit: int) -> str:
    """The text of the regular file at ``path``, opened once: ``O_NONBLOCK``, so that a FIFO (or a device) put there
    does not hang the open, then checked with ``fstat`` on what was opened, never on the name again.

    The bytes are read into one buffer and let go once decoded, so that the parse that follows holds the text and
    its values, twice the file at most (json.loads of the bytes would hold both and decode a third copy)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise SourceError(f"{where} does not exist", hint=_HINT) from None
    except OSError as exc:
        raise SourceError(f"{where} cannot be read ({exc.strerror})", hint=_HINT) from None
    try:
        with os.fdopen(fd, "rb", buffering=0) as stream:  # closes fd, also when fstat refuses it
            facts = os.fstat(fd)
            if not stat.S_ISREG(facts.st_mode):
                raise SourceError(f"{where} is not a regular file", hint=_HINT)
            if facts.st_size > limit:
                raise SourceError(
                    f"{where} is {facts.st_size:,} bytes, larger than any code set of this manifest's branches "
                    f"({limit:,} bytes: the server's 5 MB per branch, JSON-escaped)",
                    hint=_HINT,
                )
            # One buffer of the size fstat gave, and a byte more to notice a file that grows while it is read.
            buffer = bytearray(facts.st_size + 1)
            got = 0
            with memoryview(buffer) as view:
                while got < len(buffer) and (n := stream.readinto(view[got:])):
                    got += n
    except OSError as exc:
        raise SourceError(f"{where} cannot be read ({exc.strerror})", hint=_HINT) from None
    if got != facts.st_size:
        raise SourceError(f"{where} changed while it was read", hint=_HINT)
    del buffer[got:]
    try:
        return buffer.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(
            f"{where} is not JSON (not UTF-8 text: {exc.reason} at byte {exc.start})", hint=_HINT
        ) from None


def _short(commit: str | None) -> str:
    return commit[:12] if commit else "(none: not a Git checkout)"


def _manifest_bytes(loaded: LoadedManifest) -> bytes:
    try:
        return loaded.path.read_bytes()
    except OSError as exc:
        raise SourceError(f"{loaded.display} cannot be read again ({exc.strerror})") from None


def head_commit(folder: Path) -> str | None:
    """The commit checked out in the Git repository that holds ``folder``, or ``None`` outside Git."""
    return git_text(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], folder) or None
