"""The seal of a saved plan: ``seal_problems`` (the payloads against what the plan shows) and ``server_problems``
(the payload against the branch as downloaded). Pure: plans are built by ``build_plan`` from the factories' values
and then edited as a person editing the file would.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gitops.core.codeset import WireModule
from gitops.core.plan import Payload, Plan
from gitops.core.planseal import seal_problems, server_problems
from tests.core.factories import branch, code, local, manifest, on_server, plan, view

SERVER = {"main": "const a = 1;\nmodule.exports.loop = () => a;\n", "lib": "module.exports = 1;\n", "gone": "x"}
REPO = {"main": "const a = 2;\nmodule.exports.loop = () => a;\n", "lib": "module.exports = 1;\n", "added": "new\n"}


def update(**options: Any) -> Plan:
    """One changed, one added, one removed (or kept) and one unchanged module, planned from a download."""
    return plan(manifest(branch(**options)), local(("local", "main", REPO)), view("local", on_server("main", SERVER)))


def with_payload(p: Plan, modules: dict[str, WireModule] | None = None, **fields: Any) -> Plan:
    (payload,) = p.payloads
    edited = dataclasses.replace(payload, modules=payload.modules if modules is None else modules, **fields)
    return dataclasses.replace(p, payloads=[edited])


def modules(p: Plan, **changes: WireModule | None) -> dict[str, WireModule]:
    held = dict(p.payloads[0].modules)
    for name, value in changes.items():
        if value is None:
            del held[name]
        else:
            held[name] = value
    return held


def test_an_untouched_plan_has_no_problems() -> None:
    assert seal_problems(update()) == []
    assert seal_problems(update(remote_only="keep")) == []
    created = plan(manifest(), local(("local", "main", REPO)), view("local", on_server("main", None)))
    assert seal_problems(created) == []


def test_each_module_is_checked_against_its_row() -> None:
    p = update()
    assert seal_problems(with_payload(p, modules(p, main="require('x');\n"))) == [
        "local/main: module 'main' (changed) is not the reviewed content",
        "local/main: the modules to upload do not match the plan's upload_digest",
        "local/main: the modules to upload do not match the plan's module count and upload length",
    ]
    assert seal_problems(with_payload(p, modules(p, added=None))) == [
        "local/main: module 'added' (added) is not in the upload",
        "local/main: the modules to upload do not match the plan's upload_digest",
        "local/main: the modules to upload do not match the plan's module count and upload length",
    ]
    assert seal_problems(with_payload(p, modules(p, gone="x")))[0] == (
        "local/main: module 'gone' is to be removed, but the plan uploads it"
    )
    assert seal_problems(with_payload(p, modules(p, extra="// more")))[0] == (
        "local/main: the upload holds 2 module(s) the plan shows no change for, but the plan has 1 unchanged"
    )
    assert seal_problems(with_payload(p, modules(p, lib="module.exports = 2;\n"))) == [
        "local/main: the modules to upload do not match the plan's upload_digest"
    ]
    assert seal_problems(with_payload(p, modules(p, lib={"binary": "not base64!"}))) == [
        "local/main: module 'lib' has invalid base64 in 'binary'"
    ]


def test_kept_modules_held_or_to_be_downloaded() -> None:
    p = update(remote_only="keep")
    assert seal_problems(with_payload(p, modules(p, gone="y"))) == [
        "local/main: module 'gone' (kept) is not the reviewed content",
        "local/main: the modules to upload do not match the plan's upload_digest",
    ]
    assert seal_problems(with_payload(p, missing_kept=["gone"])) == [
        "local/main: module 'gone' is both held and to be downloaded before the upload",
        "local/main: the modules to upload do not match the plan's module count and upload length",
    ]
    assert seal_problems(with_payload(p, missing_kept=["lib"]))[0] == (
        "local/main: module 'lib' is to be downloaded, but the plan keeps no such module"
    )
    ledger = plan(
        manifest(branch(remote_only="keep")),
        local(("local", "main", REPO)),
        view("local", on_server("main", SERVER, how="ledger", with_text=False)),
    )
    assert ledger.branches[0].upload_digest is None
    assert seal_problems(ledger) == []
    assert seal_problems(with_payload(ledger, missing_kept=[])) == [
        "local/main: module 'gone' (kept) is not in the upload",
        "local/main: the plan's upload_digest is missing",
        "local/main: the modules to upload do not match the plan's module count and upload length",
    ]


def test_payloads_and_branches_must_pair_up() -> None:
    p = update()
    moved = with_payload(p, branch="other")
    assert seal_problems(moved) == [
        "local/other: the plan holds modules to upload to it, but the reviewed plan has no upload there",
        "local/main: the reviewed plan uploads to it, but the plan holds no modules for it",
    ]
    twice = dataclasses.replace(p, payloads=[*p.payloads, *p.payloads])
    assert seal_problems(twice) == ["local/main: the plan holds two sets of modules to upload to it"]


def test_the_server_binds_unchanged_modules_and_the_shown_diffs() -> None:
    p = update()
    (b,) = p.branches
    (payload,) = p.payloads
    server = code(SERVER)
    assert server_problems(b, payload, server) == []
    edited_lib = Payload(server="local", branch="main", modules=modules(p, lib="module.exports = 3;\n"))
    assert server_problems(b, edited_lib, server) == [
        "local/main: module 'lib' is shown as unchanged, but differs from the server's"
    ]
    # The module and every digest of its row rewritten; the diff the reviewer read is left as it was.
    edited_main = Payload(
        server="local", branch="main", modules=modules(p, main="const a = 3;\nmodule.exports.loop = () => a;\n")
    )
    assert server_problems(b, edited_main, server) == ["local/main: module 'main' is not what the plan's diff shows"]
    assert server_problems(b, Payload(server="local", branch="main", modules={"main": {"binary": "!"}}), server) == [
        "local/main: the modules to upload are not modules"
    ]
