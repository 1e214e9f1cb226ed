"""A detected layout widened to read back what a server holds: the half of ``gitops init --pull`` after detection.

:func:`gitops.core.layoutdetect.detect_layout` proposes a manifest from the repository alone. When ``init --pull`` then
finds modules on the server that this manifest would not read back as themselves (source maps, binary modules,
names holding ``/``), the first plan after the pull would delete or rename them; :func:`widen_for` adds what it takes
to read them back, and says each change. It lives apart from detection because it needs the glob library (to
escape a file name into a glob), which plain ``gitops init`` never loads.
"""

from __future__ import annotations

from dataclasses import replace

from wcmatch import glob as wcglob

from gitops.core.layout import Layout
from gitops.core.modulekinds import SOURCE_MAP_SUFFIX, unwrap_source_map


def _glob_for(path: str) -> str:
    """A glob that matches the file ``path`` exactly (its special characters escaped)."""
    return str(wcglob.escape(path))


def widen_for(layout: Layout, modules: list[tuple[str, bool, str | None]]) -> Layout:
    """``layout`` with what it needs to read back ``modules`` (name, binary, text) that a pull would not write yet:
    ``/`` as separator for names holding one; ``**/*.js.map`` for source maps (``raw`` when the server's maps are
    plain JSON, not the ``module.exports = <map>;`` wrapper); for binary modules their suffix's glob
    (``**/*.bin``), or the exact file for one without a suffix (``addTwo``), in both ``include`` and ``binary``.
    Each change is said in ``seen``."""
    include = list(layout.include)
    binary = list(layout.binary)
    seen = list(layout.seen)
    separator = layout.separator
    source_maps = layout.source_maps
    if separator != "/" and any("/" in name for name, _, _ in modules):
        separator = "/"
        seen.append("the server's module names hold '/': the separator is '/'")
    for name, is_binary, text in modules:
        if is_binary:
            stem, dot, suffix = name.rpartition(".")
            glob = f"**/*.{suffix}" if dot and stem and "/" not in suffix else _glob_for(name)
            for globs in (include, binary):
                if glob not in globs:
                    globs.append(glob)
            seen.append(f"binary module {name!r} on the server: {glob} is included as binary")
        elif name.endswith(SOURCE_MAP_SUFFIX):
            if "**/*.js.map" not in include:
                include.append("**/*.js.map")
                seen.append(f"source map {name!r} on the server: **/*.js.map is included")
            if text is not None and unwrap_source_map(text) is None and source_maps is None:
                source_maps = "raw"
                seen.append(f"{name!r} is a plain map on the server, not wrapped: source_maps is raw")
    return replace(
        layout,
        include=tuple(include),
        binary=tuple(binary),
        separator=separator,
        source_maps=source_maps,
        seen=tuple(dict.fromkeys(seen)),
    )
