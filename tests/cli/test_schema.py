"""``gitops schema`` (``gitops/cli/schema.py``): the manifest's JSON Schema, in a module of its own so that
``gitops validate`` never imports the validator it needs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gitops.cli import run

ROOT = Path(__file__).resolve().parents[2]


def test_schema_prints_the_committed_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["schema"]) == 0
    out = capsys.readouterr().out
    assert out.encode("utf-8") == (ROOT / "schemas" / "gitops.schema.json").read_bytes()
    assert json.loads(out)["title"]


def test_the_validate_command_does_not_import_the_validator() -> None:
    code = (
        "import sys, gitops.cli.validate; print('pydantic' in sys.modules, 'gitops.config.validation' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.split() == ["False", "False"]
    code = "import sys, gitops.cli.schema; print('gitops.config.validation' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.split() == ["True"]  # the check sees the real import
