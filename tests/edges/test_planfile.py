"""Plan files: a save/load round trip, every way a file can fail to be a plan (exit 8), and the atomic write.

File I/O on ``tmp_path`` only; the plans come from ``tests.core.factories``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_core import PydanticSerializationError

from gitops.core.drift import compare, record_from_branch, with_drift
from gitops.core.endpoints import UPLOAD
from gitops.core.plan import Plan, ServerFailure
from gitops.edges.planfile import load_plan, plan_data, save_plan
from gitops.errors import ExitCode, PlanFileError, UsageError
from tests.core.factories import branch, facts, listed, local, manifest, on_server, plan, view, window


def sample_plan() -> Plan:
    return plan(
        manifest(branch(remote_only="keep", activate=["world"])),
        local(("local", "main", {"main": "new ✓ 𝄞\n", "lib.wasm": b"\0asm\x01"})),
        view("local", on_server("main", {"main": "old\n", "extra": "kept"}, how="ledger", with_text=False)),
    )


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_saved_plan_loads_back_equal(tmp_path: Path) -> None:
    original = sample_plan()
    path = tmp_path / "plans" / "plan.json"  # the folder is made
    save_plan(original, path)
    loaded = load_plan(path)
    assert loaded == original
    payload = loaded.payload("local", "main")
    assert payload is not None
    assert payload.modules == {"lib.wasm": {"binary": "AGFzbQE="}, "main": "new ✓ 𝄞\n"}
    assert payload.missing_kept == ["extra"]
    assert leftovers(path.parent) == []


def test_saving_over_an_old_plan_replaces_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text("x" * 100_000, encoding="utf-8")
    save_plan(sample_plan(), path)
    assert json.loads(path.read_text(encoding="utf-8"))["format_version"] == 1


def plan_file_error(path: Path) -> PlanFileError:
    with pytest.raises(PlanFileError) as caught:
        load_plan(path)
    assert caught.value.exit_code == 8
    return caught.value


def test_a_missing_plan_file(tmp_path: Path) -> None:
    error = plan_file_error(tmp_path / "nope.json")
    assert error.message == f"plan file {tmp_path / 'nope.json'} does not exist"
    assert error.hint == "Save one with 'gitops plan --out FILE'."


def test_an_unreadable_plan_file(tmp_path: Path) -> None:
    error = plan_file_error(tmp_path)  # a folder cannot be read as a file
    assert error.message.startswith(f"plan file {tmp_path} cannot be read: ")


def test_a_plan_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_bytes(b'{"format_version": 1, "x": "\xff"}')
    error = plan_file_error(path)
    assert error.message.startswith(f"plan file {path} cannot be read: 'utf-8' codec can't decode byte 0xff")


def test_a_plan_file_that_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text("format_version: 1\nbranches: []\n", encoding="utf-8")
    error = plan_file_error(path)
    assert error.message == (f"plan file {path} is not JSON (line 1): is it a plan saved with 'gitops plan --out'?")


def test_a_plan_file_nested_too_deeply(tmp_path: Path) -> None:
    # json.loads recurses once per level; this used to end in a RecursionError (exit 70) instead of exit 8.
    path = tmp_path / "plan.json"
    path.write_text("[" * 100_000, encoding="utf-8")
    error = plan_file_error(path)
    assert error.message == (
        f"plan file {path} is nested too deeply to be a plan: is it a plan saved with 'gitops plan --out'?"
    )


@pytest.mark.parametrize(
    ("content", "shown"),
    [
        ('{"format_version": 2}', "2"),
        ('{"branches": []}', "None"),
        ("[1, 2]", "None"),
        ('{"format_version": "1"}', "'1'"),
    ],
)
def test_a_plan_file_of_another_format(tmp_path: Path, content: str, shown: str) -> None:
    path = tmp_path / "plan.json"
    path.write_text(content, encoding="utf-8")
    error = plan_file_error(path)
    assert error.message == f"plan file {path} has format_version {shown}; this gitops reads format_version 1"
    assert error.hint == "Make the plan again with this version of gitops: 'gitops plan --out FILE'."


def full_plan() -> Plan:
    """A plan holding every model a plan file can: a verify step with a rollback (and so code to restore), a drift
    finding, budget rows and a failed server, besides the branch, its steps, module rows and payload."""
    old, new = {"main": "old\n", "lib": "lib\n"}, {"main": "new\n"}
    result = plan(
        manifest(branch(activate=["world"], verify={"ticks": 5, "on_failure": "rollback"})),
        local(("local", "main", new)),
        view("local", on_server("main", old), listed=listed("main", world="main")),
        budgets={"local": facts(window(UPLOAD, 10, 5))},
    )
    applied = record_from_branch(on_server("main", {"main": "elsewhere\n"}), how="upload")
    result = with_drift(result, {("local", "main"): compare(on_server("main", old), applied)})
    failure = ServerFailure(server="away", branches=["main"], message="cannot reach it", exit_code=ExitCode.CREDENTIALS)
    return dataclasses.replace(result, failed=[failure])


def test_a_plan_holding_every_model_round_trips(tmp_path: Path) -> None:
    original = full_plan()
    assert original.branches[0].verify is not None
    assert original.branches[0].drift is not None
    assert (len(original.rollbacks), len(original.budget), len(original.failed)) == (1, 2, 1)
    path = tmp_path / "plan.json"
    save_plan(original, path)
    assert load_plan(path) == original
    assert type(load_plan(path).failed[0].exit_code) is int  # the number, as the file holds it


def damaged(tmp_path: Path, change: dict[str, object], base: Plan | None = None) -> PlanFileError:
    data = plan_data(base or sample_plan())
    for dotted, value in change.items():
        *parents, last = dotted.split(".")
        target: Any = data
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        index: int | str = int(last) if isinstance(target, list) else last
        if value is None:
            del target[index]
        else:
            target[index] = value
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return plan_file_error(path)


def test_a_plan_file_missing_a_field_is_damaged(tmp_path: Path) -> None:
    error = damaged(tmp_path, {"manifest_digest": None})
    assert error.message.endswith("is damaged: manifest_digest: Field required (1 problem(s))")
    assert error.hint == "Make the plan again: 'gitops plan --out FILE'."


def test_a_plan_file_with_wrong_values_counts_every_problem(tmp_path: Path) -> None:
    error = damaged(tmp_path, {"branches.0.action": "explode", "created_at": "yesterday"})
    assert error.message.endswith(
        "is damaged: created_at: Input should be a valid number, unable to parse string as a number (2 problem(s))"
    )


def test_a_plan_file_with_an_unknown_field_is_damaged(tmp_path: Path) -> None:
    error = damaged(tmp_path, {"payloads.0.token": "abc"})
    assert error.message.endswith("is damaged: payloads.0.token: Extra inputs are not permitted (1 problem(s))")


@pytest.mark.parametrize(
    "where",
    [
        "token",
        "branches.0.token",
        "branches.0.remote.token",
        "branches.0.modules.0.token",
        "branches.0.steps.0.token",
        "branches.0.verify.token",
        "branches.0.drift.token",
        "budget.0.token",
        "rollbacks.0.token",
        "failed.0.token",
    ],
)
def test_an_unknown_field_is_refused_in_every_part_of_a_plan_file(tmp_path: Path, where: str) -> None:
    # The models are dataclasses made without validation; the plan file's reader must still refuse any field it
    # does not know, at every level, in the words it used when the models were pydantic's.
    error = damaged(tmp_path, {where: "abc"}, full_plan())
    assert error.message.endswith(f"is damaged: {where}: Extra inputs are not permitted (1 problem(s))")


def test_a_part_that_is_not_an_object_is_named_by_its_kind(tmp_path: Path) -> None:
    error = damaged(tmp_path, {"branches.0.remote": 5, "budget.0": "row"}, full_plan())
    assert error.message.endswith(
        "is damaged: branches.0.remote: Input should be a valid dictionary or instance of RemoteSeen (2 problem(s))"
    )


def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "plan.json"
    target.mkdir()  # refused as --out (issue 37): only a regular file or a new path is written
    with pytest.raises(UsageError) as caught:
        save_plan(sample_plan(), target)
    assert caught.value.exit_code == 4
    assert caught.value.message.startswith(f"--out {target} is a folder; ")
    assert leftovers(tmp_path) == []


def test_an_unwritable_folder_is_a_usage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder", encoding="utf-8")
    with pytest.raises(UsageError) as caught:
        save_plan(sample_plan(), blocker / "plan.json")
    assert caught.value.message.startswith(f"cannot write the plan to {blocker / 'plan.json'}: ")
    assert caught.value.hint == "Name a file in a folder you can write to with --out."


def test_a_plan_that_cannot_be_serialised_leaves_no_temporary_file(tmp_path: Path) -> None:
    good = sample_plan()
    not_a_module: Any = object()  # the dataclasses take it unchecked; the plan file's writer refuses it
    broken = dataclasses.replace(good, payloads=[dataclasses.replace(good.payloads[0], modules={"main": not_a_module})])
    with pytest.raises(PydanticSerializationError):
        save_plan(broken, tmp_path / "plan.json")
    assert list(tmp_path.iterdir()) == []


def test_a_plan_with_lone_surrogates_from_the_server_round_trips(tmp_path: Path) -> None:
    # A server's module name or text may hold a lone surrogate; the plan file keeps it as an escape, exactly.
    original = plan(
        manifest(branch()),
        local(("local", "main", {"main": "fixed\n"})),
        view("local", on_server("main", {"main": "x\udc80y", "b\ud800ad": "z"})),
    )
    path = tmp_path / "plan.json"
    save_plan(original, path)
    assert path.read_bytes().isascii()
    assert "b\\ud800ad" in path.read_text(encoding="ascii")
    assert load_plan(path) == original
