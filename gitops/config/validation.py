"""The manifest's validator: every rule and message, and the pydantic models and JSON Schema derived from the model.

The manifest is defined once, in :mod:`gitops.config.model` (fields, types, defaults, descriptions, constraints).
This module turns that definition into pydantic models (:func:`_derive`, with :func:`pydantic.create_model`), so
validation and ``schemas/gitops.schema.json`` (``gitops schema``) follow the definition and cannot drift from it.
What the definition only names is written here: the check and message of each :class:`~gitops.config.model.Rule`
(URLs, environment variable names, branch names, globs) with what the JSON Schema says of it, and the rules that
relate values (one way of credentials per server, branches naming known servers, each branch listed once, reserve
keys from the limits table). Those run once, in :func:`validate`, on the data as loaded; a model holds only the
rules for one value.

Only a manifest not validated before comes here (pydantic is imported on a cache miss only: see
:mod:`gitops.config.manifest`). Each problem reads ``gitops.yaml:12: branches[0].include[1]: <what is wrong>; <how
to fix>``; values that could be secrets are never echoed.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    WithJsonSchema,
    create_model,
)
from pydantic_core import PydanticCustomError

from gitops.config import model
from gitops.config.reading import Loc
from gitops.config.yamlload import Found, Problems
from gitops.core.endpoints import ENDPOINT_LIMITS, MAX_BRANCHES, Limit

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

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOKEN_LIKE = re.compile(r"(?=.*[0-9])[0-9A-Fa-f-]{20,}")
_SERVER_NAME = re.compile(model.SERVER_NAME)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _fail(message: str) -> PydanticCustomError:
    # The message goes through the context: a template would read "{'binary': ...}" as a placeholder.
    return PydanticCustomError("gitops", "{message}", {"message": message})


# --- rules for one value -------------------------------------------------------------------------------------


def _check_env_name(value: str) -> str:
    if not _ENV_NAME.fullmatch(value):
        # Never echo the value: a pasted token is the usual reason it is not a variable name.
        raise _fail(
            "is not an environment variable name (letters, digits and '_', not starting with a digit; the value is "
            "not shown in case it is a secret); name the variable that holds the secret, e.g. SCREEPS_TOKEN"
        )
    if _TOKEN_LIKE.fullmatch(value):
        raise _fail(
            "looks like a token, not the name of an environment variable; literal secrets are refused: put the "
            "token in an environment variable and name that variable here, e.g. SCREEPS_TOKEN"
        )
    return value


def _check_credentials_entry(value: str) -> str:
    if not value.strip():
        raise _fail("is empty; name a server entry of the unified credentials file (.screeps.yaml), e.g. main")
    return value


#: The longest branch name the servers take, in UTF-16 code units as JavaScript counts a string's length: the
#: private server refuses a longer source branch of clone-branch ("invalid branch name"), so a longer branch could be
#: made but never cloned from (docs/private-server-facts.md).
MAX_BRANCH_NAME_UNITS = 30


def _check_branch_name(value: str) -> str:
    if not value:
        raise _fail("is empty; name the branch, e.g. main")
    control = _control_problem(value, "name the branch without it, e.g. main")
    if control is not None:
        raise control
    units = len(value.encode("utf-16-le", "surrogatepass")) // 2
    if units > MAX_BRANCH_NAME_UNITS:
        counted = "" if units == len(value) else f" as the server counts them (UTF-16 units; {len(value)} characters)"
        raise _fail(
            f"{value!r} is {units} characters long{counted}; the server takes at most {MAX_BRANCH_NAME_UNITS} "
            "(a longer one is refused as 'invalid branch name' when it is cloned); shorten it"
        )
    if value.startswith("$"):
        raise _fail(
            f"{value!r} starts with '$', which the server reads as 'the active branch' ($activeWorld, $activeSim), "
            "so no branch can have such a name; name the branch itself, e.g. main"
        )
    return value


def _control_problem(value: str, fix: str) -> PydanticCustomError | None:
    # A NUL cannot reach the file system at all, and no file name needs a newline or a tab: refuse them all here,
    # where the message can name the line, rather than fail on them when the files are read.
    found = _CONTROL.search(value)
    if found is None:
        return None
    return _fail(f"{value!r} contains the control character {found.group()!r}; {fix}")


def _check_root(value: str) -> str:
    control = _control_problem(value, "write the folder's name without it, e.g. src")
    if control is not None:
        raise control
    if not value:
        raise _fail("is empty; use '.' for the manifest's own folder, or a folder such as src")
    if "\\" in value:
        raise _fail(f"{value!r} contains '\\'; separate folders with '/', e.g. src/bot")
    if value.startswith("/") or re.match(r"[A-Za-z]:", value):
        raise _fail(f"{value!r} is absolute; give a folder relative to the manifest, e.g. src")
    return value


def _check_glob(value: str) -> str:
    control = _control_problem(value, "write the glob without it, e.g. '**/*.js'")
    if control is not None:
        raise control
    if value.startswith("./"):
        value = value[2:]
    if not value:
        raise _fail("is an empty glob; write one such as '**/*.js', or remove it")
    if value.startswith("/"):
        raise _fail(f"{value!r} is absolute; globs are relative to the branch root, e.g. '**/*.js'")
    if ".." in value.split("/"):
        raise _fail(f"{value!r} contains '..'; globs only match files under root: move root up instead")
    return value


def _check_separator(value: str) -> str:
    if len(value) != 1:
        raise _fail(
            f"{value!r} is not one character; write the one character that stands for a folder boundary in module "
            "names: '/', '.', or the one your upload script flattens folders with, such as '_'"
        )
    if value == "\\" or _CONTROL.search(value) or value.isspace():
        raise _fail(f"{value!r} cannot stand between the parts of a module name; use '/', '.' or '_'")
    return value


def _check_suffix(value: str) -> str:
    if len(value) < 2 or not value.startswith("."):
        raise _fail(f"{value!r} is not a file suffix; write it with its dot, e.g. '.js'")
    return value


def _normalise_url(value: str) -> str:
    """The base URL without a trailing ``/``; refuses anything that is not a plain http(s) base URL."""
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise _fail("is not a valid URL; write it like https://screeps.com or http://127.0.0.1:21025") from None
    # Check the places a secret could hide first, and do not echo the URL then.
    if "@" in parts.netloc:
        raise _fail(
            "must not contain a user name or password; put them in environment variables and name them with "
            "username_env and password_env (or use token_env)"
        )
    if parts.query or parts.fragment or "?" in value or "#" in value:
        raise _fail(
            "must not have a query or a fragment; give the base URL only, e.g. https://screeps.com/ptr (a token "
            "goes in an environment variable named by token_env)"
        )
    if any(ch.isspace() for ch in value):
        raise _fail(f"{value!r} contains white space; write the base URL only, e.g. https://screeps.com")
    if not parts.scheme:
        raise _fail(
            f"{value!r} has no scheme; write https:// (the official server) or http:// (a private server), "
            "e.g. https://screeps.com or http://127.0.0.1:21025"
        )
    if parts.scheme not in ("http", "https"):
        raise _fail(f"scheme '{parts.scheme}://' is not supported; use https:// or http://")
    if not parts.hostname:
        raise _fail(f"{value!r} has no host; write it like https://screeps.com or http://127.0.0.1:21025")
    if port == 0:
        raise _fail(f"{value!r} has port 0; give the server's port, e.g. http://127.0.0.1:21025")
    return value.rstrip("/")


def _check_build(value: str | list[str]) -> str | list[str]:
    if isinstance(value, str) and not value.strip():
        raise _fail("is an empty command; write the build command, e.g. 'npm ci && npm run build', or remove it")
    if isinstance(value, list) and (not value or not value[0]):
        raise _fail("is an empty argument list; write the program and its arguments, e.g. [npm, run, build]")
    return value


def _check_pattern(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise _fail(f"is not a regular expression ({exc}); fix it, or quote it in single quotes in YAML") from exc
    return value


def _check_line_pattern(value: str) -> str:
    _check_pattern(value)
    if re.fullmatch(value, ""):
        raise _fail(
            "matches an empty line, so the comparison would not see a change of blank lines (and '.*' would hide "
            "every change); match the stamped line itself, e.g. '// Built at .*'"
        )
    return value


def _check_include(value: list[str]) -> list[str]:
    if not value:
        raise _fail(
            "is empty, so the branch would have no modules; list at least one glob, e.g. ['**/*.js'], or "
            "leave include out for that default"
        )
    return value


def _check_activate(value: list[str]) -> list[str]:
    for name in ("world", "sim"):
        if value.count(name) > 1:
            raise _fail(f"lists '{name}' twice; list it once")
    return value


# --- the models, derived from gitops.config.model --------------------------------------------------------------

#: What each :class:`~gitops.config.model.Rule` is to pydantic: its check, and what the JSON Schema says of it
#: (editors check as you type; the checks say the rest).
_RULES: dict[str, tuple[Any, ...]] = {
    "env_name": (
        AfterValidator(_check_env_name),
        WithJsonSchema({"type": "string", "pattern": f"^{_ENV_NAME.pattern}$"}),
    ),
    "credentials_entry": (
        AfterValidator(_check_credentials_entry),
        WithJsonSchema({"type": "string", "minLength": 1}),
    ),
    "branch_name": (
        AfterValidator(_check_branch_name),
        WithJsonSchema({"type": "string", "pattern": "^[^$]", "maxLength": MAX_BRANCH_NAME_UNITS}),
    ),
    "root": (AfterValidator(_check_root), WithJsonSchema({"type": "string", "pattern": "^[^/\\\\]"})),
    "glob": (AfterValidator(_check_glob), WithJsonSchema({"type": "string", "minLength": 1})),
    "separator": (
        AfterValidator(_check_separator),
        WithJsonSchema({"type": "string", "minLength": 1, "maxLength": 1, "pattern": "^[^\\s\\\\]$", "default": "/"}),
    ),
    "suffix": (AfterValidator(_check_suffix), WithJsonSchema({"type": "string", "pattern": "^[.].+"})),
    "url": (AfterValidator(_normalise_url),),
    "fail_pattern": (Field(min_length=1, max_length=500), AfterValidator(_check_pattern)),
    "line_pattern": (Field(min_length=1, max_length=500), AfterValidator(_check_line_pattern)),
    "build": (
        AfterValidator(_check_build),
        WithJsonSchema(
            {
                "anyOf": [
                    {"type": "string", "minLength": 1},
                    {"type": "array", "items": {"type": "string"}, "minItems": 1},
                ]
            }
        ),
    ),
    "include": (AfterValidator(_check_include),),
    "activate": (AfterValidator(_check_activate),),
    "strict_int": (Strict(),),
    "reserve": (
        Field(
            json_schema_extra={
                "propertyNames": {"enum": [*ENDPOINT_LIMITS]},
                "additionalProperties": {"type": "integer", "minimum": 0},
            }
        ),
    ),
}

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
        rules = [item for mark in args[1:] for item in (_RULES[mark.name] if isinstance(mark, model.Rule) else (mark,))]
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


# --- rules that relate values (run on raw YAML data, so they must accept anything) ----------------------------

_SECRET_KEYS = {
    "token": "token",
    "token_value": "token",
    "auth_token": "token",
    "api_token": "token",
    "access_token": "token",
    "api_key": "token",
    "apikey": "token",
    "secret": "token",
    "password": "password",
    "passwd": "password",
    "pass": "password",
}
_LITERAL_USER_KEYS = {"username", "user", "email"}


def _given(raw: Mapping[str, Any], key: str) -> bool:
    return raw.get(key) is not None


def _server_rules(raw: Mapping[str, Any]) -> list[tuple[Loc, str]]:
    problems: list[tuple[Loc, str]] = []
    token, user, password, entry = (
        _given(raw, k) for k in ("token_env", "username_env", "password_env", "credentials")
    )
    if user and not password:
        problems.append(
            (("username_env",), "needs password_env too (private servers sign in with both); add password_env")
        )
    if password and not user:
        problems.append(
            (("password_env",), "needs username_env too (private servers sign in with both); add username_env")
        )
    ways = [name for name, on in (("token_env", token), ("username_env/password_env", user or password)) if on]
    if entry:
        ways.append("credentials")
    if len(ways) > 1:
        problems.append(((), f"names credentials in more than one way ({', '.join(ways)}); keep exactly one"))
    elif not ways and not any(k in _SECRET_KEYS or k in _LITERAL_USER_KEYS for k in raw):
        problems.append(
            (
                (),
                "names no credentials; add token_env (a token, official servers), username_env and password_env "
                "(private servers), or credentials (an entry of the unified credentials file .screeps.yaml)",
            )
        )
    return problems


def _budget_rules(raw: Mapping[str, Any]) -> list[tuple[Loc, str]]:
    problems: list[tuple[Loc, str]] = []
    reserve = raw.get("reserve")
    if not isinstance(reserve, dict):
        return problems
    # The global limit is paced by the client, not reserved: a reserve names an endpoint of the table.
    known: dict[str, Limit] = dict(ENDPOINT_LIMITS)
    for key, value in reserve.items():
        if not isinstance(key, str):
            continue
        limit = known.get(key)
        if limit is None:
            close = _close_matches(key, list(known))
            fix = f"did you mean '{close[0]}'?" if close else "use an endpoint of the limits table"
            problems.append(
                (("reserve", key), f"is not a rate-limited endpoint; {fix} (see the limits: gitops help manifest)")
            )
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            continue  # pydantic reports the type
        if value < 0:
            problems.append((("reserve", key), f"{value} is negative; keep back 0 requests or more"))
        elif value >= limit.count:
            problems.append(
                (
                    ("reserve", key),
                    f"{value} is not below the limit ({limit.describe()}); keep back fewer requests than that",
                )
            )
    return problems


def _manifest_rules(raw: Mapping[str, Any]) -> list[tuple[Loc, str]]:
    """Rules across servers and branches (not the per-server and budget rules, which their models check)."""
    servers = raw.get("servers")
    problems = _server_name_rules(servers)
    branches = raw.get("branches")
    if not isinstance(branches, list):
        return problems
    if not branches:
        problems.append((("branches",), "lists no branches; add one, e.g. - {server: local, branch: main}"))
    listing = _Listing()
    for i, entry in enumerate(branches):
        if isinstance(entry, dict):
            problems += _branch_entry_rules(i, entry, servers, listing)
    return problems + _listing_rules(listing)


def _server_name_rules(servers: Any) -> list[tuple[Loc, str]]:
    """The ``servers`` mapping: at least one server, each with a usable name."""
    problems: list[tuple[Loc, str]] = []
    if not isinstance(servers, dict):
        return problems
    if not servers:
        problems.append(
            (("servers",), "lists no servers; add one, e.g. local: {url: http://127.0.0.1:21025, token_env: ...}")
        )
    for name in servers:
        if isinstance(name, str) and not _SERVER_NAME.fullmatch(name):
            problems.append(
                (
                    ("servers", name),
                    "is not a usable server name; use letters, digits, '-', '_' and '.', starting with a "
                    "letter or digit",
                )
            )
    return problems


@dataclass
class _Listing:
    """What the branch entries say together, gathered entry by entry for the rules that compare them."""

    #: The index of each (server, branch) where it is first listed.
    seen: dict[tuple[str, str], int] = field(default_factory=dict)
    #: Per server, each standby branch and the index of the entry that names it.
    standbys: dict[str, dict[str, int]] = field(default_factory=dict)
    #: The indexes of the entries that activate (server, 'world' or 'sim').
    active: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    #: The branch names deployed to each server.
    per_server: dict[str, set[str]] = field(default_factory=dict)


def _branch_entry_rules(i: int, entry: Mapping[str, Any], servers: Any, listing: _Listing) -> list[tuple[Loc, str]]:
    """One entry of ``branches``: a known server, listed once, a consistent ``verify``; noted in ``listing``."""
    problems: list[tuple[Loc, str]] = []
    server, name = entry.get("server"), entry.get("branch")
    if isinstance(server, str) and isinstance(servers, dict) and servers and server not in servers:
        known = ", ".join(str(s) for s in servers)
        problems.append(
            (("branches", i, "server"), f"'{server}' is not a server of this manifest; use one of: {known}")
        )
    if not (isinstance(server, str) and isinstance(name, str)):
        return problems
    listing.per_server.setdefault(server, set()).add(name)
    first = listing.seen.setdefault((server, name), i)
    if first != i:
        problems.append(
            (
                ("branches", i),
                f"branch '{name}' of server '{server}' is already listed at branches[{first}]; list each branch once",
            )
        )
        return problems
    activate = entry.get("activate")
    verify = entry.get("verify")
    if isinstance(verify, dict):
        problems += _verify_rules(i, verify, server, name, listing)
        if not (isinstance(activate, list) and activate):
            problems.append(
                (
                    ("branches", i, "verify"),
                    "needs the branch to be activated (the console shows the active code); add activate: [world]",
                )
            )
    if isinstance(activate, list):
        for which in dict.fromkeys(a for a in activate if a in ("world", "sim")):
            listing.active.setdefault((server, which), []).append(i)
    return problems


def _verify_rules(
    i: int, verify: Mapping[str, Any], server: str, name: str, listing: _Listing
) -> list[tuple[Loc, str]]:
    """A branch's ``verify``: ``standby`` exactly with ``rollback: standby``, and not the branch itself."""
    problems: list[tuple[Loc, str]] = []
    standby = verify.get("standby")
    if verify.get("rollback") == "standby" and not isinstance(standby, str):
        problems.append(
            (
                ("branches", i, "verify"),
                "rollback: standby needs standby: BRANCH, the second branch that takes turns with this one",
            )
        )
    if isinstance(standby, str):
        if verify.get("rollback") != "standby":
            problems.append((("branches", i, "verify", "standby"), "is only for rollback: standby; add it"))
        if standby == name:
            problems.append((("branches", i, "verify", "standby"), "must differ from the branch itself"))
        listing.standbys.setdefault(server, {})[standby] = i
    return problems


def _listing_rules(listing: _Listing) -> list[tuple[Loc, str]]:
    """Across entries: no standby also listed, one active branch per server and kind, the server's branch limit."""
    problems: list[tuple[Loc, str]] = []
    for server, standby_of in listing.standbys.items():
        for standby, i in standby_of.items():
            if (server, standby) in listing.seen:
                problems.append(
                    (
                        ("branches", i, "verify", "standby"),
                        f"'{standby}' is also listed under branches; a standby branch is this tool's to switch, "
                        "list it only here",
                    )
                )
    for (server, which), indexes in listing.active.items():
        for i in indexes[1:]:
            problems.append(
                (
                    ("branches", i, "activate"),
                    f"branches[{indexes[0]}] already activates '{which}' on server '{server}', and a server has "
                    f"one active {which} branch; keep activate: [{which}] on one of them",
                )
            )
    for server_name, names in listing.per_server.items():
        if len(names) > MAX_BRANCHES:
            problems.append(
                (
                    ("branches",),
                    f"server '{server_name}' gets {len(names)} branches, but a user has at most {MAX_BRANCHES}; "
                    "deploy fewer branches",
                )
            )
    return problems


def _all_rules(raw: Any) -> list[tuple[Loc, str]]:
    """Every cross-field rule, on raw YAML data of any shape."""
    if not isinstance(raw, dict):
        return []
    problems = list(_manifest_rules(raw))
    servers = raw.get("servers")
    if isinstance(servers, dict):
        for name, server in servers.items():
            if isinstance(server, dict):
                problems += [(("servers", name, *loc), msg) for loc, msg in _server_rules(server)]
    budget = raw.get("budget")
    if isinstance(budget, dict):
        problems += [(("budget", *loc), msg) for loc, msg in _budget_rules(budget)]
    return problems


# --- validating, and the runtime classes ---------------------------------------------------------------------


def validate(data: Any, problems: Problems) -> model.Manifest | None:
    """The one place the rules run: pydantic's models check each value, then :func:`_all_rules` relates them.

    The cross-field rules read the data as loaded (not the models), so they are reported even where a type error
    elsewhere means there is no model. A valid manifest comes back as the runtime classes
    (:mod:`gitops.config.model`); ``None`` when the models refused it (``problems`` then says why).
    """
    manifest: Manifest | None = None
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        problems.extend(_pydantic_problem(err) for err in exc.errors())
    problems.extend(_all_rules(data))
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


# --- pydantic errors in our words -----------------------------------------------------------------------------


def _close_matches(key: str, candidates: list[str]) -> list[str]:
    return difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)


_MISSING_HINTS = {
    "version": "add 'version: 1' at the top",
    "servers": "add a 'servers:' mapping, e.g. local: {url: http://127.0.0.1:21025, token_env: SCREEPS_TOKEN}",
    "branches": "add a 'branches:' list, e.g. - {server: local, branch: main}",
    "url": "add the server's base URL, e.g. url: https://screeps.com",
    "server": "name a key under servers, e.g. server: local",
    "branch": "name the branch, e.g. branch: main",
}


def _kind(value: object) -> str:
    if value is None:
        return "empty (null)"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _pydantic_problem(err: Mapping[str, Any]) -> tuple[Loc, str]:
    loc: Loc = tuple(err["loc"])
    kind, value, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    if loc and loc[-1] == "[key]":
        return loc[:-1], f"the key must be a string, not {_kind(loc[-2] if len(loc) > 1 else None)}"
    name = loc[-1] if loc else ""
    if kind == "gitops":
        return loc, str(ctx.get("message", err["msg"]))
    if kind == "missing":
        hint = _MISSING_HINTS.get(str(name), "add it")
        return loc, f"is required but missing; {hint}"
    if kind == "extra_forbidden":
        return loc, _unknown_key_text(loc)
    if kind == "string_type":
        return loc, f"must be a string, not {_kind(value)}; put the value in quotes"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return loc, f"must be a whole number, not {_kind(value)}"
    if kind == "list_type":
        return loc, f"must be a list, not {_kind(value)}; write [a, b] or one '- item' per line"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return loc, f"must be a mapping (key: value lines), not {_kind(value)}"
    if kind == "literal_error":
        shown = repr(value) if isinstance(value, str | int) and not isinstance(value, bool) else _kind(value)
        if loc == ("version",):
            return loc, f"{shown} is not a manifest version this screeps-gitops reads; write 'version: 1'"
        return loc, f"must be {ctx.get('expected', 'one of the allowed values')}, not {shown}"
    if kind == "greater_than_equal":
        return loc, f"must be {ctx.get('ge')} or more"
    msg = str(err["msg"])
    return loc, msg[0].lower() + msg[1:] if msg else kind


def _unknown_key_text(loc: Loc) -> str:
    key = str(loc[-1])
    secret = _SECRET_KEYS.get(key.lower())
    if secret is not None:
        return f"literal secrets are refused; put the {secret} in an environment variable and name it with {secret}_env"
    if key.lower() in _LITERAL_USER_KEYS:
        return "user names are not written here; put it in an environment variable and name it with username_env"
    allowed = _keys_at(loc[:-1])
    home = _home_of(key)
    if home is not None and home[:-1] != _shape(loc[:-1]):
        # A key of another level (a branch's verify: written at the top) is misplaced, not misspelt.
        return f"'{key}' is not a key here; it is a key of {_place_text(home[:-1])} ({_dotted(home)}): move it there"
    close = _close_matches(key, allowed)
    if close:
        return f"unknown key; did you mean '{close[0]}'?"
    if allowed:
        return f"unknown key; the keys here are: {', '.join(allowed)}"
    return "unknown key; remove it"


def _shape(loc: Loc) -> tuple[str, ...]:
    """``loc`` as :func:`_home_of` spells places: list indexes ``[]``, a mapping's own keys ``NAME``."""
    out: list[str] = []
    current: Any = Manifest
    for part in loc:
        current = _unwrap(current)
        origin = typing.get_origin(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            info = current.model_fields.get(str(part))
            out.append(str(part))
            current = None if info is None else info.annotation
        elif origin in (list, dict):
            out.append("[]" if origin is list else "NAME")
            current = typing.get_args(current)[-1]
        else:
            out.append(str(part))
    return tuple(out)


def _home_of(key: str) -> tuple[str, ...] | None:
    """Where the manifest has a key named ``key`` (the shallowest place; ``[]`` for a list's entries, ``NAME`` for
    a mapping's own keys): ``('branches', '[]', 'verify')``; ``None`` when no model has it."""
    queue: list[tuple[Any, tuple[str, ...]]] = [(Manifest, ())]
    seen: set[type] = set()
    while queue:
        cls, path = queue.pop(0)
        if cls in seen:
            continue
        seen.add(cls)
        for name, info in cls.model_fields.items():
            if name == key:
                return (*path, name)
            inner, where = _unwrap(info.annotation), (*path, name)
            while typing.get_origin(inner) in (list, dict):
                where = (*where, "[]" if typing.get_origin(inner) is list else "NAME")
                inner = _unwrap(typing.get_args(inner)[-1])
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                queue.append((inner, where))
    return None


def _place_text(place: tuple[str, ...]) -> str:
    """``each entry of 'branches:'``, ``a server under 'servers:'``, ``'budget:'``: where a key goes, in words."""
    if place == ("branches", "[]"):
        return "each entry of 'branches:'"
    if place == ("servers", "NAME"):
        return "a server under 'servers:'"
    if not place:
        return "the top of the manifest"
    return f"'{_dotted(place)}:'"


def _dotted(place: tuple[str, ...]) -> str:
    """``branches[].verify.ticks``, ``servers.NAME.url``."""
    return ".".join(place).replace(".[]", "[]")


def _keys_at(loc: Loc) -> list[str]:
    """The field names of the model found at ``loc`` (an empty list where there is no model)."""
    current: Any = Manifest
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            info = current.model_fields.get(str(part))
            if info is None:
                return []
            current = info.annotation
        elif typing.get_origin(current) in (list, dict):
            current = typing.get_args(current)[-1]
        else:
            return []
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _unwrap(annotation: Any) -> Any:
    """``X`` from ``X | None`` and ``Annotated[X, ...]``."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation


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
