"""``gitops/edges/ledger/format.py``: the ledger file's bytes: compact JSON with a ``check`` that tells a file gitops
wrote from one edited, cut or written by something else; only the latter is validated."""

from __future__ import annotations

import json

import pytest

from gitops.edges.ledger.format import (
    CHECK_HEAD,
    FORMAT_VERSION,
    BranchEntry,
    LedgerData,
    ModuleEntry,
    NotALedger,
    checked_body,
    decode,
    dump,
    signed,
)


def _data() -> LedgerData:
    data = LedgerData(format_version=FORMAT_VERSION, server_url="https://screeps.com", fingerprint=None, saved_at=5.0)
    data.branches["main"] = BranchEntry(
        exists=True,
        digest="ab" * 32,
        modules={"main": ModuleEntry(digest="cd" * 32, size=3, binary=False)},
        learnt_at=4.0,
        how="download",
    )
    data.sent["GET /api/user/code"] = [(1.0, 1)]
    return data


def test_a_file_gitops_wrote_reads_back_without_validation() -> None:
    raw = signed(dump(_data()))
    assert raw.endswith(b'"}\n')
    assert CHECK_HEAD in raw
    data, validated = decode(raw)
    assert validated is False
    assert data.branches["main"].modules == _data().branches["main"].modules
    assert data.sent == {"GET /api/user/code": [(1.0, 1)]}
    assert checked_body(raw) == dump(_data())


def test_an_edited_file_is_validated_and_still_read() -> None:
    raw = signed(dump(_data())).replace(b'"saved_at":5.0', b'"saved_at":6.0')
    assert checked_body(raw) is None
    data, validated = decode(raw)
    assert validated is True
    assert data.saved_at == 6.0


def test_a_file_without_a_check_is_validated() -> None:
    data, validated = decode(dump(_data()))
    assert validated is True
    assert data.server_url == "https://screeps.com"


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"not json", "not valid JSON"),
        (b"[" * 5000 + b"]" * 5000, "not valid JSON"),
        (json.dumps({"format_version": 99}).encode(), "format_version 99, expected 1"),
        (json.dumps({"format_version": 1, "server_url": 3}).encode(), "not shaped as a ledger"),
    ],
)
def test_what_is_no_ledger_says_why(raw: bytes, why: str) -> None:
    with pytest.raises(NotALedger) as refused:
        decode(raw)
    assert refused.value.args[0] == why


def test_a_lone_surrogate_in_a_name_reads_back_unchanged() -> None:
    data = _data()
    data.branches["\udce9"] = data.branches.pop("main")
    back, _ = decode(signed(dump(data)))
    assert list(back.branches) == ["\udce9"]
