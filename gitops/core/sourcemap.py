"""A small source-map reader (pure): the source file and line of a place in a bundle (``main:3254:12``).

A TypeScript bot is uploaded as a bundle (``main``) with its source map beside it (module ``main.js.map``, the
map's JSON wrapped as ``module.exports = {...};``, rollup-plugin-screeps' convention). A rehearsal's stack frames
name the bundle's lines; this turns them into ``src/main.ts:7``. Only version 3 maps' ``mappings`` are read (Base64
VLQ, https://sourcemaps.info/spec.html): generated line and column to source index and source line. No package on
PyPI that reads them is both kept and small, and the decoder is thirty lines, tested against maps the TypeScript
compiler wrote.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass

from gitops.core.modulekinds import SOURCE_MAP_SUFFIX, unwrap_source_map

_BASE64 = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}


class SourceMapError(ValueError):
    """Not a source map this reader understands."""


def decode_vlq(segment: str) -> list[int]:
    """The numbers of one Base64 VLQ segment (``AAAA`` -> ``[0, 0, 0, 0]``, ``gB`` -> ``[16]``)."""
    values: list[int] = []
    value = shift = 0
    for char in segment:
        digit = _BASE64.get(char)
        if digit is None:
            raise SourceMapError(f"{char!r} is not a Base64 digit")
        value += (digit & 31) << shift
        if digit & 32:
            shift += 5
            continue
        values.append(-(value >> 1) if value & 1 else value >> 1)
        value = shift = 0
    if shift:
        raise SourceMapError("a VLQ number is cut off")
    return values


@dataclass(frozen=True, slots=True)
class SourceMap:
    """Per generated line (0-based), its segments as (column, source index, source line), columns ascending."""

    sources: tuple[str, ...]
    lines: tuple[tuple[tuple[int, int, int], ...], ...]

    @classmethod
    def parse(cls, text: str) -> SourceMap:
        """A map from its JSON text, or from a module holding ``module.exports = <map>;``."""
        inner = unwrap_source_map(text)
        try:
            data = json.loads(inner if inner is not None else text)
        except json.JSONDecodeError as exc:
            raise SourceMapError(f"not JSON ({exc.msg})") from None
        if not isinstance(data, dict) or not isinstance(data.get("mappings"), str):
            raise SourceMapError("no mappings")
        root = data.get("sourceRoot") or ""
        sources = tuple(
            _clean(f"{root.rstrip('/')}/{_clean(str(s))}" if root else str(s)) for s in data.get("sources") or []
        )
        source = original = 0
        lines: list[tuple[tuple[int, int, int], ...]] = []
        for line in data["mappings"].split(";"):
            column = 0
            segments: list[tuple[int, int, int]] = []
            for raw in line.split(","):
                if not raw:
                    continue
                numbers = decode_vlq(raw)
                column += numbers[0]
                if len(numbers) >= 4:
                    source += numbers[1]
                    original += numbers[2]
                    segments.append((column, source, original))
            segments.sort()
            lines.append(tuple(segments))
        return cls(sources, tuple(lines))

    def lookup(self, line: int, column: int | None = None) -> tuple[str, int] | None:
        """The source file and line (1-based) of the bundle's ``line`` and ``column`` (1-based, as a stack frame
        prints them; no column: the line's first mapped place), or ``None`` where the map says nothing."""
        if not 1 <= line <= len(self.lines) or not self.lines[line - 1]:
            return None
        segments = self.lines[line - 1]
        index = 0 if column is None else max(0, bisect.bisect_right(segments, (column - 1, 1 << 30, 1 << 30)) - 1)
        _, source, original = segments[index]
        if not 0 <= source < len(self.sources):
            return None
        return self.sources[source], original + 1


def _clean(path: str) -> str:
    """``webpack:///./src/main.ts`` and ``../src/main.ts`` (a map beside ``dist/main.js``) -> ``src/main.ts``."""
    for prefix in ("webpack:///", "webpack://", "file://"):
        path = path.removeprefix(prefix)
    parts = [p for p in path.split("/") if p not in ("", ".", "..")]
    return "/".join(parts) or path


def map_name(module: str) -> str:
    """The module that holds ``module``'s source map (``main`` -> ``main.js.map``)."""
    return module + SOURCE_MAP_SUFFIX


__all__ = ["SourceMap", "SourceMapError", "decode_vlq", "map_name"]
