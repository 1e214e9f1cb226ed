"""Plan files: ``gitops plan --out FILE`` writes one, ``gitops apply FILE`` reads it (an edge: file I/O only).

A plan file is the whole :class:`gitops.core.plan.Plan` as JSON, with the exact module content to upload and no
credentials. It is written atomically, so a reader never sees half a file. It is sealed: :func:`load_plan` refuses a
file whose payloads do not match the reviewed part of the plan (:func:`gitops.core.planseal.seal_problems`).

The plan's models are stdlib dataclasses; pydantic reads and writes them here, through a ``TypeAdapter`` of
:class:`~gitops.core.plan.Plan` that is made (and pydantic imported) only when a plan file is saved or loaded, so
that a run without a plan file never imports pydantic. Loading validates as the pydantic models did: every type,
and no unknown field at any level (each dataclass's ``__pydantic_config__``); the messages keep their wording.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitops.core.plan import PLAN_FORMAT_VERSION, Plan
from gitops.core.planseal import seal_problems
from gitops.edges import outfile
from gitops.errors import PlanFileError

if TYPE_CHECKING:
    from pydantic import TypeAdapter, ValidationError
    from pydantic_core import ErrorDetails

#: pydantic words two errors of a dataclass differently from those of a model; a plan file's messages keep the
#: wording they had when the plan was a pydantic model (``{class_name}`` from the error's context).
_WORDING = {
    "unexpected_keyword_argument": "Extra inputs are not permitted",
    "dataclass_type": "Input should be a valid dictionary or instance of {class_name}",
}


@functools.cache
def _adapter() -> tuple[TypeAdapter[Plan], type[ValidationError]]:
    """The validator and serialiser of a plan file, and the error its validation raises (made once, on first use:
    pydantic is imported here only)."""
    from pydantic import TypeAdapter, ValidationError  # noqa: PLC0415 (boundary: the validator)

    return TypeAdapter(Plan), ValidationError


def _message(error: ErrorDetails) -> str:
    wording = _WORDING.get(error["type"])
    if wording is None:
        return error["msg"]
    return wording.format(**(error.get("ctx") or {"class_name": "?"}))


def plan_data(plan: Plan) -> dict[str, Any]:
    """The plan as plain JSON data, exactly as a plan file holds it."""
    adapter, _ = _adapter()
    data: dict[str, Any] = adapter.dump_python(plan, mode="json")
    return data


def check_out_path(path: Path) -> None:
    """:class:`UsageError` unless ``path`` is a regular file or does not exist yet (:mod:`gitops.edges.outfile`)."""
    outfile.check_out_path(path, what="plan")


def save_plan(plan: Plan, path: Path) -> None:
    """Write the plan (with its payloads) atomically, only to a regular file or a new path
    (:mod:`gitops.edges.outfile`). Through json.dumps, ASCII: a server's module name or text may hold a lone
    surrogate, which pydantic's JSON writer refuses (in a value) or replaces (in a key), and a plan must read back as
    it was made."""
    outfile.write_out(path, json.dumps(plan_data(plan), ensure_ascii=True, separators=(",", ":")), what="plan")


def load_plan(path: Path) -> Plan:
    """Read a saved plan; :class:`PlanFileError` when it is missing, not a plan, or of another format."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlanFileError(
            f"plan file {path} does not exist", hint="Save one with 'gitops plan --out FILE'."
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanFileError(f"plan file {path} cannot be read: {exc}") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise PlanFileError(
            f"plan file {path} is not JSON (line {exc.lineno}): is it a plan saved with 'gitops plan --out'?"
        ) from None
    except RecursionError:
        # json recurses per level: '[[[[...' deeper than the interpreter's limit is damage, not a bug of the tool.
        raise PlanFileError(
            f"plan file {path} is nested too deeply to be a plan: is it a plan saved with 'gitops plan --out'?"
        ) from None
    version = data.get("format_version") if isinstance(data, dict) else None
    if version != PLAN_FORMAT_VERSION:
        raise PlanFileError(
            f"plan file {path} has format_version {version!r}; this gitops reads format_version {PLAN_FORMAT_VERSION}",
            hint="Make the plan again with this version of gitops: 'gitops plan --out FILE'.",
        )
    adapter, invalid = _adapter()
    try:
        plan = adapter.validate_python(data)
    except invalid as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PlanFileError(
            f"plan file {path} is damaged: {where}: {_message(first)} ({exc.error_count()} problem(s))",
            hint="Make the plan again: 'gitops plan --out FILE'.",
        ) from None
    problems = seal_problems(plan)
    if problems:
        raise PlanFileError(
            f"plan file {path} was edited after it was made: what it would upload is not what the plan shows, "
            "nothing was applied:\n" + "\n".join(f"  - {p}" for p in problems),
            hint="Make the plan again with 'gitops plan --out FILE', review it, and apply that file unchanged.",
        )
    return plan
