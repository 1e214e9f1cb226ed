"""A one-server project for the plan's modules (``gitops/app/planning.py`` and its siblings): a manifest naming the
stand-in, one branch read from ``src/``, and the run's options with the token given."""

from __future__ import annotations

import json
from pathlib import Path

from gitops.app.options import Options
from gitops.standin.testing import FULL_TOKEN


def one_server(tmp_path: Path, url: str, *, token: str = FULL_TOKEN, state: str = "state") -> Options:
    manifest = tmp_path / "gitops.yaml"
    servers = {"s": {"url": url, "token_env": "SCREEPS_TOKEN"}}
    branches = [{"server": "s", "branch": "main", "root": "src"}]
    manifest.write_text(json.dumps({"version": 1, "servers": servers, "branches": branches}), encoding="utf-8")
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "main.js").write_text("module.exports.loop = () => {};\n", encoding="utf-8")
    return Options(manifest=manifest, env={"SCREEPS_TOKEN": token}, state_dir=tmp_path / state)
