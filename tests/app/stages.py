"""A bot's folder run through the pipeline's stages (``gitops/app/pipeline.py``) against the stand-in on a loopback
port, as ``gitops plan`` and ``gitops apply`` run them but without a front end: for the tests of the use cases."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitops.app import pipeline
from gitops.app.options import Options
from gitops.app.session import open_session
from gitops.standin.testing import FULL_TOKEN, StandIn

#: A second token variable, holding a token the stand-in does not know.
OTHER_TOKEN = "OTHER_TOKEN"


class Bot:
    """A bot's folder (``src/main.js``) with its manifest, run through the stages; the tool shares the stand-in's
    clock."""

    def __init__(self, root: Path, standin: StandIn) -> None:
        self.root = root
        self.standin = standin
        self.env = {"SCREEPS_TOKEN": FULL_TOKEN, OTHER_TOKEN: "not-a-token-the-server-knows"}
        self.write("module.exports.loop = () => {};\n")
        self.servers({"local": standin.url})

    def manifest(self, branches: list[dict[str, Any]], servers: dict[str, Any], **top: Any) -> None:
        data = {"version": 1, "servers": servers, "branches": branches, **top}
        (self.root / "gitops.yaml").write_text(json.dumps(data), encoding="utf-8")

    def servers(self, urls: dict[str, str], variables: dict[str, str] | None = None, **top: Any) -> None:
        """Branch ``main`` of each server (name -> url), each with its token variable (``SCREEPS_TOKEN`` unless
        ``variables`` names another)."""
        variables = variables or {}
        self.manifest(
            [{"server": name, "branch": "main", "root": "src"} for name in urls],
            {name: {"url": url, "token_env": variables.get(name, "SCREEPS_TOKEN")} for name, url in urls.items()},
            **top,
        )

    def write(self, text: str) -> None:
        (self.root / "src").mkdir(parents=True, exist_ok=True)
        (self.root / "src" / "main.js").write_text(text, encoding="utf-8")

    @property
    def options(self) -> Options:
        return Options(
            manifest=self.root / "gitops.yaml",
            env=self.env,
            state_dir=self.root.parent / "state",
            clock=self.standin.clock,
            max_wait=0,
        )

    def planned(self) -> pipeline.Planned:
        with open_session(self.options) as session:
            return pipeline.weigh(session, pipeline.make_or_load(session, isolate=True))

    def applied(self, confirm: Callable[[], bool] | None = None) -> pipeline.Applied:
        with open_session(self.options) as session:
            plan = pipeline.make_or_load(session, isolate=False)
            return pipeline.apply(session, plan, saved=False, confirm=confirm)

    def applied_each(self, confirm: Callable[[], bool] | None = None) -> pipeline.AppliedEach:
        with open_session(self.options) as session:
            plan = pipeline.make_or_load(session, isolate=True)
            return pipeline.apply_each(session, plan, saved=False, confirm=confirm)
