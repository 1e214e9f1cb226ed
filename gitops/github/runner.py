"""The Actions runner's protocol: what it tells the step (event, repository, the files to write) and what the step
tells it back (workflow commands, masks, outputs).

Every line the step prints may be read by the runner as a command, so text from a server or a file goes out through
:func:`log_text` or :func:`annotation` (redacted, and inert: a ``::`` at the start of a line is shown, not obeyed).
Secrets are masked (:class:`Masks`) before anything else is printed; the outputs are written in the heredoc form
that values of several lines need.
"""

from __future__ import annotations

import json
import secrets
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gitops.errors import UsageError
from gitops.inert import inert
from gitops.secrets import Secret, redact

#: Where the step's lines go (``click.echo`` in the CLI).
Echo = Callable[[str], None]


@dataclass(frozen=True)
class PullRequest:
    """The pull request of a ``pull_request`` event."""

    number: int
    head_sha: str
    head_repo: str | None
    base_repo: str | None
    #: The base branch's commit when the event was made (the manifest compared against).
    base_sha: str = ""

    @property
    def from_fork(self) -> bool:
        """A fork's pull request (its head repository deleted counts too): GitHub gives it no secrets."""
        return self.head_repo is None or self.head_repo != self.base_repo


@dataclass(frozen=True)
class Runner:
    """What the Actions runner provides: event, repository, API address, and the files that steps write."""

    event_name: str
    event: Mapping[str, Any]
    repository: str
    api_url: str
    server_url: str
    run_id: str
    sha: str
    output: Path | None
    summary: Path | None
    temp: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Runner:
        event: Any = {}
        path = env.get("GITHUB_EVENT_PATH", "")
        if path:
            try:
                event = json.loads(Path(path).read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise UsageError(
                    f"GITHUB_EVENT_PATH names {path}, which is not a readable JSON event: {type(exc).__name__}"
                ) from None
        return cls(
            event_name=env.get("GITHUB_EVENT_NAME", ""),
            event=event if isinstance(event, dict) else {},
            repository=env.get("GITHUB_REPOSITORY", ""),
            api_url=env.get("GITHUB_API_URL", "") or "https://api.github.com",
            server_url=env.get("GITHUB_SERVER_URL", "") or "https://github.com",
            run_id=env.get("GITHUB_RUN_ID", ""),
            sha=env.get("GITHUB_SHA", ""),
            output=Path(env["GITHUB_OUTPUT"]) if env.get("GITHUB_OUTPUT") else None,
            summary=Path(env["GITHUB_STEP_SUMMARY"]) if env.get("GITHUB_STEP_SUMMARY") else None,
            temp=Path(env.get("RUNNER_TEMP") or tempfile.gettempdir()),
        )

    @property
    def pull_request(self) -> PullRequest | None:
        """The pull request of a ``pull_request``/``pull_request_target`` event, else ``None``."""
        if not self.event_name.startswith("pull_request"):
            return None
        pr = self.event.get("pull_request")
        if not isinstance(pr, dict) or not isinstance(pr.get("number"), int):
            return None

        def repo(side: str) -> str | None:
            part = pr.get(side)
            repo_ = part.get("repo") if isinstance(part, dict) else None
            name = repo_.get("full_name") if isinstance(repo_, dict) else None
            return name if isinstance(name, str) else None

        def sha(side: str) -> str:
            part = pr.get(side)
            value = part.get("sha") if isinstance(part, dict) else None
            return value if isinstance(value, str) else ""

        return PullRequest(pr["number"], sha("head"), repo("head"), repo("base"), sha("base"))

    @property
    def run_url(self) -> str | None:
        if not (self.repository and self.run_id):
            return None
        return f"{self.server_url.rstrip('/')}/{self.repository}/actions/runs/{self.run_id}"


def escape_data(text: str) -> str:
    """A workflow command's data, escaped as the runner unescapes it."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def mask_lines(value: str) -> list[str]:
    """``::add-mask::`` commands for a value (one per line: the runner masks line by line)."""
    return [f"::add-mask::{escape_data(line)}" for line in value.splitlines() if line.strip()]


def annotation(level: Literal["notice", "warning", "error"], message: str) -> str:
    return f"::{level} title={escape_property('screeps-gitops')}::{escape_data(inert(redact(message)))}"


def log_text(text: str) -> str:
    """Text for the job's log that is not a workflow command: redacted, and inert (a server's text could
    otherwise begin a line with ``::``, or move the log viewer's cursor)."""
    return inert(redact(text))


def write_outputs(path: Path, outputs: Mapping[str, str]) -> None:
    """Append outputs to ``GITHUB_OUTPUT`` in the heredoc form, safe for values of several lines."""
    chunks: list[str] = []
    for name, value in outputs.items():
        delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
        while delimiter in value:  # pragma: no cover - 128 random bits
            delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
        chunks.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    with path.open("a", encoding="utf-8") as fh:
        fh.write("".join(chunks))


class Masks:
    """``::add-mask::`` each secret once, and register it so that :func:`redact` scrubs it too."""

    def __init__(self, echo: Echo) -> None:
        self._echo = echo
        self._done: set[str] = set()

    def add(self, value: str, *, prefix: bool = False, register: bool = True) -> None:
        """Mask ``value``; with ``prefix`` (a Screeps token) also its first 8 characters, which the official
        server echoes in its 429 answers (see :mod:`gitops.secrets`). ``register=False`` for a value that only
        carries a registered secret (the link): redacting the secret in it is enough for the tool's own text."""
        value = value.strip()
        if not value:
            return
        if register:
            Secret(value)
        values = [value, value[:8]] if prefix and len(value) >= 16 else [value]
        for item in values:
            if item not in self._done:
                self._done.add(item)
                for line in mask_lines(item):
                    self._echo(line)
