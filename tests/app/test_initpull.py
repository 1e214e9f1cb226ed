"""``gitops/app/initpull.py``: ``init --pull``'s downloads, from the stand-in on a loopback port before the manifest
exists on disk, and the layout widened until a pull writes every module where the manifest reads it back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gitops.app.initpull import download_branches, fit_to_server
from gitops.app.options import Options
from gitops.config.manifest import manifest_from_data
from gitops.config.model import BranchConfig
from gitops.core.codeset import CodeSet, Module
from gitops.core.layout import Layout
from gitops.standin.testing import ALICE, FULL_TOKEN, StandIn
from tests.project import edit_on_server


def _text(url: str, branches: list[str]) -> str:
    data = {
        "version": 1,
        "servers": {"local": {"url": url, "token_env": "SCREEPS_TOKEN"}},
        "branches": [{"server": "local", "branch": b, "root": "src"} for b in branches],
    }
    return yaml.safe_dump(data, sort_keys=False)


def test_each_branch_is_downloaded_once_before_the_manifest_is_written(tmp_path: Path, standin: StandIn) -> None:
    edit_on_server(standin, "default", {"main": "module.exports.loop = () => {};"})
    before = standin.count("GET /api/user/code", ALICE)
    options = Options(manifest=tmp_path / "gitops.yaml", env={"SCREEPS_TOKEN": FULL_TOKEN}, state_dir=tmp_path / "s")
    found = download_branches(options, _text(standin.url, ["default", "absent"]), tmp_path / "gitops.yaml")
    main = found[("local", "default")]
    assert main is not None
    assert {m.name: m.text for m in main} == {"main": "module.exports.loop = () => {};"}
    assert found[("local", "absent")] is None
    assert standin.count("GET /api/user/code", ALICE) - before == 2
    assert not (tmp_path / "gitops.yaml").exists()


def _render(layout: Layout) -> BranchConfig:
    branch: dict[str, Any] = {
        "server": "local",
        "branch": "main",
        "root": layout.root,
        "include": list(layout.include),
        "binary": list(layout.binary),
        "naming": {"separator": layout.separator},
    }
    if layout.source_maps is not None:
        branch["source_maps"] = layout.source_maps
    servers = {"local": {"url": "http://127.0.0.1:21025", "token_env": "SCREEPS_TOKEN"}}
    return manifest_from_data({"version": 1, "servers": servers, "branches": [branch]}).branches[0]


def test_the_layout_widens_until_every_module_reads_back() -> None:
    flat = Layout(kind="flat", root="src", separator=".", include=("**/*.js",))
    code = CodeSet.of(
        [
            Module("main", text="x"),
            Module("lib/util", text="y"),
            Module("data.bin", binary=b"\x00"),
        ]
    )
    wider = fit_to_server(flat, code, [], _render)
    assert (wider.separator, wider.include, wider.binary) == ("/", ("**/*.js", "**/*.bin"), ("**/*.wasm", "**/*.bin"))
    assert wider.seen == (
        "the server's module names hold '/': the separator is '/'",
        "binary module 'data.bin' on the server: **/*.bin is included as binary",
    )


def test_a_layout_that_reads_everything_back_is_kept() -> None:
    flat = Layout(kind="flat", root="src", separator="/", include=("**/*.js",))
    # A map module is written as main.js.map.js (rollup-plugin-screeps' convention), which **/*.js reads back.
    code = CodeSet.of([Module("main", text="x"), Module("main.js.map", text='{"version":3}')])
    assert fit_to_server(flat, code, ["main.js"], _render) == flat
