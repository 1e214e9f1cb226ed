"""The README's exit-code table and :class:`gitops.errors.ExitCode` are the same table."""

from __future__ import annotations

import re
from pathlib import Path

from gitops.errors import (
    ApplyError,
    AuthError,
    BudgetError,
    ExitCode,
    ManifestError,
    PlanFileError,
    ServiceError,
    SourceError,
    UsageError,
)

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_exit_codes() -> dict[int, str]:
    """The rows of the table under the ``| exit code | meaning |`` header: code -> meaning."""
    lines = README.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if re.fullmatch(r"\|\s*exit code\s*\|\s*meaning\s*\|", line))
    rows: dict[int, str] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        code, meaning = (cell.strip() for cell in line.strip("|").split("|", 1))
        assert code.isdigit(), f"README exit-code row without a number: {line}"
        assert int(code) not in rows, f"README lists exit code {code} twice"
        rows[int(code)] = meaning
    return rows


def test_the_readme_table_is_the_enum() -> None:
    rows = readme_exit_codes()
    assert sorted(rows) == sorted(int(code) for code in ExitCode)
    for code in ExitCode:
        assert rows[code], f"exit code {code} ({code.name}) has an empty row in the README"


def test_each_error_class_exits_with_its_documented_code() -> None:
    expected = {
        ServiceError: ExitCode.FAILURE,
        ApplyError: ExitCode.FAILURE,
        BudgetError: ExitCode.BUDGET,
        UsageError: ExitCode.USAGE,
        ManifestError: ExitCode.MANIFEST,
        SourceError: ExitCode.LOCAL_CODE,
        AuthError: ExitCode.CREDENTIALS,
        PlanFileError: ExitCode.PLAN_FILE,
    }
    for cls, code in expected.items():
        assert cls.exit_code is code, cls.__name__
