"""The code set file: every branch's built code, carried from a job that builds to a job that deploys.

A build runs the repository's code (its build script, its dependencies, a pull request's changes), so it must not
run where a deploy token is. ``gitops build --out FILE`` builds and reads the code as ``plan`` would and writes this
file; ``gitops plan/apply --codeset FILE`` (and the Action's ``codeset`` input) take the code from it, in a job that
runs no repository code at all. The file says what it was made from, and the reader checks it against the run that
holds the credential (:func:`artifact_from_data` lists the checks), so that nothing the build wrote decides where a
credential goes. Pure: no I/O (:mod:`gitops.edges.codesetfile` reads and writes the bytes).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast, get_args

from gitops.core.codeset import CodeSet, Module, refused_name_reason
from gitops.core.endpoints import MAX_CODE_LENGTH
from gitops.core.local import LocalBranch
from gitops.core.modulekinds import Kind

#: The ``format`` field of every code set file.
FORMAT = "screeps-gitops-codeset"
#: Raised when the layout changes; a reader refuses other versions.
FORMAT_VERSION = 1

_KINDS = frozenset(get_args(Kind))

_MIB = 1024 * 1024
#: The most bytes one branch takes in a code set file. The server takes a branch of up to
#: :data:`~gitops.core.endpoints.MAX_CODE_LENGTH` UTF-16 units of ``JSON.stringify(modules)``; the file writes the
#: same texts (and a binary module's base64) with every non-ASCII unit escaped, at most 6 bytes a unit (the
#: reasoning of :data:`~gitops.core.endpoints.CODE_ANSWER_CAP`), and adds per module its kind, size, SHA-256 and
#: file (about 150 bytes and the path): 4 MiB holds those of some 20,000 modules, far more than a bot has.
MAX_BRANCH_BYTES = 6 * MAX_CODE_LENGTH + 4 * _MIB


def max_file_bytes(branches: int) -> int:
    """The largest code set file of a manifest of ``branches`` branches (each at the server's limit), and 1 MiB
    for the header and the build's warnings: a larger file is refused before it is parsed."""
    return max(branches, 1) * MAX_BRANCH_BYTES + _MIB


class ArtifactProblem(ValueError):
    """The code set file cannot be used; the text completes "the code set file ...". Raised by the pure reader."""


@dataclass(frozen=True)
class CodeSetArtifact:
    """A code set file's content, checked."""

    commit: str | None
    manifest_sha256: str
    branches: list[LocalBranch]
    warnings: list[str]


def manifest_sha256(raw: bytes) -> str:
    """The digest that ties a code set to the manifest file it was built from: SHA-256 of its exact bytes."""
    return hashlib.sha256(raw).hexdigest()


def artifact_data(
    branches: list[LocalBranch], *, commit: str | None, manifest_raw: bytes, manifest_name: str, warnings: list[str]
) -> dict[str, Any]:
    """The JSON-able content of a code set file for ``branches`` (as :func:`gitops.app.localcode.read_code` read
    them)."""
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "commit": commit,
        "manifest": {"path": manifest_name, "sha256": manifest_sha256(manifest_raw)},
        "warnings": list(warnings),
        "branches": [_branch_data(branch) for branch in branches],
    }


def _branch_data(branch: LocalBranch) -> dict[str, Any]:
    modules: list[dict[str, Any]] = []
    for module in branch.code:
        entry: dict[str, Any] = {
            "name": module.name,
            "kind": branch.kinds.get(module.name, "binary" if module.is_binary else "javascript"),
            "size": module.size,
            "sha256": _content_sha256(module),
            "file": branch.files.get(module.name),
        }
        if module.binary is not None:
            entry["base64"] = base64.b64encode(module.binary).decode("ascii")
        else:
            entry["text"] = module.text
        modules.append(entry)
    return {"server": branch.server, "branch": branch.branch, "modules": modules}


def _content_sha256(module: Module) -> str:
    content = module.binary if module.binary is not None else (module.text or "").encode("utf-8", "surrogatepass")
    return hashlib.sha256(content).hexdigest()


def artifact_from_data(data: Any) -> CodeSetArtifact:
    """The checked content of a parsed code set file; :class:`ArtifactProblem` naming what is wrong.

    * ``manifest.sha256``: the SHA-256 of the manifest file's bytes. The deploying run reads the manifest from its own
      checkout; a code set built from another manifest (another url, other branches) is refused, so nothing the build
      wrote decides where a credential goes.
    * ``commit``: the commit the build job checked out; the deploying run's checkout must be the same commit.
    * per module its name, kind, size and SHA-256 beside the content (text, or base64 for a binary module): a file that
      was cut or edited on the way is refused, not deployed.
    """
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ArtifactProblem("is not a screeps-gitops code set (no 'format: screeps-gitops-codeset')")
    if data.get("format_version") != FORMAT_VERSION:
        raise ArtifactProblem(
            f"has format_version {data.get('format_version')!r}; this gitops reads version {FORMAT_VERSION} "
            "(build and deploy with the same gitops version)"
        )
    commit = data.get("commit")
    if commit is not None and not _is_hex(commit, (40, 64)):
        raise ArtifactProblem(f"names commit {str(commit)[:80]!r}, which is not a commit id")
    manifest = data.get("manifest")
    digest = manifest.get("sha256") if isinstance(manifest, dict) else None
    if not _is_hex(digest, (64,)):
        raise ArtifactProblem("has no manifest.sha256 (the digest of the manifest it was built from)")
    warnings = data.get("warnings", [])
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        raise ArtifactProblem("has a 'warnings' that is not a list of texts")
    raw_branches = data.get("branches")
    if not isinstance(raw_branches, list):
        raise ArtifactProblem("has no 'branches' list")
    branches: list[LocalBranch] = []
    seen: set[tuple[str, str]] = set()
    for index, raw in enumerate(raw_branches):
        branch = _branch_from(raw, f"branches[{index}]")
        key = (branch.server, branch.branch)
        if key in seen:
            raise ArtifactProblem(f"holds branch {branch.label} twice")
        seen.add(key)
        branches.append(branch)
    return CodeSetArtifact(cast("str | None", commit), cast(str, digest), branches, list(warnings))


def _branch_from(raw: Any, where: str) -> LocalBranch:
    if not isinstance(raw, dict):
        raise ArtifactProblem(f"{where} is not an object")
    server, branch = raw.get("server"), raw.get("branch")
    if not isinstance(server, str) or not isinstance(branch, str) or not server or not branch:
        raise ArtifactProblem(f"{where} has no server or branch name")
    modules_raw = raw.get("modules")
    if not isinstance(modules_raw, list):
        raise ArtifactProblem(f"{where} ({server}/{branch}) has no 'modules' list")
    modules: list[Module] = []
    files: dict[str, str] = {}
    kinds: dict[str, Kind] = {}
    for index, entry in enumerate(modules_raw):
        module, kind, file = _module_from(entry, f"{where}.modules[{index}] ({server}/{branch})")
        if module.name in kinds:
            raise ArtifactProblem(f"{where} ({server}/{branch}) holds module {module.name!r} twice")
        modules.append(module)
        kinds[module.name] = kind
        if file is not None:
            files[module.name] = file
    return LocalBranch(server, branch, CodeSet.of(modules), files, kinds)


def _module_from(entry: Any, where: str) -> tuple[Module, Kind, str | None]:
    if not isinstance(entry, dict):
        raise ArtifactProblem(f"{where} is not an object")
    name, kind, size, digest = entry.get("name"), entry.get("kind"), entry.get("size"), entry.get("sha256")
    if not isinstance(name, str) or not name:
        raise ArtifactProblem(f"{where} has no module name")
    # The rules the build applies to a file's module name (gitops.core.branchbuild): a name the server would drop or
    # read back changed is refused here too, or every plan would upload it again and never find it.
    refused = refused_name_reason(name)
    if refused is not None:
        raise ArtifactProblem(f"{where}: module {name!r} cannot be deployed: {refused}")
    if kind not in _KINDS:
        raise ArtifactProblem(f"{where}: module {name!r} has kind {str(kind)[:40]!r}")
    file = entry.get("file")
    if file is not None and not isinstance(file, str):
        raise ArtifactProblem(f"{where}: module {name!r} has a 'file' that is not a text")
    text, encoded = entry.get("text"), entry.get("base64")
    if (text is None) == (encoded is None):
        raise ArtifactProblem(f"{where}: module {name!r} must have exactly one of 'text' and 'base64'")
    if text is not None:
        if not isinstance(text, str):
            raise ArtifactProblem(f"{where}: module {name!r} has a 'text' that is not a text")
        content = text.encode("utf-8", "surrogatepass")
        module = Module(name, text=text)
    else:
        try:
            content = base64.b64decode(encoded if isinstance(encoded, str) else "", validate=True)
        except (binascii.Error, ValueError):
            raise ArtifactProblem(f"{where}: module {name!r} has a 'base64' that is not base64") from None
        module = Module(name, binary=content)
    if type(size) is not int or size != len(content) or hashlib.sha256(content).hexdigest() != digest:
        raise ArtifactProblem(
            f"{where}: module {name!r} does not match its size and sha256 (the file was cut or changed after the "
            "build wrote it)"
        )
    return module, cast(Kind, kind), file


def _is_hex(value: Any, lengths: tuple[int, ...]) -> bool:
    return isinstance(value, str) and len(value) in lengths and all(ch in "0123456789abcdef" for ch in value.lower())


def pick_branches(artifact: CodeSetArtifact, wanted: list[tuple[str, str]]) -> list[LocalBranch]:
    """The artifact's branches for ``wanted`` (server, branch), in that order; :class:`ArtifactProblem` naming the
    first one it does not hold (it was built for other targets)."""
    held: Mapping[tuple[str, str], LocalBranch] = {(b.server, b.branch): b for b in artifact.branches}
    missing = [f"{server}/{branch}" for server, branch in wanted if (server, branch) not in held]
    if missing:
        raise ArtifactProblem(
            "holds no code for " + ", ".join(missing) + " (it was built for other servers or branches)"
        )
    return [held[key] for key in wanted]
