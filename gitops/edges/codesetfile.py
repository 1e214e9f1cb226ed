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

from gitops.config.manifest import LoadedManifest
from gitops.core.artifact import ArtifactProblem, artifact_data, artifact_from_data, manifest_sha256, pick_branches
from gitops.core.local import LocalCode, SourceInfo
from gitops.edges.gitout import git_text
from gitops.edges.outfile import write_out
from gitops.errors import SourceError

#: The environment variable (and the Action's input behind it) that names a code set file to deploy.
CODESET_VARIABLE = "GITOPS_CODESET"
#: A larger file is not read: 5 MB per branch on the server, a few times that for base64 and JSON escapes.
MAX_BYTES = 512 * 1024 * 1024

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


def read_codeset(path: Path, loaded: LoadedManifest) -> LocalCode:
    """The code of the manifest's branches from the code set file at ``path``.

    Raises :class:`SourceError` (exit 6) when the file cannot be read, is not a code set, was cut or changed, was
    built from another manifest file or another commit than this run's, or lacks one of the branches."""
    where = f"the code set file {path}"
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise SourceError(f"{where} is not a regular file", hint=_HINT)
        with open(path, "rb") as stream:
            raw = stream.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise SourceError(f"{where} does not exist", hint=_HINT) from None
    except OSError as exc:
        raise SourceError(f"{where} cannot be read ({exc.strerror})", hint=_HINT) from None
    if len(raw) > MAX_BYTES:
        raise SourceError(f"{where} is larger than {MAX_BYTES // (1024 * 1024)} MiB", hint=_HINT)
    try:
        artifact = artifact_from_data(json.loads(raw))
        branches = pick_branches(artifact, [(b.server, b.branch) for b in loaded.manifest.branches])
    except ValueError as exc:  # ArtifactProblem, and JSON that does not parse
        text = str(exc) if isinstance(exc, ArtifactProblem) else f"is not JSON ({exc})"
        raise SourceError(f"{where} {text}", hint=_HINT) from None
    if artifact.manifest_sha256 != manifest_sha256(_manifest_bytes(loaded)):
        raise SourceError(
            f"{where} was built from another manifest than {loaded.display}; nothing was sent",
            hint="The deploy reads the servers, credentials and branches from its own checkout's manifest, and "
            "takes only code built from that very file. " + _HINT,
        )
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
