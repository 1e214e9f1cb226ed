"""``gitops/core/applied.py``: the last applied record is a frozen value of digests and sizes, never text."""

from __future__ import annotations

import dataclasses

import pytest

from gitops.core.applied import AppliedRecord
from gitops.core.remote import ModuleFacts


def _record(**changes: object) -> AppliedRecord:
    facts = {"main": ModuleFacts("main", digest="ab" * 32, size=12, is_binary=False)}
    fields: dict[str, object] = {
        "branch": "main",
        "modules": facts,
        "digest": "cd" * 32,
        "applied_at": 1_800_000_000.0,
        "how": "upload",
    }
    return AppliedRecord(**{**fields, **changes})  # type: ignore[arg-type]


def test_a_record_is_frozen_and_compared_by_value() -> None:
    record = _record()
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.digest = "other"  # type: ignore[misc]
    assert record == _record()
    assert record != _record(how="verified")
    assert record != _record(commit="1a2b3c")


def test_a_record_has_no_room_for_anything_but_its_fields() -> None:
    # slots: a record read from a ledger cannot grow an attribute (a module's text, say) by accident
    with pytest.raises((AttributeError, TypeError)):
        _record().text = "module.exports.loop = () => {};"  # type: ignore[attr-defined]
    assert (_record().commit, _record().source) == (None, None)
    assert [f.name for f in dataclasses.fields(AppliedRecord)] == [
        "branch",
        "modules",
        "digest",
        "applied_at",
        "how",
        "commit",
        "source",
    ]
