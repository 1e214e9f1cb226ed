"""What kind of module a file makes, and the one transformation a file may get on its way: a wrapped source map.

The game evaluates every text module as the body of a CommonJS function and hands a binary module's bytes to
``require`` as a buffer. So a text module must be JavaScript, or it throws a ``SyntaxError`` in game every tick:
any other text file (a ``.json``, ``.ts``, ``.md``) is refused by its name before it is uploaded. The kinds are
:func:`kind_of`'s docstring. Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Literal

#: Suffixes of text files that are JavaScript the game can evaluate (CommonJS).
JAVASCRIPT_SUFFIXES = (".js", ".cjs", ".mjs")
#: The suffix of a JavaScript source map.
SOURCE_MAP_SUFFIX = ".js.map"

Kind = Literal["javascript", "source map", "binary", "other"]


def kind_of(path: str, *, binary: bool, module_suffixes: tuple[str, ...] = ()) -> Kind:
    """The kind of module the file at ``path`` makes; ``binary`` says whether the branch's binary globs pick it,
    ``module_suffixes`` are the branch's ``naming.strip_suffixes`` (also JavaScript).

    * **JavaScript**: ``.js``, ``.cjs`` and ``.mjs`` files, and files ending with a suffix the branch lists in
      ``naming.strip_suffixes`` (that list says which suffixes name modules). Only the name is looked at: ES module
      syntax (``import``/``export``) in any of them still fails in game; bundle it to CommonJS first.
    * **source map**: a ``.js.map`` file. With ``source_maps: wrap`` (the default) it becomes module ``NAME.js.map``
      holding ``module.exports = <the map's JSON>;``, rollup-plugin-screeps' convention (it writes ``main.js.map.js``
      with that content, no newline at the end, and uploads it as module ``main.js.map``), which the screeps source-map
      helpers read with ``require('main.js.map')``. A ``.js.map`` file that already holds the wrapper is sent as it is.
      ``raw`` uploads the file as it is (the game cannot evaluate it), ``omit`` leaves it out.
    * **binary**: any file the branch's ``binary`` globs pick (``**/*.wasm`` by default).
    * **other**: any other file, refused.
    """
    if binary:
        return "binary"
    if path.endswith(SOURCE_MAP_SUFFIX):
        return "source map"
    if path.endswith(JAVASCRIPT_SUFFIXES + module_suffixes):
        return "javascript"
    return "other"


def wrap_source_map(text: str) -> str:
    """``module.exports = <map>;``, byte for byte as rollup-plugin-screeps uploads a source map (no newline after
    the ``;``). A file that already holds such a wrapper (``gitops pull`` writes one when the server's module is
    not exactly that form) is taken as it is, so that it reads back as the server's module.

    Raises ``ValueError`` (with a short reason) when ``text`` is not a JSON object: wrapped, it would not be a map.
    """
    if text.lstrip().startswith("module.exports") and unwrap_source_map(text) is not None:
        return text
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(value, dict):
        raise ValueError("is not a JSON object, so it is not a source map")
    return f"module.exports = {text.strip()};"


def unwrap_source_map(text: str) -> str | None:
    """The map's JSON inside ``module.exports = <map>;`` (the inverse of :func:`wrap_source_map`, for
    ``gitops pull``), or ``None`` when ``text`` is not such a wrapper around a JSON object."""
    prefix = "module.exports = "
    body = text.strip()
    if not (body.startswith(prefix) and body.endswith(";")):
        return None
    inner = body[len(prefix) : -1].strip()
    try:
        value = json.loads(inner)
    except json.JSONDecodeError:
        return None
    return inner if isinstance(value, dict) else None


def describe_kinds() -> str:
    """The kinds a matched file may be, for messages."""
    return (
        f"JavaScript ({', '.join(JAVASCRIPT_SUFFIXES)} or a suffix of naming.strip_suffixes), a source map "
        f"({SOURCE_MAP_SUFFIX}) or binary (picked by the branch's binary globs)"
    )
