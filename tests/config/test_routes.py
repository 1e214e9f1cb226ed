"""``gitops/config/routes.py``: what a pull request's manifest changes of where credentials go and what builds."""

from __future__ import annotations

from typing import Any

from gitops.config.manifest import manifest_from_data
from gitops.config.model import Manifest
from gitops.config.routes import ROUTE_FIELDS, RouteChange, route_changes

URL = "https://screeps.com"


def _manifest(servers: dict[str, Any] | None = None, **top: Any) -> Manifest:
    servers = servers or {"main": {"url": URL, "token_env": "SCREEPS_TOKEN"}}
    branches = top.pop("branches", [{"server": next(iter(servers)), "branch": "default", "root": "src"}])
    return manifest_from_data({"version": 1, "servers": servers, "branches": branches, **top})


def test_the_same_manifest_changes_no_route() -> None:
    assert route_changes(_manifest(), _manifest()) == []


def test_the_route_fields_are_the_credential_fields_and_the_url() -> None:
    assert {"url", "token_env"} <= set(ROUTE_FIELDS)


def test_a_changed_url_and_token_variable_are_each_a_change() -> None:
    head = _manifest({"main": {"url": "https://evil.example", "token_env": "OTHER"}})
    assert [c.text() for c in route_changes(_manifest(), head)] == [
        "server 'main' url: 'https://screeps.com' → 'https://evil.example'",
        "server 'main' token_env: 'SCREEPS_TOKEN' → 'OTHER'",
    ]


def test_a_server_added_or_removed_shows_its_url() -> None:
    both = {"main": {"url": URL, "token_env": "SCREEPS_TOKEN"}, "new": {"url": "http://x:21025", "token_env": "T"}}
    assert route_changes(_manifest(), _manifest(both)) == [RouteChange("server 'new'", None, "http://x:21025")]
    assert route_changes(_manifest(both), _manifest()) == [RouteChange("server 'new'", "http://x:21025", None)]


def test_a_build_anywhere_is_a_change() -> None:
    branch = {"server": "main", "branch": "default", "root": "src", "build": ["npm", "run", "build"]}
    changes = route_changes(_manifest(), _manifest(build="make", branches=[branch]))
    assert [c.text() for c in changes] == [
        "build: (none) → 'make'",
        "branch main/default build: (none) → 'npm run build'",
    ]
