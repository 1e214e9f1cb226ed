"""The token query carries the token in its URL (``GET /api/auth/query-token?token=``: the interface document's
only form, section 4.2), so that URL is never shown whole (issue 37): not in the debug lines, not in any library's
log at DEBUG, not in the error of a failed query, whatever the failure."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml

from gitops.cli import run
from gitops.standin.testing import FULL_TOKEN, StandIn


@pytest.mark.parametrize("fault", [None, "500", "drop", "html", "badjson"])
def test_the_token_query_never_shows_its_url_whole(
    fault: str | None,
    tmp_path: Path,
    standin: StandIn,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SCREEPS_TOKEN", FULL_TOKEN)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.js").write_text("module.exports.loop = () => {};\n", encoding="utf-8")
    manifest = tmp_path / "gitops.yaml"
    servers = {"official": {"url": standin.url, "token_env": "SCREEPS_TOKEN"}}
    branches = [{"server": "official", "branch": "main", "root": "src"}]
    manifest.write_text(yaml.safe_dump({"version": 1, "servers": servers, "branches": branches}), encoding="utf-8")
    if fault is not None:
        standin.inject_fault("GET /api/auth/query-token", fault, count=10)
    caplog.set_level(logging.DEBUG)  # every library's log, httpx's and httpcore's included
    code = run(["token", "--debug", "-m", str(manifest), "--state-dir", str(tmp_path / "state")], clock=standin.clock)
    out, err = capsys.readouterr()
    shown = out + err + caplog.text
    assert code == (0 if fault is None else 1), err
    assert FULL_TOKEN not in shown
    assert FULL_TOKEN[:8] not in shown  # not even the prefix the official server echoes
    assert "/api/auth/query-token?token=<hidden>" in err  # the debug line names the request, its token hidden
    assert "Traceback" not in err
