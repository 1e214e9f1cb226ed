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
