"""The committed JSON Schema matches the models, and every example validates against it and loads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs in the test extras
import pytest
import yaml

from gitops.config.manifest import load_manifest
from gitops.config.validation import manifest_json_schema
from tests.factories import manifest_data

REPO = Path(__file__).resolve().parents[2]
SCHEMA_FILE = REPO / "schemas" / "gitops.schema.json"
EXAMPLES = sorted((REPO / "examples").glob("**/gitops*.yaml"))


def committed_schema() -> dict[str, Any]:
    data = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_committed_schema_is_the_generated_one() -> None:
    generated = json.dumps(manifest_json_schema(), indent=2, ensure_ascii=False) + "\n"
    assert SCHEMA_FILE.read_text(encoding="utf-8") == generated, (
        "schemas/gitops.schema.json is out of date; regenerate it with: gitops schema > schemas/gitops.schema.json"
    )


def test_schema_names_itself_and_describes_the_fields() -> None:
    schema = committed_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == "urn:screeps-gitops:manifest:v1"
    assert schema["title"] == "screeps-gitops manifest"
    jsonschema.Draft202012Validator.check_schema(schema)
    branch = schema["$defs"]["BranchConfig"]["properties"]
    assert all(field.get("description") or "$ref" in field for field in branch.values())


def test_there_are_examples() -> None:
    names = {p.relative_to(REPO).as_posix() for p in EXAMPLES}
    assert {"examples/basic/gitops.yaml", "examples/multi-server/gitops.yaml"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_example_validates_against_the_schema_and_loads(path: Path) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(committed_schema()).validate(data)
    load_manifest(path)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"servers": {"local": {"url": "http://h", "token": "x"}}}, id="literal-token"),
        pytest.param({"version": 2}, id="version-2"),
        pytest.param({"branches": []}, id="no-branches"),
        pytest.param({"budget": {"reserve": {"POST /api/user/cod": 1}}}, id="unknown-endpoint"),
        pytest.param({"branches": [{"server": "local", "branch": "$activeWorld"}]}, id="dollar-branch"),
    ],
)
def test_the_schema_refuses_what_editors_can_catch(change: dict[str, Any]) -> None:
    data = {**manifest_data(), **change}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(committed_schema()).validate(data)
