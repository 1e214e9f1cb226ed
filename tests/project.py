"""A player's project for end-to-end tests: a real git repository with a manifest, run through the real CLI.

The CLI runs in-process (``gitops.cli.run``) with the stand-in's clock injected, so a test can move time by a day
and both the service and the tool see it. Nothing is mocked: the service is the real stand-in over loopback.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gitops.cli import run
from gitops.standin.testing import ALICE, FULL_TOKEN, StandIn
from tests.factories import git


@dataclass
class Result:
    code: int
    out: str
    err: str


class Project:
    """A git repository with ``gitops.yaml`` pointing at a stand-in; ``plan``/``apply`` run the real CLI."""

    def __init__(
        self,
        root: Path,
        service: StandIn,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
        *,
        token: str = FULL_TOKEN,
    ) -> None:
        self.root = root
        self.service = service
        self.capsys = capsys
        self.state_dir = root.parent / (root.name + "-state")
        root.mkdir(parents=True, exist_ok=True)
        git(root, "init", "-q", "-b", "trunk")
        monkeypatch.setenv("SCREEPS_TOKEN", token)
        monkeypatch.delenv("GITOPS_MANIFEST", raising=False)
        monkeypatch.delenv("GITOPS_STATE_DIR", raising=False)
        monkeypatch.setenv("NO_COLOR", "1")

    def manifest(self, branches: list[dict[str, Any]], **extra: Any) -> Path:
        data: dict[str, Any] = {
            "version": 1,
            "servers": {"local": {"url": self.service.url, "token_env": "SCREEPS_TOKEN"}},
            "branches": [{"server": "local", **b} for b in branches],
            **extra,
        }
        path = self.root / "gitops.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        return path

    def point_at(self, url: str) -> None:
        """The written manifest's server url changed to ``url`` (another scheme, a port nobody listens on)."""
        path = self.root / "gitops.yaml"
        path.write_text(path.read_text("utf-8").replace(self.service.url, url), "utf-8")

    def write(self, files: Mapping[str, str | bytes]) -> None:
        for name, content in files.items():
            path = self.root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")

    def remove(self, name: str) -> None:
        (self.root / name).unlink()

    def commit(self, message: str = "change") -> str:
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "-m", message)
        return git(self.root, "rev-parse", "HEAD").strip()

    def gitops(self, *args: str) -> Result:
        self.capsys.readouterr()
        code = run(
            [*args, "-m", str(self.root / "gitops.yaml"), "--state-dir", str(self.state_dir)],
            clock=self.service.clock,
        )
        captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)

    def plan(self, *args: str) -> Result:
        return self.gitops("plan", *args)

    def apply(self, *args: str) -> Result:
        return self.gitops("apply", *args)

    def plan_json(self, *args: str) -> tuple[int, dict[str, Any]]:
        import json

        result = self.plan("--json", *args)
        assert result.code in (0, 2), result.err
        return result.code, json.loads(result.out)


def spend(standin: StandIn, endpoint: str, times: int) -> None:
    """Spend requests with the same token behind the tool's back (another tool, a teammate), as the server counts."""
    method, path = endpoint.split(" ", 1)
    with httpx.Client(base_url=standin.url, headers={"X-Token": FULL_TOKEN}) as http:
        for n in range(times):
            if n and n % 100 == 0:
                standin.clock.advance(60)  # stay under the global 120 per minute
            if method == "GET":
                answer = http.get(path, params={"branch": "default"})
            else:
                answer = http.post(path, json={"branch": "default", "modules": {"main": f"// {n}"}})
            assert answer.status_code == 200, answer.text


def add_server_only_binary(standin: StandIn, branch: str, name: str = "blob") -> None:
    """Add a binary module to ``branch`` behind the tool's back (the game's editor, say).

    With ``remote_only: keep`` the plan keeps it, but a plan never holds a binary module's content (the ledger and
    the plan keep digests only), so apply must download the branch again to re-send it: one more download.
    """
    modules = dict(standin.branch_modules(ALICE, branch) or {})
    modules[name] = {"binary": "AAEC"}
    with httpx.Client(base_url=standin.url, headers={"X-Token": FULL_TOKEN}) as http:
        answer = http.post("/api/user/code", json={"branch": branch, "modules": modules})
    assert answer.status_code == 200, answer.text


def one_branch_project(
    tmp_path: Path, service: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    """A committed bot of one module, ``src/main.js``, deployed as branch ``main``."""
    p = Project(tmp_path / "bot", service, capsys, monkeypatch)
    p.write({"src/main.js": "module.exports.loop = () => {};\n"})
    p.manifest([{"branch": "main", "root": "src"}])
    p.commit()
    return p


def edit_on_server(standin: StandIn, branch: str, changes: Mapping[str, str | None]) -> None:
    """Change ``branch`` behind the tool's back (the in-game editor, another tool): set each module to its text, or
    remove it (``None``), in one upload with the same token."""
    modules = dict(standin.branch_modules(ALICE, branch) or {})
    for name, text in changes.items():
        if text is None:
            modules.pop(name, None)
        else:
            modules[name] = text
    with httpx.Client(base_url=standin.url, headers={"X-Token": FULL_TOKEN}) as http:
        answer = http.post("/api/user/code", json={"branch": branch, "modules": modules})
    assert answer.status_code == 200, answer.text
