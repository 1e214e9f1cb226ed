"""The phases of planning one branch (``gitops.core.plan``) that carry a rule of their own."""

from __future__ import annotations

from gitops.core.endpoints import ACTIVATE, CLONE, UPLOAD
from gitops.core.plan import _steps


def test_a_new_branch_is_cloned_with_its_modules_never_uploaded_after() -> None:
    steps, action = _steps(exists=False, upload_needed=False, activate=["world"])
    assert [(s.kind, s.request) for s in steps] == [("clone-branch", CLONE), ("activate", ACTIVATE)]
    assert action == "create"


def test_an_existing_branch_is_updated_activated_or_left_alone() -> None:
    steps, action = _steps(exists=True, upload_needed=True, activate=[])
    assert ([(s.kind, s.request) for s in steps], action) == ([("upload", UPLOAD)], "update")
    steps, action = _steps(exists=True, upload_needed=False, activate=["sim"])
    assert ([s.which for s in steps], action) == (["sim"], "activate")
    assert _steps(exists=True, upload_needed=False, activate=[]) == ([], "none")
