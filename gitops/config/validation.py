"""The manifest's validator: the pydantic models derived from the model, the one run of the rules, and the JSON
Schema.

The manifest is defined once, in :mod:`gitops.config.model` (fields, types, defaults, descriptions, constraints).
This module turns that definition into pydantic models (:func:`_derive`, with :func:`pydantic.create_model`), so
validation and ``schemas/gitops.schema.json`` (``gitops schema``) follow the definition and cannot drift from it.
What the definition only names is written beside it: the check and message of each
:class:`~gitops.config.model.Rule` with what the JSON Schema says of it (:mod:`gitops.config.valuerules`), and the
rules that relate values (:mod:`gitops.config.relations`). Those run once, in :func:`validate`, on the data as
loaded; a model holds only the rules for one value. pydantic's own errors are worded by
:mod:`gitops.config.errorwords`.

Only a manifest not validated before comes here (pydantic is imported on a cache miss only: see
:mod:`gitops.config.manifest`). Each problem reads ``gitops.yaml:12: branches[0].include[1]: <what is wrong>; <how
to fix>``; values that could be secrets are never echoed.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from gitops.config import model
from gitops.config.errorwords import pydantic_problem
from gitops.config.reading import Loc
from gitops.config.relations import relation_problems
from gitops.config.valuerules import RULES
from gitops.config.yamlload import Found, Problems

__all__ = [
    "BranchConfig",
    "BudgetConfig",
    "CpuConfig",
    "Manifest",
    "Naming",
    "RequiresConfig",
    "ServerConfig",
    "VerifyConfig",
    "check",
    "manifest_json_schema",
    "to_runtime",
    "validate",
]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "urn:screeps-gitops:manifest:v1"


# --- the models, derived from gitops.config.model --------------------------------------------------------------

#: Model settings beyond every model's (unknown keys refused, frozen), by class name.
_CONFIG: dict[str, ConfigDict] = {"Manifest": ConfigDict(title="screeps-gitops manifest")}
_MODELS: dict[type, type[BaseModel]] = {}


def _derive(cls: type) -> type[BaseModel]:
    """The pydantic model of a class of :mod:`gitops.config.model`: the same name, docstring and fields."""
    hints = typing.get_type_hints(cls, include_extras=True)
    fields: dict[str, Any] = {
        spec.name: (_pydantic_type(hints[spec.name]), _field_info(spec)) for spec in dataclasses.fields(cls)
    }
    config = ConfigDict(extra="forbid", frozen=True, **_CONFIG.get(cls.__name__, {}))
    derived: type[BaseModel] = create_model(
        cls.__name__, __config__=config, __doc__=cls.__doc__, __module__=__name__, **fields
    )
    return derived


def _field_info(spec: dataclasses.Field[Any]) -> Any:
    """A dataclass field's default and metadata as pydantic's ``Field`` (a class default becomes its model); a
    field's credential role is the tool's own knowledge, not part of the JSON Schema."""
    metadata = {key: value for key, value in spec.metadata.items() if key != model.CREDENTIAL_KEY}
    if spec.default is not dataclasses.MISSING:
        return Field(spec.default, **metadata)
    if spec.default_factory is not dataclasses.MISSING:
        factory = spec.default_factory
        return Field(default_factory=_MODELS.get(factory, factory), **metadata)  # type: ignore[call-overload]
    return Field(**metadata)


def _pydantic_type(hint: Any) -> Any:
    """A type of :mod:`gitops.config.model` for pydantic: classes as their models, rules as their validators."""
    if isinstance(hint, type) and hint in _MODELS:
        return _MODELS[hint]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    annotated: Any = Annotated
    if origin is Annotated:
        rules = [item for mark in args[1:] for item in (RULES[mark.name] if isinstance(mark, model.Rule) else (mark,))]
        return annotated[(_pydantic_type(args[0]), *rules)]
    if origin in (typing.Union, types.UnionType):
        return typing.Union[tuple(_pydantic_type(arg) for arg in args)]  # noqa: UP007 (built from a tuple)
    if origin is list:
        return list[_pydantic_type(args[0])]  # type: ignore[misc]
    if origin is dict:
        return dict[_pydantic_type(args[0]), _pydantic_type(args[1])]  # type: ignore[misc]
    return hint


for _cls in model.CLASSES.values():  # in the definition's order: a class comes after the classes it holds
    _MODELS[_cls] = _derive(_cls)

CpuConfig: Any = _MODELS[model.CpuConfig]
ServerConfig: Any = _MODELS[model.ServerConfig]
Naming: Any = _MODELS[model.Naming]
RequiresConfig: Any = _MODELS[model.RequiresConfig]
VerifyConfig: Any = _MODELS[model.VerifyConfig]
BranchConfig: Any = _MODELS[model.BranchConfig]
BudgetConfig: Any = _MODELS[model.BudgetConfig]
Manifest: Any = _MODELS[model.Manifest]


# --- validating, and the runtime classes ---------------------------------------------------------------------


def validate(data: Any, problems: Problems) -> model.Manifest | None:
    """The one place the rules run: pydantic's models check each value, then
    :func:`gitops.config.relations.relation_problems` relates them.

    The cross-field rules read the data as loaded (not the models), so they are reported even where a type error
    elsewhere means there is no model. A valid manifest comes back as the runtime classes
    (:mod:`gitops.config.model`); ``None`` when the models refused it (``problems`` then says why).
    """
    manifest: Manifest | None = None
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        problems.extend(pydantic_problem(err, Manifest) for err in exc.errors())
    problems.extend(relation_problems(data))
    if manifest is None:
        return None
    runtime = to_runtime(manifest)
    assert isinstance(runtime, model.Manifest)
    return runtime


def check(
    data: Any, display: str | None, locations: Mapping[Loc, int], found: Iterable[Found] = ()
) -> tuple[model.Manifest | None, list[str]]:
    """Validate ``data`` read from ``display`` (``None``: not read from a file) with the line of each key path in
    ``locations`` and the problems ``found`` while reading it: the manifest when every rule passed, else ``None``
    and every problem's text."""
    problems = Problems(display, locations)
    problems.cover(found)
    manifest = validate(data, problems)
    if problems or manifest is None:
        return None, problems.texts()
    return manifest, []


def to_runtime(value: Any) -> Any:
    """A validated model (or a list, dict or plain value holding models) as :mod:`gitops.config.model` classes:
    each model becomes the dataclass it was derived from, field by field."""
    if isinstance(value, BaseModel):
        cls = model.CLASSES[type(value).__name__]
        return cls(**{name: to_runtime(getattr(value, name)) for name in type(value).model_fields})
    if isinstance(value, list):
        return [to_runtime(item) for item in value]
    if isinstance(value, dict):
        return {key: to_runtime(item) for key, item in value.items()}
    return value


# --- the JSON Schema -------------------------------------------------------------------------------------------


def manifest_json_schema() -> dict[str, Any]:
    """The manifest's JSON Schema, as ``schemas/gitops.schema.json`` holds it (``gitops schema`` prints it)."""
    schema = Manifest.model_json_schema(mode="validation")
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": SCHEMA_ID,
        **schema,
        "description": "The manifest of screeps-gitops (gitops.yaml): game servers, and the code branches to "
        "deploy to them from this repository. Reference: gitops help manifest.",
    }
