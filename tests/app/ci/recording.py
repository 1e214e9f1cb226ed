"""A CI system for the policy's tests: it keeps what the policy tells it (the third host, beside GitHub's and
GitLab's, written against :class:`gitops.app.ci.host.Host` alone)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gitops.app.ci.host import BaseManifest, CiInputs, HostWords, Level
from gitops.app.ci.report import Report
from gitops.app.ci.trust import read_base_manifest
from gitops.config.manifest import LoadedManifest
from gitops.config.model import Manifest

WORDS = HostWords(
    change="change",
    fork="the system gives forks no secrets",
    routes_hint="plan changes without the token",
    routes_unknown_hint="fetch the base commit",
)


@dataclass(frozen=True)
class Change:
    number: int = 1
    head_sha: str = ""
    base_sha: str = ""
    from_fork: bool = False


@dataclass
class Recording:
    """Implements :class:`gitops.app.ci.host.Host`; ``told`` is the order of the report's hand-overs."""

    inputs: CiInputs
    files: Path
    change: Change | None = None
    words: HostWords = WORDS
    lines: list[str] = field(default_factory=list)
    annotations: list[tuple[str, str]] = field(default_factory=list)
    masked: list[str] = field(default_factory=list)
    told: list[str] = field(default_factory=list)
    report: Report | None = None

    def log(self, line: str) -> None:
        self.lines.append(line)

    def annotate(self, level: Level, message: str) -> None:
        self.annotations.append((level, message))

    def mask(self, value: str, *, prefix: bool = False, register: bool = True) -> None:
        self.masked.append(value)

    def check_environment(self, loaded: LoadedManifest, servers: list[str], env: Mapping[str, str]) -> list[str]:
        return []

    def missing_secret_message(self, manifest: Manifest, missing: list[str]) -> str:
        return f"add a secret for {', '.join(missing)}"

    def base_manifest(self, loaded: LoadedManifest, base_sha: str) -> BaseManifest:
        return read_base_manifest(loaded, base_sha, unreachable="is not here")

    def comment(self, report: Report) -> None:
        self.told.append("comment")

    def record(self, report: Report) -> None:
        self.told.append("record")

    def summary(self, report: Report) -> None:
        self.told.append("summary")

    def outputs(self, report: Report) -> None:
        self.told.append("outputs")
        self.report = report
