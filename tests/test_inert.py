"""Everything printed from a server is inert (issue 37): terminal escape sequences and GitHub workflow commands in
game console text, verify's reports, socket close reasons and error bodies are shown as text, never acted on; and
the game socket never follows a redirect with the token."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import click
import pytest

from gitops.edges.socket import SocketProblem, console_events, parse_frame, socket_url
from gitops.github.runner import annotation, log_text
from gitops.inert import inert
from gitops.render.plan import render_text
from gitops.secrets import Secret
from gitops.standin.testing import ALICE, FULL_TOKEN, StandIn
from tests.core.factories import NOW
from tests.hostile import answer, hostile_server, silence
from tests.project import Project
from tests.render.test_plan import mixed_plan

#: A window title, the clipboard (OSC 52), a hidden link (OSC 8), a C1 CSI that clears the screen, a carriage
#: return that overwrites the line, and line breaks that begin workflow commands.
HOSTILE = (
    "hi\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07\x1b]8;;https://evil.example\x07link\x1b]8;;\x07\x9b2J\rover"
    "\n::add-mask::hi\n  ::warning::fake\n##[error]old\u2028x"
)


def acting(text: str) -> list[str]:
    """What in ``text`` a terminal or the Actions runner would act on."""
    found = re.findall(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]", text)
    found += [line for line in text.splitlines() if line.lstrip().startswith(("::", "##["))]
    return found


def test_inert_shows_sequences_as_text_and_keeps_line_breaks() -> None:
    shown = inert(HOSTILE)
    assert acting(shown) == []
    assert shown.startswith("hi\\u001b]0;pwned\\u0007\\u001b]52;c;ZXZpbA==\\u0007")
    assert "\\u009b2J\\rover\n\\::add-mask::hi\n  \\::warning::fake\n\\##[error]old\\u2028x" in shown
    assert inert("plain text\nsecond line\ttab") == "plain text\nsecond line\ttab"
    assert "\n" not in inert(HOSTILE, one_line=True)
    assert inert("\udc80") == "\\udc80"  # a lone surrogate would make printing fail
    assert json.loads(inert(json.dumps({"t": "\x9b\x1b"}, ensure_ascii=False))) == {"t": "\x9b\x1b"}


def test_invisible_characters_are_shown_but_emoji_joiners_are_kept() -> None:
    """A zero width space or word joiner hides a difference between two names (``main\u200b.js``); the zero width
    joiner of an emoji sequence is ordinary text."""
    assert inert("main\u200b.js \u2060x \ufeffy \u180ez") == "main\\u200b.js \\u2060x \\ufeffy \\u180ez"
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    assert inert(family) == family


def test_an_annotation_and_a_log_line_of_the_action_are_inert() -> None:
    line = annotation("warning", f"closed: {HOSTILE}")
    prefix = "::warning title=screeps-gitops::"
    assert line.startswith(prefix)
    assert acting(line.removeprefix(prefix)) == []
    assert "\n" not in line
    assert acting(log_text(f"verify mmo/main: {HOSTILE}")) == []


def test_a_close_reason_is_one_inert_line() -> None:
    with pytest.raises(SocketProblem) as caught:
        parse_frame(f'c[3000,"{HOSTILE}"]')  # as a server writes it, its line breaks raw
    assert acting(str(caught.value)) == []
    assert "\n" not in str(caught.value)
    assert "\\rover\\n::add-mask::hi\\n" in str(caught.value)


def _project(tmp_path: Path, standin: StandIn, capsys: Any, monkeypatch: Any) -> Project:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": "module.exports.loop = () => {};\n"})
    p.manifest([{"branch": "main", "root": "src", "activate": ["world"]}])
    p.commit()
    assert p.apply("--yes").code == 0
    standin.set_tick_seconds(0.02)
    return p


@pytest.mark.parametrize("as_json", [False, True])
def test_console_output_is_inert(
    as_json: bool, tmp_path: Path, standin: StandIn, capsys: Any, monkeypatch: Any
) -> None:
    p = _project(tmp_path, standin, capsys, monkeypatch)
    standin.console_rule(ALICE, log=[HOSTILE], error=f"Error: {HOSTILE}")
    result = p.gitops("console", "--seconds", "2", *(["--json"] if as_json else []))
    assert result.code == 0, result.err
    assert "\\u001b]52;c;ZXZpbA==" in result.out
    assert acting(result.out) == []
    assert acting(result.err) == []
    if as_json:
        docs = [json.loads(line) for line in result.out.splitlines()]
        assert {"type": "log", "text": HOSTILE, "shard": None} in docs  # the JSON still says what was logged


def test_verify_report_is_inert(tmp_path: Path, standin: StandIn, capsys: Any, monkeypatch: Any) -> None:
    p = _project(tmp_path, standin, capsys, monkeypatch)
    standin.console_rule(ALICE, contains="THROWS", error=f"TypeError: {HOSTILE}")
    p.write({"src/main.js": "module.exports.loop = () => { THROWS.x.y; };\n"})
    verify = {"ticks": 3, "timeout": 30, "on_failure": "report"}
    p.manifest([{"branch": "main", "root": "src", "activate": ["world"], "verify": verify}])
    p.commit("v2")
    result = p.apply("--yes")
    assert result.code == 9, result.err
    assert "error: TypeError: hi\\u001b]0;pwned" in result.out + result.err
    assert acting(result.out + result.err) == []


def test_a_rollbacks_report_is_inert(tmp_path: Path, standin: StandIn, capsys: Any, monkeypatch: Any) -> None:
    """Issue 45: ``gitops rollback`` shows the game's text through the same presenter as ``apply``: a rollback to
    code that throws a hostile error prints that error inert (it printed it raw)."""
    p = _project(tmp_path, standin, capsys, monkeypatch)  # deploy #1, healthy
    standin.console_rule(ALICE, contains="THROWS", error=f"TypeError: {HOSTILE}")
    verify = {"ticks": 3, "timeout": 30, "on_failure": "report"}
    p.manifest([{"branch": "main", "root": "src", "activate": ["world"], "verify": verify}])
    p.write({"src/main.js": "module.exports.loop = () => { THROWS.x.y; };\n"})
    p.commit("v2")
    assert p.apply("--yes").code == 9  # deploy #2 fails in the game, left in place
    p.write({"src/main.js": "module.exports.loop = () => 3;\n"})
    p.commit("v3")
    assert p.apply("--yes").code == 0  # deploy #3 healthy
    result = p.gitops("rollback", "--to", "2", "--yes")
    assert result.code == 9, result.err
    assert "error: TypeError: hi\\u001b]0;pwned" in result.out
    assert acting(result.out + result.err) == []


def test_the_game_socket_never_follows_a_redirect() -> None:
    with hostile_server(silence) as elsewhere:
        location = elsewhere.url.replace("http://", "ws://") + "/socket/websocket"
        redirect = answer(b"", status=b"302 Found", headers=f"Location: {location}\r\n".encode())
        with hostile_server(redirect) as server:
            events, problem = console_events(
                socket_url(server.url), Secret(FULL_TOKEN), "u1", seconds=5, enough=lambda _: False
            )
        assert server.connections == 1
        assert elsewhere.connections == 0  # nothing connected there, so no token was sent there
    assert events == []
    assert problem is not None
    assert f"the server at {socket_url(server.url)} answered the socket's upgrade with a redirect (302 to " in problem
    assert "never follows one" in problem
    assert FULL_TOKEN not in problem


def test_the_plan_text_in_colour_carries_only_its_own_colours() -> None:
    hostile = dataclasses.replace(mixed_plan(), warnings=[f"server said: {HOSTILE}"])
    coloured = render_text(hostile, now=NOW, color=True)
    plain = click.unstyle(coloured)
    assert acting(plain) == []  # everything left once click's own styling is taken away is inert
    assert "\\u001b]52;c;ZXZpbA==" in plain
    assert acting(render_text(hostile, now=NOW)) == []
