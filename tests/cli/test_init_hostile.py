"""``gitops init`` writes outside text (a server's ``/api/version``, a ``.screeps.yaml``'s entry names) only through
the YAML serializer and its comment escaping: nothing it finds can add a key to gitops.yaml (a ``build:`` that the
next ``gitops validate`` runs), or act on the terminal that shows it (issue 37)."""

from __future__ import annotations

import json
import os
import stat
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops.app.scaffold import ServerChoice, check_reads_back, manifest_data, manifest_text
from gitops.app.serverprobe import PROBE_SECONDS
from gitops.cli import run
from gitops.core.layout import Layout
from gitops.errors import ExitCode, ManifestError
from tests.factories import make_repo
from tests.hostile import answer, dribble, gzip_bomb, hostile_server, silence

MAIN = {"main.js": "module.exports.loop = () => {};\n"}
#: Each ends a comment line (YAML and terminals know these line breaks) and adds a top-level build.
BREAKS = ["\n", "\r", "\r\n", "\x85", "\u2028", "\u2029"]


def gitops(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def loaded(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def builds(data: dict[str, Any]) -> list[object]:
    return [data[k] for k in data if k == "build"] + [b.get("build") for b in data["branches"] if "build" in b]


@pytest.mark.parametrize("brk", BREAKS, ids=[f"U+{ord(c[0]):04X}{len(c)}" for c in BREAKS])
def test_a_hostile_package_version_adds_no_key_and_validate_runs_nothing(
    brk: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path / "bot", MAIN)
    pwned = tmp_path / "pwned"
    version = f"4.3.0{brk}build: touch {pwned} #"
    body = json.dumps({"ok": 1, "protocol": 14, "packageVersion": version, "serverData": {}}).encode()
    with hostile_server(answer(body)) as server:
        code, out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"), "--server", server.url)
    assert code == 0, err
    data = loaded(repo / "gitops.yaml")
    assert builds(data) == []
    assert set(data) == {"version", "servers", "branches", "budget"}
    assert "(server package 4.3.0" in out
    code, _, err = gitops(capsys, "validate", "-m", str(repo / "gitops.yaml"))
    assert code == 0, err
    assert not pwned.exists()


def test_a_package_version_with_terminal_sequences_is_shown_inert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path / "bot", MAIN)
    version = "4.3.0\x1b]0;title\x07\x1b]52;c;ZXZpbA==\x07\x9b2J\n::add-mask::x"
    body = json.dumps({"ok": 1, "packageVersion": version}).encode()
    with hostile_server(answer(body)) as server:
        code, out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"), "--server", server.url)
    assert code == 0, err
    assert not {"\x1b", "\x07", "\x9b"} & set(out + err)
    assert "(server package 4.3.0\\u001b]0;title\\u0007\\u001b]52;c;ZXZpbA==\\u0007\\u009b2J\\n::add-mask::x)" in out
    assert not [line for line in out.splitlines() if line.lstrip().startswith("::")]
    text = (repo / "gitops.yaml").read_text(encoding="utf-8")
    assert "\x1b" not in text
    assert "package 4.3.0\\u001b]0;title" in text
    assert gitops(capsys, "validate", "-m", str(repo / "gitops.yaml"))[0] == 0


@pytest.mark.parametrize("brk", BREAKS, ids=[f"U+{ord(c[0]):04X}{len(c)}" for c in BREAKS])
def test_a_credentials_entry_name_with_line_breaks_adds_no_key(
    brk: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pwned = tmp_path / "pwned"
    name = f"home{brk}build: touch {pwned} #"
    credentials = yaml.safe_dump({"servers": {name: {"host": "screeps.com", "secure": True, "token": "x" * 12}}})
    repo = make_repo(tmp_path / "bot", {**MAIN, ".gitignore": ".screeps.yaml\n", ".screeps.yaml": credentials})
    code, out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"))
    if code == 0:
        assert builds(loaded(repo / "gitops.yaml")) == []
        gitops(capsys, "validate", "-m", str(repo / "gitops.yaml"))
    else:  # refused: one clear message, nothing written
        assert code in (ExitCode.USAGE, ExitCode.MANIFEST), err
        assert not (repo / "gitops.yaml").exists()
        assert "Traceback" not in err
    assert not pwned.exists()
    assert not {"\x85", "\u2028", "\r"} & set(out)


def test_a_credentials_entry_name_reaches_the_build_command_quoted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pwned = tmp_path / "pwned"
    name = f"main;touch {pwned}"
    credentials = yaml.safe_dump({"servers": {name: {"host": "screeps.com", "secure": True, "token": "x" * 12}}})
    package = {"scripts": {"deploy": "node js_tools/deploy.js"}}
    repo = make_repo(
        tmp_path / "bot",
        {
            **MAIN,
            "package.json": json.dumps(package),
            "Cargo.toml": "[package]\nname = 'bot'\n",
            ".example-screeps.yaml": credentials,
        },
    )
    code, _, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"), "--token-env", "T")
    assert code == 0, err
    assert builds(loaded(repo / "gitops.yaml")) == [f"npm run deploy -- --server 'main;touch {pwned}' --dryrun"]


def test_a_text_that_reads_back_as_something_else_is_refused() -> None:
    layout = Layout("flat", ".", ".", ("*.js",))
    server = ServerChoice("mmo")
    meant = manifest_data(layout, server, "default")
    text = manifest_text(layout, server, "default")
    check_reads_back(text, meant, where="gitops.yaml")
    with pytest.raises(ManifestError, match="does not read back as what it meant to write; nothing was written"):
        check_reads_back(text + "build: evil\n", meant, where="gitops.yaml")
    with pytest.raises(ManifestError):
        check_reads_back("servers: [", meant, where="gitops.yaml")


def test_init_honours_the_umask(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path / "bot", MAIN)
    before = os.umask(0o022)
    try:
        code, _, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"))
    finally:
        os.umask(before)
    assert code == 0, err
    assert stat.S_IMODE((repo / "gitops.yaml").stat().st_mode) == 0o644
    assert not [p.name for p in repo.iterdir() if p.name.startswith(".gitops-init-")]


def test_init_says_it_added_the_credentials_file_to_gitignore(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path / "bot", MAIN)
    code, out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"), "--credentials", "main")
    assert code == 0, err
    assert f"Added .screeps.yaml to {repo / '.gitignore'}: " in out
    assert "Added .gitignore" not in out


@pytest.mark.parametrize("behaviour", ["slow headers", "slow body", "gzip bomb", "silence"])
def test_the_version_probe_is_bounded_in_time_and_memory(
    behaviour: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    behaviours = {
        "slow headers": dribble(b"HTTP/1.1 200 OK\r\nX-Slow: ", every=1.0),  # a byte a second
        "slow body": dribble(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n{", every=1.0),
        "gzip bomb": gzip_bomb,
        "silence": silence,
    }
    repo = make_repo(tmp_path / "bot", MAIN)
    with hostile_server(behaviours[behaviour]) as server:
        started = time.monotonic()
        if behaviour == "gzip bomb":  # traced only there: tracing slows the timed cases
            tracemalloc.start()
        try:
            code, out, err = gitops(capsys, "init", "-m", str(repo / "gitops.yaml"), "--server", server.url)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        took = time.monotonic() - started
    assert code == 0, err
    assert took < PROBE_SECONDS + 4
    assert peak < 16 * 1024 * 1024  # the bomb inflates to 80 MiB: only the cap's worth is ever held
    assert f"assumed: {server.url} could not be reached, and it is not screeps.com" in out
    assert loaded(repo / "gitops.yaml")["servers"]["local"]["password_env"] == "SCREEPS_PASSWORD"
