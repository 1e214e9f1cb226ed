"""The three renderers of a plan (terminal text, Markdown, JSON) against golden files, and their details.

The goldens live in ``tests/render/golden/``. After an intended change of the output, regenerate them with::

    GITOPS_REGEN_GOLDEN=1 .venv/bin/python -m pytest -q tests/render/test_plan.py

and read the diff (``git diff tests/render/golden``) before committing it: a golden that changes is an output that
changes for every user. Without the variable a missing or different golden fails the test.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path

import click
import pytest

from gitops.app.applying import ApplyReport
from gitops.core.endpoints import GLOBAL_KEY, UPLOAD
from gitops.core.local import SourceInfo
from gitops.core.plan import Plan
from gitops.core.planlines import age, applied_line
from gitops.core.remote import RemoteBranch
from gitops.render.plan import (
    budget_row_text,
    plan_document,
    render_json,
    render_markdown,
    render_text,
    seen_text,
    size,
    summary_line,
)
from tests.core.factories import NOW, branch, facts, listed, local, manifest, on_server, plan, view, window

GOLDEN = Path(__file__).parent / "golden"
REGENERATE = os.environ.get("GITOPS_REGEN_GOLDEN") == "1"


def matches_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if REGENERATE:
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no golden {path}; make it with GITOPS_REGEN_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from its golden (GITOPS_REGEN_GOLDEN=1)"


# --- representative plans -------------------------------------------------------------------------------------


def mixed_plan() -> Plan:
    """Two servers; a create with activation, an update with every kind of module change, a branch planned from
    the ledger, budget rows of every source, a password-login server and warnings."""
    servers = {
        "official": {"url": "https://screeps.com", "token_env": "SCREEPS_TOKEN"},
        "private": {"url": "http://127.0.0.1:21025", "username_env": "U", "password_env": "P"},
    }
    loaded = manifest(
        branch("official", "main", remote_only="keep"),
        branch("official", "season", activate=["world"]),
        branch("official", "ptr"),
        branch("private", "main", activate=["sim"]),
        servers=servers,
    )
    old_main = "".join(f"line {i}\n" for i in range(8))
    new_main = old_main.replace("line 3", "line three")
    code = local(
        (
            "official",
            "main",
            {
                "main": new_main,
                "role|harvester": "harvest <fast>\n",
                "lib.wasm": b"\0asm\x02",
                "crlf": "a\r\nb\r\n",
            },
        ),
        ("official", "season", {"main": "season\n"}),
        ("official", "ptr", {"main": "ptr\n", "util": "u" * 2_000}),
        ("private", "main", {"main": "private\n"}),
        warnings=["official/ptr: include '**/*.ts' matched nothing"],
        source=SourceInfo(kind="worktree", ref=None, commit="0123456789abcdef", dirty=True),
    )
    return plan(
        loaded,
        code,
        view(
            "official",
            on_server(
                "main",
                {"main": old_main, "lib.wasm": b"\0asm\x01", "crlf": "a\nb\n", "extra": "kept " * 300},
                ago=30,
            ),
            on_server("season", None, ago=4000),
            on_server(
                "ptr", {"main": "ptr\n", "util": "old util", "gone": "g"}, how="ledger", ago=3 * 86400, with_text=False
            ),
            listed=listed("main", "ptr"),
        ),
        view("private", on_server("main", {"main": "private\n"}, how="own-upload", ago=7200), listed=listed("main")),
        budgets={
            "official": facts(
                window(UPLOAD, 240, 2, reset_in=7200),
                window(GLOBAL_KEY, 120, 120, source="counted"),
                reserve={UPLOAD: 1},
            ),
            "private": facts(limited=False),
        },
        refresh="auto",
    )


def quiet_plan() -> Plan:
    """Nothing to do: the server holds the repository's code and the branch is active."""
    return plan(
        manifest(branch(activate=["world"])),
        local(("local", "main", {"main": "same\n"})),
        view("local", on_server("main", {"main": "same\n"}), listed=listed("main", world="main")),
        budgets={"local": facts(unlimited_until=NOW + 3600)},
    )


PLANS = {"mixed": mixed_plan, "quiet": quiet_plan}


@pytest.mark.parametrize("name", sorted(PLANS))
def test_text_matches_its_golden(name: str) -> None:
    matches_golden(f"{name}.txt", render_text(PLANS[name](), now=NOW))


@pytest.mark.parametrize("name", sorted(PLANS))
def test_markdown_matches_its_golden(name: str) -> None:
    matches_golden(f"{name}.md", render_markdown(PLANS[name](), now=NOW))


@pytest.mark.parametrize("name", sorted(PLANS))
def test_json_matches_its_golden(name: str) -> None:
    matches_golden(f"{name}.json", render_json(PLANS[name](), now=NOW))


def test_json_holds_no_module_content_and_reads_back() -> None:
    p = mixed_plan()
    text = render_json(p, now=NOW)
    assert "line three" not in text  # content stays in plan files, never in the document
    assert "kept kept" not in text
    document = json.loads(text)
    assert document == plan_document(p, now=NOW)
    assert (document["has_changes"], document["uploads_needed"], document["fits_budget"]) == (True, 2, False)
    assert document["verified"] is False
    ptr = document["branches"][2]
    assert ptr["remote"] == {
        "how": "ledger",
        "verified": False,
        "basis": "ledger",
        "checked_at": None,
        "exists": True,
        "learnt_at": NOW - 3 * 86400,
        "age_seconds": 3 * 86400,
    }


def test_json_of_a_verify_step_and_budget_rows_is_every_field_in_order() -> None:
    loaded = manifest(branch(activate=["world"], verify={"ticks": 5, "on_failure": "rollback", "fail_on": ["x"]}))
    server = view("local", on_server("main", {"main": "old\n"}), listed=listed("main", world="main"))
    budgets = {"local": facts(window(UPLOAD, 9, 4))}
    p = plan(loaded, local(("local", "main", {"main": "new\n"})), server, budgets=budgets)
    (b,) = p.branches
    assert b.verify is not None
    document = plan_document(p, now=NOW)
    assert list(document["branches"][0]["verify"].items()) == list(dataclasses.asdict(b.verify).items())
    assert document["branches"][0]["verify"]["fail_on"] == ["x"]
    assert document["branches"][0]["verify"]["fail_on"] is not b.verify.fail_on  # a copy, as pydantic's dump gave
    assert [list(row.items()) for row in document["budget"]] == [list(dataclasses.asdict(r).items()) for r in p.budget]
    assert [row["endpoint"] for row in document["budget"]] == [UPLOAD, GLOBAL_KEY]


def test_json_of_an_unknown_server_has_no_age() -> None:
    p = plan(manifest(), local(("local", "main", {"main": "m"})))
    remote = plan_document(p, now=NOW)["branches"][0]["remote"]
    assert remote == {
        "how": "unknown",
        "verified": False,
        "basis": "unknown",
        "checked_at": None,
        "exists": None,
        "learnt_at": None,
        "age_seconds": None,
    }


# --- colour ----------------------------------------------------------------------------------------------------


def test_colour_only_when_asked_and_only_as_styling() -> None:
    p = mixed_plan()
    plain = render_text(p, now=NOW)
    coloured = render_text(p, now=NOW, color=True)
    assert "\x1b[" not in plain
    assert coloured != plain
    assert click.unstyle(coloured) == plain
    # The shortfall is red and bold; additions green, removals red.
    assert "\n" + click.style("warning: official/ptr: include '**/*.ts' matched nothing", fg="yellow") in coloured
    assert "\n" + click.style("official/main: update (upload)", bold=True, fg="cyan") in coloured
    assert "\n  " + click.style("+ role|harvester  15 B", fg="green") in coloured
    assert "\n  " + click.style("- gone  1 B", fg="red") in coloured
    assert "\n  " + click.style("= extra  1.5 kB", fg="cyan") in coloured
    assert "\n      " + click.style("+line three", fg="green") in coloured
    assert "\n      " + click.style("-line 3", fg="red") in coloured
    shortfall = (
        "  official: POST /api/user/code: needs 2 of 240 per day; 2 left, resets 2027-01-15 10:00 UTC, 1 reserved"
    )
    assert "\n" + click.style(shortfall + " -> DOES NOT FIT", fg="red", bold=True) in coloured
    # A branch with nothing to do is bold but not coloured.
    quiet = render_text(quiet_plan(), now=NOW, color=True)
    assert "\n" + click.style("local/main: no changes", bold=True) + "\n" in quiet


# --- Markdown cut to fit -------------------------------------------------------------------------------------

NOTE = "\n_The plan was cut to fit GitHub's size limit; run `gitops plan` for the whole of it._\n"


def many_diffs_plan(branches: int = 3, modules: int = 4) -> Plan:
    names = [f"b{i}" for i in range(branches)]
    old = {f"m{j}": "".join(f"line {k}\n" for k in range(20)) for j in range(modules)}
    new = {n: text.replace("line 7", "line seven") for n, text in old.items()}
    return plan(
        manifest(*(branch(name=n) for n in names)),
        local(*(("local", n, {**new, "main": "m"}) for n in names)),
        view("local", *(on_server(n, {**old, "main": "m"}) for n in names)),
    )


def test_markdown_within_max_chars_is_whole() -> None:
    p = many_diffs_plan()
    full = render_markdown(p, now=NOW)
    assert render_markdown(p, now=NOW, max_chars=len(full)) == full
    assert NOTE not in full


@pytest.mark.parametrize("fraction", [0.95, 0.8, 0.6, 0.45, 0.3, 0.15])
def test_markdown_is_cut_to_fit_and_says_so(fraction: float) -> None:
    p = many_diffs_plan()
    full = render_markdown(p, now=NOW)
    limit = int(len(full) * fraction)
    cut = render_markdown(p, now=NOW, max_chars=limit)
    assert len(cut) <= limit
    assert cut.endswith(NOTE)
    # The summary table always survives; diffs go before whole branch sections do.
    assert "| `local` | `b0` | update |" in cut
    assert cut.count("<details>") == cut.count("</details>")
    assert cut.count("```diff") * 2 == len(re.findall(r"^```", cut, flags=re.MULTILINE))


def test_a_big_branch_keeps_the_diffs_that_fit() -> None:
    p = many_diffs_plan(branches=1, modules=6)
    full = render_markdown(p, now=NOW)
    cut = render_markdown(p, now=NOW, max_chars=len(full) - 50)
    kept = cut.count("<details>")
    assert 0 < kept < 6
    assert f"- _{6 - kept} diff(s) left out to fit_" in cut


def test_sections_that_do_not_fit_even_without_diffs_are_left_out() -> None:
    p = many_diffs_plan(branches=3, modules=1)
    head_only = render_markdown(p, now=NOW).split("#### ")[0]
    cut = render_markdown(p, now=NOW, max_chars=len(head_only) + len(NOTE) + 120)
    assert "#### `local/b0`" in cut
    assert "- _1 diff(s) left out to fit_" in cut
    assert "#### `local/b2`" not in cut


def test_a_tiny_limit_still_ends_with_the_note() -> None:
    cut = render_markdown(many_diffs_plan(), now=NOW, max_chars=len(NOTE) + 10)
    assert cut.endswith(NOTE)
    assert len(cut) <= len(NOTE) + 10


def test_a_diff_holding_backticks_gets_a_longer_fence() -> None:
    p = plan(
        manifest(),
        local(("local", "main", {"main": "x = `a`;\n```\n"})),
        view("local", on_server("main", {"main": "x = 1;\n"})),
    )
    text = render_markdown(p, now=NOW, title="deploy")
    assert text.startswith("### deploy\n")
    assert "````diff\n" in text
    assert "\n````\n" in text


# --- the small helpers -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "text"),
    [(None, "-"), (0, "0 B"), (999, "999 B"), (1000, "1.0 kB"), (999_949, "999.9 kB"), (1_300_000, "1.30 MB")],
)
def test_size(n: int | None, text: str) -> None:
    assert size(n) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "0 s ago"),
        (89, "89 s ago"),
        (90, "2 min ago"),
        (5399, "90 min ago"),
        (5400, "1.5 h ago"),
        (2 * 86400, "2.0 days ago"),
    ],
)
def test_age(seconds: float, text: str) -> None:
    assert age(seconds) == text


def test_seen_text_of_each_provenance() -> None:
    p = mixed_plan()
    texts = [seen_text(b, NOW) for b in p.branches]
    assert texts == [
        "downloaded 30 s ago",
        "the branch does not exist on the server (checked 67 min ago)",
        "from the ledger, learnt 3.0 days ago (not checked on the server)",
        "from this tool's own upload 2.0 h ago (not checked on the server)",
    ]
    unknown = plan(manifest(), local(("local", "main", {"main": "m"}))).branches[0]
    assert seen_text(unknown, NOW) == "server state unknown (nothing downloaded, nothing in the ledger)"


def test_budget_rows_in_words() -> None:
    rows = mixed_plan().budget
    assert [budget_row_text(r) for r in rows] == [
        "POST /api/user/code: needs 2 of 240 per day; 2 left, resets 2027-01-15 10:00 UTC, 1 reserved -> DOES NOT FIT",
        "POST /api/user/set-active-branch: needs 1 of 240 per day; remaining unknown (at most 240) -> ok",
        "all requests: needs 4 (paced) of 120 per minute; ~120 left, estimated from this tool's own requests -> ok",
    ]
    assert [(r.source, r.estimate) for r in rows] == [("headers", False), ("unknown", False), ("counted", True)]
    assert quiet_plan().budget == []  # nothing needed: no rows at all
    lifted = plan(
        manifest(),
        local(("local", "main", {"main": "m"})),
        budgets={"local": facts(unlimited_until=NOW + 3600)},
    ).budget
    assert budget_row_text(lifted[0]).endswith("unlimited until 2027-01-15 09:00 UTC -> ok")


def test_summary_and_applied_lines() -> None:
    assert summary_line(quiet_plan(), now=NOW) == "No changes: the servers hold what the repository holds."
    assert summary_line(mixed_plan(), now=NOW) == (
        "Plan: 4 of 4 branch(es) to change, 2 upload(s) needed (2 branch(es) not checked on the server). "
        "1 new branch(es) get their modules by clone-branch, not an upload."
    )
    assert applied_line(mixed_plan()) == (
        "Applied: 4 branch(es) changed with 2 upload(s); the servers now hold what the plan holds."
    )


def _unchanged(*branches: RemoteBranch) -> Plan:
    names = [b.name for b in branches]
    return plan(
        manifest(*(branch(name=n) for n in names)),
        local(*(("local", n, {"main": "same\n"}) for n in names)),
        view("local", *branches, listed=listed(*names)),
    )


def test_no_changes_is_said_of_the_servers_only_when_every_branch_was_verified() -> None:
    same = {"main": "same\n"}
    own = on_server("main", same, how="own-upload", ago=180)
    assert summary_line(_unchanged(own), now=NOW) == (
        "No changes since this tool's upload 3 min ago (not checked on the server)."
    )
    ledger = on_server("main", same, how="ledger", ago=7200)
    assert summary_line(_unchanged(ledger), now=NOW) == (
        "No changes since the ledger's record of 2.0 h ago (not checked on the server)."
    )
    confirmed = dataclasses.replace(own, basis="branch-list", checked_at=NOW - 1)
    verified = _unchanged(confirmed)
    assert summary_line(verified, now=NOW) == "No changes: the servers hold what the repository holds."
    assert seen_text(verified.branches[0], NOW) == (
        "this tool's own upload 3 min ago, confirmed unchanged by the server's branch list 1 s ago"
    )
    listed_now = dataclasses.replace(on_server("main", same, ago=2), basis="branch-list", checked_at=NOW - 2)
    assert seen_text(_unchanged(listed_now).branches[0], NOW) == "read from the server's branch list 2 s ago"
    both = _unchanged(own, dataclasses.replace(ledger, name="sim"))
    assert summary_line(both, now=NOW) == (
        "No changes since what this tool last knew (not checked on the server: local/main: this tool's upload "
        "3 min ago; local/sim: the ledger's record of 2.0 h ago)."
    )
    report = ApplyReport(_unchanged(own))
    assert report.lines() == ["Nothing to apply since this tool's upload 3 min ago (not checked on the server)."]
    assert ApplyReport(verified).lines() == ["Nothing to apply."]
    gone = dataclasses.replace(RemoteBranch.missing("main", NOW - 60, "own-upload"))
    assert seen_text(_unchanged(gone).branches[0], NOW) == (
        "the branch did not exist on the server 60 s ago (this tool's record; not checked on the server)"
    )


def test_lone_surrogates_from_the_server_are_shown_escaped() -> None:
    # JSON lets a server hold names and texts that are not Unicode; stdout (strict UTF-8) could not print them.
    lonely = plan(
        manifest(branch()),
        local(("local", "main", {"main": "fixed\n"})),
        view("local", on_server("main", {"main": "x\udc80y\n", "b\ud800ad": "z"})),
    )
    for text in (render_text(lonely, now=NOW), render_markdown(lonely, now=NOW)):
        text.encode("utf-8")  # strict: no surrogate left
        assert "b\\ud800ad" in text
        assert "-x\\udc80y" in text
    assert json.loads(render_json(lonely, now=NOW))["branches"][0]["removed"] == ["b\ud800ad"]


def test_a_big_plan_is_a_summary_and_a_sample_at_the_terminal_and_whole_with_full() -> None:
    from gitops.render.plan import TEXT_DIFF_LINES, TEXT_MODULE_LINES

    new = {f"m{n:04d}": f"module.exports = {n};\n" for n in range(2001)}
    changed = {name: "\n".join(f"line {i}" for i in range(30)) + "\n" for name in ("a", "b", "c")}
    before = {name: "\n".join(f"old {i}" for i in range(30)) + "\n" for name in changed}
    big = plan(
        manifest(branch(), branch(name="edit")),
        local(("local", "main", new), ("local", "edit", changed)),
        view("local", on_server("main", {"main": ""}), on_server("edit", before)),
        budgets={"local": facts(unlimited_until=NOW + 3600)},
    )
    text = render_text(big, now=NOW)
    assert len(text.splitlines()) < 2 * (TEXT_MODULE_LINES + TEXT_DIFF_LINES) + 30
    assert "  modules: 2001 added, 0 changed, 0 removed, 1 unchanged; 68,936 characters to send" in text
    assert f"  ... and {2001 - TEXT_MODULE_LINES} more module(s): --full shows all" in text
    assert "more diff line(s): --full shows all" in text
    whole = render_text(big, now=NOW, full=True)
    assert len(whole.splitlines()) > 2001
    assert "--full shows all" not in whole
    # The JSON keeps everything, whatever the terminal shows.
    assert len(json.loads(render_json(big, now=NOW))["branches"][0]["added"]) == 2001


def test_modules_differing_only_in_ignored_lines_are_named_in_every_format() -> None:
    loaded = manifest(branch(ignore_lines=[r"// Built at .*"]))
    server = on_server("main", {"main": "// Built at 1\nloop();\n"})
    result = plan(loaded, local(("local", "main", {"main": "// Built at 2\nloop();\n"})), view("local", server))
    assert not result.has_changes
    assert "  only ignored lines differ: not uploaded (main)" in render_text(result, now=NOW).splitlines()
    assert "- only ignored lines differ: not uploaded (`main`)" in render_markdown(result, now=NOW)
    (document,) = json.loads(render_json(result, now=NOW))["branches"]
    assert document["ignored"] == ["main"]
    # A plan without such modules keeps its JSON as it was (no empty key).
    plain = plan(manifest(), local(("local", "main", {"main": "x"})), view("local", on_server("main", {"main": "x"})))
    assert "ignored" not in json.loads(render_json(plain, now=NOW))["branches"][0]
