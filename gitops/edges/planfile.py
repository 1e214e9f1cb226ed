"""Plan files: ``gitops plan --out FILE`` writes one, ``gitops apply FILE`` reads it (an edge: file I/O only).

A plan file is the whole :class:`gitops.core.plan.Plan` as JSON, with the exact module content to upload and no
credentials. It is written atomically, so a reader never sees half a file. It is sealed: :func:`load_plan` refuses a
file whose payloads do not match the reviewed part of the plan (:func:`gitops.core.plan.seal_problems`).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from pydantic import ValidationError

from gitops.core.plan import PLAN_FORMAT_VERSION, Plan, seal_problems
from gitops.errors import PlanFileError, UsageError


def save_plan(plan: Plan, path: Path) -> None:
    """Write the plan (with its payloads) atomically: a reader never sees half a file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise UsageError(
            f"cannot write the plan to {path}: {exc.strerror or exc}",
            hint="Name a file in a folder you can write to with --out.",
        ) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            # Through json.dumps, ASCII: a server's module name or text may hold a lone surrogate, which pydantic's
            # JSON writer refuses (in a value) or replaces (in a key), and a plan must read back as it was made.
            fh.write(json.dumps(plan.model_dump(mode="json"), ensure_ascii=True, separators=(",", ":")))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise UsageError(f"cannot write the plan to {path}: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
    try:
        plan = Plan.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PlanFileError(
            f"plan file {path} is damaged: {where}: {first['msg']} ({exc.error_count()} problem(s))",
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
