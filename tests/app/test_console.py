"""``gitops console`` against the stand-in's game socket: lines, errors, JSON lines, redaction, bounded in time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gitops.standin.testing import ALICE, FULL_TOKEN, StandIn
from tests.project import Project


def _project(tmp_path: Path, standin: StandIn, capsys: Any, monkeypatch: Any) -> Project:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": "module.exports.loop = () => {};\n"})
    p.manifest([{"branch": "main", "root": "src", "activate": ["world"]}])
    p.commit()
    assert p.apply("--yes").code == 0
    standin.set_tick_seconds(0.02)
    standin.console_rule(ALICE, log=["harvesting", f"leaked {FULL_TOKEN}"], error="Error: boom")
    return p


def test_console_streams_lines_and_errors_redacted(
    tmp_path: Path, standin: StandIn, capsys: Any, monkeypatch: Any
) -> None:
    p = _project(tmp_path, standin, capsys, monkeypatch)
    # Long enough for several 0.02 s ticks on a loaded machine (a tick's log and its error are two messages).
    result = p.gitops("console", "--seconds", "2")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert "harvesting" in lines
    assert "ERROR: Error: boom" in lines
    assert "leaked <hidden>" in lines
    assert FULL_TOKEN not in result.out + result.err


def test_console_json_is_one_object_a_line(tmp_path: Path, standin: StandIn, capsys: Any, monkeypatch: Any) -> None:
    p = _project(tmp_path, standin, capsys, monkeypatch)
    result = p.gitops("console", "--json", "--seconds", "2")
    assert result.code == 0, result.err
    docs = [json.loads(line) for line in result.out.splitlines()]
    assert {"type": "log", "text": "harvesting", "shard": None} in docs
    assert {"type": "error", "text": "Error: boom", "shard": None} in docs


def test_console_refused_socket_is_a_clear_error(
    tmp_path: Path, standin: StandIn, capsys: Any, monkeypatch: Any
) -> None:
    p = _project(tmp_path, standin, capsys, monkeypatch)
    standin.app.sockets.max_sockets = 0
    result = p.gitops("console", "--seconds", "0.5")
    assert result.code == 1
    assert "the console cannot be read: the server refused the socket" in result.err
    assert "Traceback" not in result.err


def test_console_text_is_decoded_as_the_games_client_shows_it_then_made_inert(
    tmp_path: Path, standin: StandIn, capsys: Any, monkeypatch: Any
) -> None:
    # The game's server sends console text HTML-encoded (&#x22; for every quote, &lt; for <); the client decodes it.
    p = _project(tmp_path, standin, capsys, monkeypatch)
    standin.clear_console_rules()
    token_as_entities = "".join(f"&#x{ord(c):x};" for c in FULL_TOKEN)
    standin.console_rule(
        ALICE,
        log=["say &#x22;hi&#x22; &amp; &lt;b&gt;", "\x1b[31mred &#x22;x&#x22;", f"token {token_as_entities}"],
        error="Error: &#x22;boom&#x22; at &lt;runtime&gt;",
    )
    result = p.gitops("console", "--seconds", "2")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert 'say "hi" & <b>' in lines
    assert '\\u001b[31mred "x"' in lines  # decoded, and the escape still made inert
    assert "token <hidden>" in lines
    assert 'ERROR: Error: "boom" at <runtime>' in lines
    assert "&#x22;" not in result.out
    assert "\x1b" not in result.out
    assert FULL_TOKEN not in result.out + result.err
