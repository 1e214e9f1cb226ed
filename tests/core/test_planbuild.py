"""``build_plan`` (``gitops.core.planbuild``): what each branch needs (create, update, activate, none), kept modules,
limits, budget rows.

Pure: the manifest, the repository's code, the server's state and the budget facts are values from
``tests.core.factories``; nothing here starts a server, a process or git.
"""

from __future__ import annotations

import pytest

from gitops.core.codeset import code_length
from gitops.core.endpoints import ACTIVATE, CLONE, GLOBAL_KEY, MAX_BRANCHES, MAX_CODE_LENGTH, UPLOAD
from gitops.core.plan import Step
from gitops.core.planbuild import _steps, as_server_stores, similar_branch
from gitops.core.planseal import seal_problems
from gitops.errors import ServiceError, SourceError
from tests.core.factories import (
    NOW,
    branch,
    code,
    facts,
    listed,
    local,
    manifest,
    on_server,
    plan,
    view,
    window,
)

MAIN = {"main": "module.exports.loop = function () {};\n"}


def test_a_branch_missing_on_the_server_is_created_with_its_modules_and_no_upload() -> None:
    result = plan(manifest(), local(("local", "main", MAIN)), view("local", on_server("main", None)))
    (b,) = result.branches
    assert b.action == "create"
    assert [s.kind for s in b.steps] == ["clone-branch"]
    assert [s.request for s in b.steps] == [CLONE]
    assert b.uploads == 0
    assert b.writes_code
    assert b.names("added") == ["main"]
    assert (b.remote.how, b.remote.exists, b.remote.learnt_at) == ("download", False, NOW - 60)
    payload = result.payload("local", "main")
    assert payload is not None
    assert payload.modules == MAIN
    assert payload.missing_kept == []
    assert b.upload_length == code_length(MAIN)
    assert b.module_count == 1
    assert result.has_changes
    assert result.uploads_needed == 0
    assert result.warnings == []


def test_a_changed_module_is_an_update_with_one_upload() -> None:
    server = on_server("main", {"main": "old\n", "gone": "x"})
    result = plan(manifest(), local(("local", "main", {"main": "new\n", "added": "a"})), view("local", server))
    (b,) = result.branches
    assert b.action == "update"
    assert b.steps == [Step(kind="upload", request=UPLOAD)]
    assert (b.names("added"), b.names("changed"), b.names("removed")) == (["added"], ["main"], ["gone"])
    assert b.unchanged == 0
    assert b.remote.digest == server.digest
    payload = result.payload("local", "main")
    assert payload is not None
    assert payload.modules == {"added": "a", "main": "new\n"}  # the removed module is simply not sent
    assert b.upload_digest == code({"added": "a", "main": "new\n"}).digest


def test_same_code_and_an_inactive_branch_only_activates() -> None:
    loaded = manifest(branch(activate=["world", "sim"]))
    result = plan(
        loaded,
        local(("local", "main", MAIN)),
        view("local", on_server("main", MAIN), listed=listed("main", "other", world="other", sim="main")),
    )
    (b,) = result.branches
    assert b.action == "activate"
    assert b.activate == ["world"]  # already the sim branch
    assert b.steps == [Step(kind="activate", request=ACTIVATE, which="world")]
    assert b.steps[0].describe() == f"activate for world ({ACTIVATE})"
    assert result.payloads == []
    assert result.uploads_needed == 0
    assert result.has_changes


def test_same_code_and_already_active_is_no_change() -> None:
    loaded = manifest(branch(activate=["world"]))
    result = plan(
        loaded,
        local(("local", "main", MAIN)),
        view("local", on_server("main", MAIN), listed=listed("main", world="main")),
    )
    (b,) = result.branches
    assert (b.action, b.steps, b.activate, b.unchanged) == ("none", [], [], 1)
    assert not result.has_changes
    assert result.payloads == []
    assert result.payload("local", "main") is None


def test_without_the_branch_list_activation_is_always_planned() -> None:
    # Nothing says which branch is active, so the plan activates rather than assume it is.
    loaded = manifest(branch(activate=["sim"]))
    result = plan(loaded, local(("local", "main", MAIN)), view("local", on_server("main", MAIN)))
    (b,) = result.branches
    assert (b.action, b.activate) == ("activate", ["sim"])


def test_a_created_branch_is_activated_whatever_the_list_says() -> None:
    loaded = manifest(branch(activate=["world"]))
    result = plan(
        loaded,
        local(("local", "main", MAIN)),
        view("local", on_server("main", None), listed=listed("main", world="main")),
    )
    (b,) = result.branches
    assert b.action == "create"
    assert [s.describe() for s in b.steps] == [
        f"clone-branch ({CLONE})",
        f"activate for world ({ACTIVATE})",
    ]


# --- remote_only: keep -----------------------------------------------------------------------------------------


def test_keep_with_downloaded_content_sends_the_kept_modules_back() -> None:
    server = on_server("main", {"main": "old", "extra": "server only"})
    result = plan(
        manifest(branch(remote_only="keep")), local(("local", "main", {"main": "new"})), view("local", server)
    )
    (b,) = result.branches
    assert b.action == "update"
    assert (b.names("changed"), b.names("kept"), b.names("removed")) == (["main"], ["extra"], [])
    payload = result.payload("local", "main")
    assert payload is not None
    assert payload.modules == {"extra": "server only", "main": "new"}
    assert payload.missing_kept == []
    assert b.module_count == 2
    assert b.upload_length == code_length({"extra": "server only", "main": "new"})
    assert b.upload_digest == code({"extra": "server only", "main": "new"}).digest


def test_keep_planned_from_the_ledger_names_the_kept_modules_apply_must_download() -> None:
    server = on_server("main", {"main": "old", "extra": "server only"}, how="ledger", with_text=False)
    result = plan(
        manifest(branch(remote_only="keep")), local(("local", "main", {"main": "new"})), view("local", server)
    )
    (b,) = result.branches
    payload = result.payload("local", "main")
    assert payload is not None
    assert payload.modules == {"main": "new"}
    assert payload.missing_kept == ["extra"]
    assert b.module_count == 2  # counted although its content is not in the plan
    assert b.upload_digest is None  # unknown until apply has the kept content
    assert b.remote.how == "ledger"
    changed = b.modules[0]
    assert changed.note == "the server's content was not downloaded (planned from the ledger): sizes and hashes only"


def test_a_kept_binary_module_is_always_downloaded_by_apply() -> None:
    server = on_server("main", {"main": "old", "lib.wasm": b"\0asm"})
    result = plan(
        manifest(branch(remote_only="keep")), local(("local", "main", {"main": "new"})), view("local", server)
    )
    payload = result.payload("local", "main")
    assert payload is not None
    assert payload.missing_kept == ["lib.wasm"]


def test_keep_keeps_the_servers_main_when_the_repository_has_none() -> None:
    server = on_server("main", {"main": "server main", "lib": "old"})
    result = plan(manifest(branch(remote_only="keep")), local(("local", "main", {"lib": "new"})), view("local", server))
    (b,) = result.branches
    assert (b.names("changed"), b.names("kept")) == (["lib"], ["main"])
    payload = result.payload("local", "main")
    assert payload is not None
    assert payload.modules == {"lib": "new", "main": "server main"}


def test_kept_modules_can_push_the_upload_over_5_mb() -> None:
    big = "x" * MAX_CODE_LENGTH
    server = on_server("main", {"main": "old", "bundle": big})
    with pytest.raises(SourceError) as caught:
        plan(manifest(branch(remote_only="keep")), local(("local", "main", {"main": "new"})), view("local", server))
    length = code_length({"bundle": big, "main": "new"})
    assert caught.value.exit_code == 6
    assert caught.value.message == (
        f"local/main: the upload would be {length:,} characters as the server counts them, over its limit of "
        f"{MAX_CODE_LENGTH:,} (5 MB), with 1 module(s) kept from the server (remote_only: keep)"
    )
    assert caught.value.hint is not None
    assert "remote_only: remove" in caught.value.hint


def test_a_large_kept_module_without_an_upload_is_no_problem() -> None:
    big = "x" * MAX_CODE_LENGTH
    server = on_server("main", {"main": "same", "bundle": big})
    result = plan(
        manifest(branch(remote_only="keep")), local(("local", "main", {"main": "same"})), view("local", server)
    )
    (b,) = result.branches
    assert b.action == "none"
    assert b.upload_length > MAX_CODE_LENGTH


# --- a branch without main ---------------------------------------------------------------------------------------


def test_a_branch_without_main_plans_the_servers_empty_main() -> None:
    created = plan(manifest(), local(("local", "main", {"lib": "l"})), view("local", on_server("main", None)))
    payload = created.payload("local", "main")
    assert payload is not None
    uploaded = {"lib": "l", "main": ""}
    assert payload.modules == uploaded
    # After the upload the server holds the empty main too: no change, so the plan converges.
    again = plan(manifest(), local(("local", "main", {"lib": "l"})), view("local", on_server("main", uploaded)))
    assert again.branches[0].action == "none"


def test_as_server_stores_leaves_a_set_with_main_alone() -> None:
    with_main = code({"main": "m"})
    assert as_server_stores(with_main) is with_main
    assert as_server_stores(code({"a": "a"})).wire() == {"a": "a", "main": ""}


# --- what is known of the server ---------------------------------------------------------------------------------


def test_a_server_nothing_is_known_of_warns_and_plans_a_create() -> None:
    result = plan(manifest(), local(("local", "main", MAIN), warnings=["from the sources"]))
    (b,) = result.branches
    assert (b.remote.how, b.remote.exists, b.remote.learnt_at, b.remote.digest) == ("unknown", None, None, None)
    assert b.action == "create"
    assert result.warnings == [
        "from the sources",
        "local/main: nothing is known of this branch on the server (no download, empty ledger); the plan assumes "
        "it does not exist",
    ]


def test_a_branch_with_an_empty_ledger_entry_is_unknown_too() -> None:
    result = plan(manifest(), local(("local", "main", MAIN)), view("local", ("main", None)))
    assert result.branches[0].remote.how == "unknown"
    assert len(result.warnings) == 1


def test_own_upload_provenance_is_carried() -> None:
    server = on_server("main", MAIN, how="own-upload", ago=120, with_text=False)
    result = plan(manifest(), local(("local", "main", MAIN)), view("local", server))
    assert (result.branches[0].remote.how, result.branches[0].action) == ("own-upload", "none")


# --- the branch-count limit ----------------------------------------------------------------------------------------


def test_creating_a_branch_past_the_limit_is_refused() -> None:
    full = listed(*(f"b{i}" for i in range(MAX_BRANCHES)))
    with pytest.raises(ServiceError) as caught:
        plan(manifest(branch(name="new")), local(("local", "new", MAIN)), view("local", ("new", None), listed=full))
    assert caught.value.message == (
        f"server 'local': the plan creates 1 branch(es) but the account already has {MAX_BRANCHES} of at most "
        f"{MAX_BRANCHES}"
    )
    assert caught.value.exit_code == 1


def test_the_last_free_branch_can_be_created() -> None:
    almost = listed(*(f"b{i}" for i in range(MAX_BRANCHES - 1)))
    result = plan(
        manifest(branch(name="new")),
        local(("local", "new", MAIN)),
        view("local", on_server("new", None), listed=almost),
    )
    assert result.branches[0].action == "create"


def test_a_full_account_can_still_update_its_branches() -> None:
    full = listed(*(f"b{i}" for i in range(MAX_BRANCHES - 1)), "main")
    result = plan(
        manifest(), local(("local", "main", MAIN)), view("local", on_server("main", {"main": "x"}), listed=full)
    )
    assert result.branches[0].action == "update"


# --- budget rows -----------------------------------------------------------------------------------------------


def two_servers() -> tuple[dict[str, object], list[dict[str, object]]]:
    servers: dict[str, object] = {
        "official": {"url": "https://screeps.com", "token_env": "SCREEPS_TOKEN"},
        "private": {"url": "http://127.0.0.1:21025", "username_env": "U", "password_env": "P"},
    }
    return servers, [branch("official", "main"), branch("official", "ptr"), branch("private", "main")]


def test_budget_rows_are_per_server_and_count_every_request() -> None:
    servers, branches = two_servers()
    result = plan(
        manifest(*branches, servers=servers),
        local(("official", "main", MAIN), ("official", "ptr", MAIN), ("private", "main", MAIN)),
        view("official", on_server("main", {"main": "old"}), on_server("ptr", None)),
        view("private", on_server("main", None)),
        budgets={
            "official": facts(window(UPLOAD, 240, 1), reserve={UPLOAD: 0}),
            "private": facts(),
        },
    )
    rows = [(r.server, r.endpoint, r.needed, r.remaining, r.source, r.fits) for r in result.budget]
    assert rows == [
        ("official", UPLOAD, 1, 1, "headers", True),
        ("official", GLOBAL_KEY, 2, None, "unknown", True),
        ("private", GLOBAL_KEY, 1, None, "unknown", True),
    ]
    assert result.fits_budget  # a new branch spends no upload: one left is enough for the update
    assert result.servers() == ["official", "private"]
    assert [(p.server, p.branch) for p in result.payloads] == [
        ("official", "main"),
        ("official", "ptr"),
        ("private", "main"),
    ]
    private = result.payload("private", "main")
    assert private is not None
    assert private.modules == MAIN
    assert result.payload("private", "ptr") is None
    assert result.not_rate_limited == []


def test_password_login_servers_are_not_rate_limited() -> None:
    servers, branches = two_servers()
    result = plan(
        manifest(*branches, servers=servers),
        local(("official", "main", MAIN), ("official", "ptr", MAIN), ("private", "main", MAIN)),
        view("official", on_server("main", MAIN), on_server("ptr", MAIN)),
        view("private", on_server("main", None)),
        budgets={"private": facts(limited=False)},
    )
    assert result.not_rate_limited == ["private"]
    assert result.budget == []  # official needs nothing; private is not limited
    assert result.fits_budget


def test_the_reserve_and_the_unlimited_period_reach_the_rows() -> None:
    result = plan(
        manifest(),
        local(("local", "main", MAIN)),
        view("local", on_server("main", {"main": "old"})),
        budgets={"local": facts(window(UPLOAD, 240, 5), reserve={UPLOAD: 5})},
    )
    assert [(r.endpoint, r.reserve, r.fits) for r in result.budget] == [(UPLOAD, 5, False), (GLOBAL_KEY, 0, True)]
    lifted = plan(
        manifest(),
        local(("local", "main", MAIN)),
        view("local", on_server("main", {"main": "old"})),
        budgets={"local": facts(window(UPLOAD, 240, 0), unlimited_until=NOW + 60)},
    )
    assert [(r.source, r.fits) for r in lifted.budget] == [("unlimited", True), ("unlimited", True)]


def test_the_plan_records_its_inputs() -> None:
    loaded = manifest()
    result = plan(loaded, local(("local", "main", MAIN)), view("local", on_server("main", MAIN)), refresh="auto")
    assert (result.created_at, result.manifest_path, result.manifest_digest, result.refresh) == (
        NOW,
        "/project/gitops.yaml",
        loaded.digest,
        "auto",
    )
    assert result.source == {"kind": "ref", "ref": "main", "commit": "1a2b3c4d5e6f7a8b9c0d", "dirty": None}
    assert result.branches[0].label == "local/main"
    assert result.format_version == 1


def test_a_branch_name_close_to_one_on_the_server_is_noted() -> None:
    assert similar_branch("defualt", ["default", "sim"]) == "default"
    assert similar_branch("Default", ["default"]) == "default"
    assert similar_branch("main", ["default", "sim"]) is None
    assert similar_branch("default", ["default"]) is None


# --- ignore_lines ------------------------------------------------------------------------------------------------

STAMPED = {"main": "// Built at 2026-11-27 05:00\nmodule.exports.loop = () => {};\n", "util": "u\n"}
SERVER_STAMPED = {"main": "// Built at 2026-11-26 10:00\nmodule.exports.loop = () => {};\n", "util": "u\n"}


def test_only_ignored_lines_differing_is_no_change_and_no_upload() -> None:
    loaded = manifest(branch(ignore_lines=[r"// Built at .*"]))
    result = plan(loaded, local(("local", "main", STAMPED)), view("local", on_server("main", SERVER_STAMPED)))
    (b,) = result.branches
    assert b.action == "none"
    assert b.steps == []
    assert b.ignored == ["main"]
    assert b.unchanged == 2
    assert b.modules == []
    assert not result.has_changes
    assert result.payloads == []


def test_without_ignore_lines_a_stamp_is_an_upload() -> None:
    result = plan(manifest(), local(("local", "main", STAMPED)), view("local", on_server("main", SERVER_STAMPED)))
    (b,) = result.branches
    assert b.action == "update"
    assert b.names("changed") == ["main"]
    assert b.ignored == []


def test_with_a_real_change_the_stamped_module_is_sent_as_built_and_shown() -> None:
    loaded = manifest(branch(ignore_lines=[r"// Built at .*"]))
    changed = {**STAMPED, "util": "u2\n"}
    result = plan(loaded, local(("local", "main", changed)), view("local", on_server("main", SERVER_STAMPED)))
    (b,) = result.branches
    assert b.action == "update"
    assert b.names("changed") == ["main", "util"]
    assert b.ignored == []
    assert b.unchanged == 0
    payload = result.payload("local", "main")
    assert payload is not None
    assert payload.modules["main"] == STAMPED["main"]  # the stamp line as built
    assert seal_problems(result) == []


# --- the phases of planning one branch that carry a rule of their own ----------------------------------------------


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
