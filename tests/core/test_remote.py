"""How planning learns a branch (``gitops.core.remote.how_to_learn``): verified by the branch list when it can be, never
stated as current from a record that the list shows is out of date."""

from __future__ import annotations

import dataclasses

import pytest

from gitops.core.remote import BranchInfo, RemoteBranch, how_to_learn, normal_stamp
from tests.core.factories import NOW, on_server

TRUST = 600.0


def decide(
    remembered: RemoteBranch | None,
    listed: BranchInfo | None,
    *,
    listing_known: bool = True,
    refresh: str = "auto",
    needs_content: bool = False,
) -> str:
    return how_to_learn(
        remembered,
        listed,
        listing_known=listing_known,
        refresh=refresh,
        needs_content=needs_content,
        trust_seconds=TRUST,
        now=NOW,
    )


OWN = dataclasses.replace(on_server("main", {"main": "x"}, how="own-upload", ago=60), stamp="1000")


def test_the_lists_modules_are_the_download() -> None:
    entry = BranchInfo("main", stamp="2000", modules={"main": "y"})
    assert decide(OWN, entry) == "list"
    assert decide(None, entry) == "list"
    assert decide(OWN, entry, needs_content=True) == "list"  # the list carries the texts too


def test_a_branch_the_list_does_not_have_is_missing_without_a_download() -> None:
    assert decide(OWN, None) == "missing"
    assert decide(OWN, None, refresh="always") == "missing"
    assert decide(OWN, None, listing_known=False) == "unverified"  # no list: the trust window decides


def test_an_unchanged_stamp_confirms_the_record_and_a_changed_one_downloads() -> None:
    assert decide(OWN, BranchInfo("main", stamp="1000")) == "confirmed"
    # An edit outside the tool within the trust window: the list's stamp moved on.
    assert decide(OWN, BranchInfo("main", stamp="1001")) == "download"
    old = dataclasses.replace(OWN, how="download", learnt_at=NOW - 86400)
    assert decide(old, BranchInfo("main", stamp="1000")) == "confirmed"  # a record of any age, if unchanged


def test_without_a_usable_stamp_the_trust_window_decides_and_stays_unverified() -> None:
    unstamped = dataclasses.replace(OWN, stamp=None)
    assert decide(unstamped, BranchInfo("main", stamp="1000")) == "unverified"
    assert decide(OWN, BranchInfo("main")) == "unverified"
    late = dataclasses.replace(OWN, learnt_at=NOW - TRUST - 1)
    assert decide(late, BranchInfo("main")) == "download"
    downloaded = dataclasses.replace(OWN, how="download", stamp=None)
    assert decide(downloaded, BranchInfo("main")) == "download"
    assert decide(OWN, BranchInfo("main"), needs_content=True) == "download"  # kept modules need their texts
    assert decide(None, BranchInfo("main", stamp="1")) == "download"


def test_refresh_never_and_always() -> None:
    assert decide(OWN, BranchInfo("main", stamp="9"), refresh="never") == "unverified"
    assert decide(None, None, refresh="never", listing_known=False) == "unverified"
    assert decide(OWN, BranchInfo("main", stamp="1000"), refresh="always") == "download"


@pytest.mark.parametrize(
    ("raw", "stamp"),
    [
        (1790000000123, "1790000000123"),
        (1790000000123.0, "1790000000123"),
        (1.5, "1.5"),
        ("2026-11-22T21:50:03.000Z", "2026-11-22T21:50:03.000Z"),
        (None, None),
        (True, None),
        ("", None),
        ("x" * 65, None),
        (float("nan"), None),
        (10**20, None),
        ({"$date": 1}, None),
    ],
)
def test_normal_stamp(raw: object, stamp: str | None) -> None:
    assert normal_stamp(raw) == stamp


def test_verified_follows_the_basis() -> None:
    assert on_server("main", {"main": "x"}).verified
    assert not OWN.verified
    assert dataclasses.replace(OWN, basis="branch-list").verified
    assert OWN.current_basis == "own-upload"
