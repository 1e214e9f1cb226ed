"""The manifest's rules for one value: each :class:`~gitops.config.model.Rule`'s check, its message, and what the
JSON Schema says of it.

:mod:`gitops.config.model` only names a value's rule (``env_name``, ``glob``, ``url``, ...); :data:`RULES` is what
each name is to pydantic: a check that refuses the value with a message saying what is wrong and how to fix it
(values that could be secrets are never echoed), and the JSON Schema text editors check as you type.
:mod:`gitops.config.validation` puts them on the models it derives.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, Strict, WithJsonSchema
from pydantic_core import PydanticCustomError

from gitops.core.endpoints import ENDPOINT_LIMITS

__all__ = ["MAX_BRANCH_NAME_UNITS", "RULES"]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOKEN_LIKE = re.compile(r"(?=.*[0-9])[0-9A-Fa-f-]{20,}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _fail(message: str) -> PydanticCustomError:
    # The message goes through the context: a template would read "{'binary': ...}" as a placeholder.
    return PydanticCustomError("gitops", "{message}", {"message": message})


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


#: What each :class:`~gitops.config.model.Rule` is to pydantic: its check, and what the JSON Schema says of it
#: (editors check as you type; the checks say the rest).
RULES: dict[str, tuple[Any, ...]] = {
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
