"""``gitops/config/cachecheck.py``: a cached, validated manifest is used only when the file writes exactly it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gitops.config.cachecheck import entry_matches_file
from gitops.config.manifest import manifest_from_data

DATA: dict[str, Any] = {
    "version": 1,
    "servers": {"main": {"url": "https://screeps.com", "token_env": "SCREEPS_TOKEN"}},
    "branches": [
        {
            "server": "main",
            "branch": "default",
            "root": "src",
            "activate": ["world"],
            "verify": {"ticks": 10, "error_share": 1},
        }
    ],
}


def test_the_file_that_was_validated_matches_its_entry() -> None:
    assert entry_matches_file(manifest_from_data(DATA), copy.deepcopy(DATA))


def test_a_url_written_with_a_trailing_slash_is_the_same_url() -> None:
    data = copy.deepcopy(DATA)
    data["servers"]["main"]["url"] += "/"
    assert entry_matches_file(manifest_from_data(DATA), data)


def _changed(change: str) -> dict[str, Any]:
    data = copy.deepcopy(DATA)
    if change == "url":
        data["servers"]["main"]["url"] = "https://evil.example"
    elif change == "token":
        data["servers"]["main"]["token_env"] = "OTHER"
    elif change == "server added":
        data["servers"]["other"] = {"url": "http://x", "token_env": "T"}
    elif change == "unknown key":
        data["branches"][0]["surprise"] = True
    elif change == "bool for int":
        data["branches"][0]["verify"]["ticks"] = True
    elif change == "not a mapping":
        data["branches"][0] = "default"
    elif change == "branch added":
        data["branches"].append({"server": "main", "branch": "b", "root": "src"})
    return data


@pytest.mark.parametrize(
    "change", ["url", "token", "server added", "unknown key", "bool for int", "not a mapping", "branch added"]
)
def test_any_difference_is_a_miss(change: str) -> None:
    assert not entry_matches_file(manifest_from_data(DATA), _changed(change))


def test_a_default_the_entry_holds_but_the_file_does_not_write_is_a_match_only_when_it_is_the_default() -> None:
    entry = manifest_from_data(DATA)
    data = copy.deepcopy(DATA)
    del data["branches"][0]["verify"]
    assert not entry_matches_file(entry, data)  # the entry verifies, the file no longer says so
    plain = copy.deepcopy(data)
    assert entry_matches_file(manifest_from_data(plain), data)


def test_a_bool_is_never_the_number_it_equals() -> None:
    data = copy.deepcopy(DATA)
    data["branches"][0]["verify"]["ticks"] = 1
    entry = manifest_from_data(data)
    assert entry_matches_file(entry, copy.deepcopy(data))
    data["branches"][0]["verify"]["ticks"] = True  # True == 1 in Python, but not what the file was validated as
    assert not entry_matches_file(entry, data)
