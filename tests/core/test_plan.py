"""The plan's values (``gitops.core.plan``): what a plan says of itself, such as the requests applying it makes.

Pure: the plans are built from values of ``tests.core.factories``; nothing here starts a server, a process or git.
"""

from __future__ import annotations

from gitops.core.endpoints import ACTIVATE, CLONE
from gitops.core.plan import requests_needed
from tests.core.factories import branch, local, manifest, on_server, plan, view

MAIN = {"main": "module.exports.loop = function () {};\n"}


def test_requests_needed_sums_the_steps_of_every_branch() -> None:
    result = plan(
        manifest(branch(activate=["world"])),
        local(("local", "main", MAIN)),
        view("local", on_server("main", None)),
    )
    assert requests_needed(result.branches) == {CLONE: 1, ACTIVATE: 1}
    assert requests_needed([]) == {}


def test_a_plan_counts_the_requests_of_each_server_on_its_own() -> None:
    servers = {
        "one": {"url": "http://127.0.0.1:21025", "token_env": "SCREEPS_TOKEN"},
        "two": {"url": "http://127.0.0.1:21026", "token_env": "SCREEPS_TOKEN"},
    }
    result = plan(
        manifest(branch("one", activate=["world"]), branch("two"), servers=servers),
        local(("one", "main", MAIN), ("two", "main", MAIN)),
        view("one", on_server("main", None)),
        view("two", on_server("main", None)),
    )
    assert result.requests_on("one") == {CLONE: 1, ACTIVATE: 1}
    assert result.requests_on("two") == {CLONE: 1}
    assert result.requests_on("elsewhere") == {}
    assert requests_needed(result.branches) == {CLONE: 2, ACTIVATE: 1}
