"""The naming rule in reverse: which file under a branch's root holds a module (``gitops pull``). Pure.

:func:`gitops.core.local.module_name` turns a file's path into a module name; :func:`module_path` turns a module
name back into the path that :func:`~gitops.core.local.module_name` reads as that name:

* the separator: with ``/`` a name's folders are folders (``role/harvester`` -> ``role/harvester.js``); with ``.``
  files stay flat, as the tutorial keeps them (``role.harvester`` -> ``role.harvester.js``), since the dots of a
  file name survive the forward rule and no folder is needed;
* text modules get the first of ``naming.strip_suffixes`` that reads back as the name (``.js``); binary modules
  keep their name, suffix and all (``lib/add.wasm``).

The server's names are hostile input: :func:`unsafe_name_reason` refuses every name that could leave the root or
reach Git's folder (``..``, absolute, ``\\``, empty parts, control characters, ``.git``), before any path is made.
A name that is safe but that no file maps back to (a ``/`` in a name of a ``.``-separated branch) raises
:class:`Unmappable`.
"""

from __future__ import annotations

import re

from gitops.config.manifest import Naming
from gitops.core.local import in_git_folder, module_name

#: Longest file or folder name most file systems accept, in bytes.
MAX_PART_BYTES = 255
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Unmappable(ValueError):
    """No file under the root maps to this module name with the branch's naming. The text completes
    "module 'x' ..."."""


def unsafe_name_reason(name: str) -> str | None:
    """Why a module name must never become a path (it could leave the root or name Git's folder), or ``None``.

    The text completes "module 'x' ...".
    """
    if not name:
        return "has an empty name"
    if _CONTROL.search(name):
        return "has a control character in its name"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "has a name that is not valid Unicode (a lone surrogate)"
    if "\\" in name:
        return "has '\\' in its name, a folder separator on Windows"
    if name.startswith("/") or re.match(r"[A-Za-z]:", name):
        return "has an absolute name"
    parts = name.split("/")
    if ".." in parts:
        return "has '..' in its name, which would lead out of the root"
    if "." in parts or "" in parts:
        return "has an empty or '.' part between its '/'"
    if in_git_folder(name):
        return "names .git, Git's own folder"
    return None


def candidate_paths(name: str, *, binary: bool, naming: Naming) -> list[str]:
    """Every path under the root (``/`` separators) that the naming rule reads as module ``name``, best first:
    for a text module the name with each of ``naming.strip_suffixes`` in the order listed, then the name as it
    is; for a binary module the name as it is first.

    Which of them the rule accepts is asked of :func:`~gitops.core.local.module_name` itself, so the inverse
    follows the forward rule wherever it goes (with ``.wasm`` in ``strip_suffixes``, binary module ``mybot_bg``
    also comes from ``mybot_bg.wasm``, which the caller prefers when the binary globs pick it).
    Raises :class:`ValueError` (with :func:`unsafe_name_reason`'s text) for a hostile name, and
    :class:`Unmappable` when no path maps back to ``name``.
    """
    reason = unsafe_name_reason(name)
    if reason is not None:
        raise ValueError(reason)
    if naming.separator != "/" and "/" in name:
        raise Unmappable(
            f"has '/' in its name, but the branch's naming.separator is {naming.separator!r}, so no file maps to it"
        )
    suffixed = [name + suffix for suffix in naming.strip_suffixes]
    # A text module is a file with a module suffix (main.js); a binary one is best its name as it is
    # (lib/add.wasm), else with a suffix that strip_suffixes takes off (mybot_bg.wasm for module mybot_bg).
    tried = [name, *suffixed] if binary else [*suffixed, name]
    found = [path for path in dict.fromkeys(tried) if module_name(path, binary=binary, naming=naming) == name]
    if not found:
        raise Unmappable(f"would be read back from {tried[0]} as another module, whichever suffix it gets")
    fitting = [p for p in found if all(len(part.encode("utf-8")) <= MAX_PART_BYTES for part in p.split("/"))]
    if not fitting:
        raise Unmappable(f"has a part longer than a file name may be ({MAX_PART_BYTES} bytes)")
    return fitting


def module_path(name: str, *, binary: bool, naming: Naming) -> str:
    """The best of :func:`candidate_paths`: the file that holds module ``name`` when nothing else decides."""
    return candidate_paths(name, binary=binary, naming=naming)[0]
