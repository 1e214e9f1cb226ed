"""The JSON of a server's answer, read safely, in a module that does not import the HTTP client.

:func:`parse_json` reads JSON without Python's recursion limit in the way (100,000 ``[`` is a clear error, not a
``RecursionError``), refusing nesting deeper than :data:`MAX_JSON_DEPTH`. (``NaN`` and ``1e400`` are read as floats;
the client ignores numbers that are not finite where it reads them.) The client (:mod:`gitops.edges.http`) reads
every answer with it, and so does the branch list read on the early connection (:mod:`gitops.edges.early`).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

#: The deepest nesting of a JSON answer accepted; the service's answers are a few levels deep.
MAX_JSON_DEPTH = 64

_REFUSED = object()


class UnreadableJSON(ValueError):
    """The body is not JSON the tool reads: malformed, not UTF-8, or nested too deeply."""


def parse_json(body: bytes) -> Any:
    """The JSON value of ``body``, or :class:`UnreadableJSON` saying why not.

    The C parser raises :class:`RecursionError` on deep nesting (the limit is the interpreter's, so the depth
    accepted would depend on how deep the caller's stack is): that, and any nesting over :data:`MAX_JSON_DEPTH`,
    is refused, so that later code walking the value cannot recurse too deeply either.
    """
    try:
        # orjson first (a large branch list in a fraction of the standard library's time). It refuses what the
        # standard library reads (NaN, lone surrogates, integers over 64 bits, UTF-16 text, nesting over 1,024),
        # so the standard library decides, and words the reason, whenever orjson says no.
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        value = _REFUSED
    if value is _REFUSED:
        # Outside the handler: orjson's error holds the whole body as text (``doc``), 60 MB for a 60 MB answer.
        value = _loads_standard(body)
    if _depth_over(value, MAX_JSON_DEPTH):
        raise UnreadableJSON(f"it is nested more than {MAX_JSON_DEPTH} levels deep")
    return value


def _loads_standard(body: bytes) -> Any:
    try:
        return json.loads(body)
    except RecursionError:
        raise UnreadableJSON(f"it is nested more than {MAX_JSON_DEPTH} levels deep") from None
    except UnicodeDecodeError:
        raise UnreadableJSON("it is not UTF-8 text") from None
    except ValueError as exc:  # json.JSONDecodeError, and integers over the interpreter's digit limit
        raise UnreadableJSON(str(exc).split(":", 1)[0]) from None


def _depth_over(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and objects more than ``limit`` deep (iteratively: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False
