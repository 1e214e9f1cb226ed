"""Fixtures of the manifest's tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in ``tmp_path`` so that messages name ``gitops.yaml`` as a user would type it."""
    monkeypatch.chdir(tmp_path)
    return tmp_path
