"""The quick start's main job, as a new user meets it from this checkout, and the package list the wheel is built
from. The built wheel itself, installed into a fresh virtual environment as ``pip install`` / ``pipx install`` would,
is tested in tests/installed/ (its own step of scripts/test.sh)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from gitops.cli import run

ROOT = Path(__file__).resolve().parent.parent


def _check_demo_output(text: str) -> None:
    assert "Local stand-in service running at http://127.0.0.1:" in text
    assert "== gitops apply --yes" in text
    # The second plan finds nothing left to do, and the server holds the example's modules.
    assert text.count("(exit code 0)") >= 2
    assert "No changes" in text
    assert "main (active: world)" in text
    assert "role/harvester" in text
    assert "run 'gitops init'" in text  # the demo's last line leads to init


def test_every_subpackage_is_listed_for_the_wheel() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "gitops").rglob("__init__.py")} | {
        "gitops._examples",
        "gitops._docs",  # docs/, shipped for 'gitops help TOPIC'
        "gitops._privateserver",  # scripts/private-server/, shipped for 'gitops rehearse'
    }
    # The bundled example's folders are listed too (setuptools warns about folders it is not told of).
    examples = ROOT / "examples"
    found |= {
        ".".join(["gitops._examples", *folder.relative_to(examples).parts])
        for folder in (examples / "basic").rglob("*")
        if folder.is_dir()
    } | {"gitops._examples.basic"}
    assert listed == found, "pyproject.toml [tool.setuptools] packages must list every package of gitops/"


def test_demo_from_the_checkout(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(["demo"]) == 0
    _check_demo_output(capsys.readouterr().out)
