"""The manifest's runtime classes (``gitops/config/model.py``) against the pydantic models that validate it
(``gitops/config/validation.py``): the same fields, in the same order, of the same types, with the same defaults, so
that the two cannot drift apart; and a validated manifest's digest is what it was when the models were the runtime
classes (a saved plan compares it)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
import yaml
from pydantic import BaseModel

from gitops.config import model, validation
from gitops.config.manifest import load_manifest, manifest_digest, manifest_from_data

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(ROOT.glob("examples/*/gitops.yaml"))


def _shape(hint: Any) -> Any:
    """A type as comparable data: a manifest class by its name (either side), ``Annotated`` metadata dropped."""
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or issubclass(hint, BaseModel)):
        assert hint.__name__ in model.CLASSES, hint
        return ("class", hint.__name__)
    origin = typing.get_origin(hint)
    if origin is Annotated:
        return _shape(typing.get_args(hint)[0])
    if origin in (types.UnionType, typing.Union):
        options: list[Any] = []
        for arg in typing.get_args(hint):  # (str | list[str]) | None is str | list[str] | None
            shape = _shape(arg)
            options += shape[1] if isinstance(shape, tuple) and shape[0] == "union" else [shape]
        return ("union", tuple(options))
    if origin is Literal:
        return ("literal", typing.get_args(hint))
    if origin is not None:
        return (origin, tuple(_shape(a) for a in typing.get_args(hint)))
    return hint


@pytest.mark.parametrize("name", list(model.CLASSES))
def test_each_runtime_class_has_the_fields_of_its_model(name: str) -> None:
    runtime, validator = model.CLASSES[name], getattr(validation, name)
    fields = dataclasses.fields(runtime)
    assert [f.name for f in fields] == list(validator.model_fields)
    hints = typing.get_type_hints(runtime)
    for f in fields:
        info = validator.model_fields[f.name]
        assert _shape(hints[f.name]) == _shape(info.annotation), f"{name}.{f.name}: the types differ"
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            assert info.is_required(), f"{name}.{f.name} has a default in the model only"
            continue
        assert not info.is_required(), f"{name}.{f.name} has a default in the runtime class only"
        ours = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        theirs = validation.to_runtime(info.get_default(call_default_factory=True))
        assert ours == theirs, f"{name}.{f.name}: the defaults differ"
        assert type(ours) is type(theirs), f"{name}.{f.name}: the defaults' types differ"


def test_the_check_sees_a_difference() -> None:
    # The shape check is not vacuous: a field of another type or class reads differently.
    assert _shape(str | None) != _shape(list[str] | None)
    assert _shape(model.Naming) != _shape(model.RequiresConfig)
    assert _shape(Literal["a", "b"]) != _shape(Literal["a"])


def _old_digest(data: Any) -> str:
    """The digest as it was taken before: over pydantic's JSON dump of the validated model."""
    dumped = validation.Manifest.model_validate(data).model_dump(mode="json")
    canonical = json.dumps(dumped, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


RICH = {
    "version": 1,
    "servers": {
        "local": {"url": "http://127.0.0.1:21025/", "token_env": "SCREEPS_TOKEN", "compress": "always"},
        "home": {"url": "http://127.0.0.1:21026", "username_env": "U", "password_env": "P"},
    },
    "branches": [
        {
            "server": "local",
            "branch": "main",
            "root": "src",
            "build": ["npm", "run", "build"],
            "naming": {"separator": ".", "strip_suffixes": [".js", ".wasm"]},
            "activate": ["world"],
            "verify": {"ticks": 5, "error_share": 1, "timeout": 30, "rollback": "standby", "standby": "blue"},
            "requires": {"check": False, "ignore": ["lodash"]},
        },
        {"server": "home", "branch": "tést", "source_maps": "raw", "remote_only": "keep"},
    ],
    "budget": {"reserve": {"POST /api/user/code": 20}, "trust_own_upload_seconds": 0},
    "build": "make",
}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.parent.name)
def test_the_digest_of_each_example_is_unchanged(path: Path, tmp_path: Path) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert manifest_digest(manifest_from_data(data)) == _old_digest(data)
    assert load_manifest(path, {"GITOPS_CACHE_DIR": str(tmp_path)}).digest == _old_digest(data)


def test_the_digest_keeps_numbers_as_validation_gave_them() -> None:
    # error_share: 1 and timeout: 30 become floats, the default timeout stays the int 120 (as pydantic keeps an
    # unvalidated default): the canonical JSON differs between the two, and the digest follows the models.
    manifest = manifest_from_data(RICH)
    verify = manifest.branches[0].verify
    assert verify is not None
    assert verify.error_share == 1.0
    assert isinstance(verify.error_share, float)
    assert model.VerifyConfig().timeout == 120
    assert isinstance(model.VerifyConfig().timeout, int)
    assert manifest_digest(manifest) == _old_digest(RICH)
    assert manifest.servers["local"].url == "http://127.0.0.1:21025"  # validated: the trailing '/' dropped


def test_a_runtime_copy_with_one_field_changed_is_dataclasses_replace() -> None:
    branch = manifest_from_data(RICH).branches[0]
    other = dataclasses.replace(branch, branch="blue")
    assert (other.branch, other.naming, other.verify) == ("blue", branch.naming, branch.verify)
    with pytest.raises(dataclasses.FrozenInstanceError):
        branch.branch = "x"  # type: ignore[misc]
