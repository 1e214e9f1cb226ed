"""A manifest path longer than the system takes (ENAMETOOLONG) is the person's to fix, not a bug (issue 37): every
command that takes -m gives one clear message with its exit code, never exit 70 or a traceback."""

from __future__ import annotations

import pytest

from gitops.cli import run
from gitops.errors import ExitCode

LONG = "a" * 5000


@pytest.mark.parametrize(
    ("command", "code"),
    [
        ("validate", ExitCode.MANIFEST),
        ("plan", ExitCode.MANIFEST),
        ("apply", ExitCode.MANIFEST),
        ("pull", ExitCode.MANIFEST),
        ("drift", ExitCode.MANIFEST),
        ("console", ExitCode.MANIFEST),
        ("watch", ExitCode.MANIFEST),
        ("init", ExitCode.USAGE),
    ],
)
def test_a_5000_character_manifest_path_is_a_clear_error(
    command: str, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [command, "-m", LONG] + (["--yes"] if command == "apply" else [])
    assert run(args) == code
    err = capsys.readouterr().err
    assert "File name too long" in err
    assert "a shorter path with -m/--manifest" in err
    assert "internal error" not in err
    assert "Traceback" not in err
    assert len(err) < 1000  # the path is shortened in the message
