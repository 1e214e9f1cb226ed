"""What a bot's own console output says (pure): the errors it caught and logged, and its lines in a comparable form.

Real bots catch their own errors (a ``try``/``catch`` per room or creep that logs the error and its stack with
``console.log``), so the server never sees them: an uncaught-error judge calls such a bot healthy while it throws
every tick. :func:`caught_errors` reads them back from the log lines: an entry with a stack frame of the bot's
(``    at run (role.harvester:12:5)``) or an ``Error:``/``TypeError:``/... line is a caught error, placed at the
bot's file and line (through its source map when it uploaded one). :func:`log_patterns` reduces the lines to
patterns (numbers and ids replaced), so that a head's new lines can be told from a tick counter's.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gitops.core.health import Tick
from gitops.core.sourcemap import SourceMap, map_name

#: One frame's place in a stack line: ``at f (main:12:5)``, ``at main:12:5``, ``at loop (src/main.ts:12:5)``.
FRAME = re.compile(r"^\s*at (?:.*? \()?(?P<file>[^\s()]+?):(?P<line>\d+)(?::(?P<column>\d+))?\)?\s*$")
#: An error's own line: ``Error: x``, ``TypeError: x``, ``Uncaught ReferenceError: x`` (what ``String(e)`` and
#: ``e.stack`` begin with), anywhere in a line (bots prefix it: ``[W1N1] TypeError: ...``).
ERROR_LINE = re.compile(r"\b(?:[A-Z][A-Za-z]*)?Error: .*")
#: Places that are the game's runtime, never the bot's.
RUNTIME = ("<", "@screeps", "node_modules", "__mainLoop", "evalmachine", "internal/")
#: How many distinct patterns a summary keeps.
MAX_PATTERNS = 10
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
#: Game object ids (hex, 15 or 24 characters in the npm server and the official ones) and other hex runs.
_ID = re.compile(r"\b[0-9a-f]{8,}\b")
_SOURCE_FILE = re.compile(r"\.(?:[cm]?[jt]s|rs|wasm)$")


@dataclass(frozen=True, slots=True)
class Caught:
    """One caught error in one tick: its line and where in the bot's code it came from."""

    message: str
    where: str | None


def place(error: str, modules: Iterable[str], maps: Mapping[str, SourceMap] | None = None) -> str | None:
    """``file:line`` of the top stack frame in the bot's own code (one of its ``modules``, or a source file a
    source map names), or ``None`` when the stack has none. A frame in a module whose source map is in ``maps``
    (by the map's module name, ``main.js.map``) is given as the source's file and line (``src/main.ts:7``)."""
    names = set(modules)
    for line in html.unescape(error).splitlines()[1:] if not _is_frame(error) else html.unescape(error).splitlines():
        match = FRAME.match(line)
        if match is None:
            continue
        where, number = match.group("file"), int(match.group("line"))
        if where in names:
            source_map = (maps or {}).get(map_name(where))
            column = match.group("column")
            found = source_map.lookup(number, int(column) if column else None) if source_map is not None else None
            return f"{found[0]}:{found[1]}" if found is not None else f"{where}:{number}"
        if not where.startswith(RUNTIME) and _SOURCE_FILE.search(where):
            return f"{where}:{number}"
    return None


def _is_frame(text: str) -> bool:
    first = text.lstrip("\n").split("\n", 1)[0]
    return FRAME.match(html.unescape(first)) is not None


def caught_in(entry: str, modules: Sequence[str], maps: Mapping[str, SourceMap] | None = None) -> Caught | None:
    """The caught error one log entry reports, or ``None``: an entry with an error line, or with a stack frame of
    the bot's own code (a stack logged on its own), is one."""
    text = html.unescape(entry)
    error = ERROR_LINE.search(text)
    where = place(text[error.start() :] if error else text, modules, maps)
    if error is None and where is None:
        return None
    if error is not None:
        message = error.group(0).strip()
    else:
        message = next((line.strip() for line in text.splitlines() if line.strip()), "(a stack trace)")
    return Caught(message[:300], where)


def caught_errors(
    ticks: Sequence[Tick], modules: Sequence[str], maps: Mapping[str, SourceMap] | None = None
) -> list[frozenset[Caught]]:
    """Per tick, the distinct caught errors its log lines report (a stack logged line by line counts once, with
    the error line before it)."""
    found: list[frozenset[Caught]] = []
    for tick in ticks:
        seen: set[Caught] = set()
        pending: Caught | None = None
        for entry in tick.log:
            one = caught_in(entry, modules, maps)
            if one is None:
                continue
            if one.message.startswith("at ") and pending is not None and pending.where is None:
                seen.discard(pending)  # the stack of the error line just before it
                one = Caught(pending.message, one.where)
            seen.add(one)
            pending = one
        found.append(frozenset(seen))
    return found


def normalise(line: str) -> str:
    """A line as a pattern: ids and numbers replaced (``tick 1234: creep 5e3f... moved`` -> ``tick N: creep ID
    moved``), so that counters and ids do not make every line new."""
    return _NUMBER.sub("N", _ID.sub("ID", html.unescape(line).strip()))[:200]


def log_patterns(ticks: Sequence[Tick]) -> dict[str, int]:
    """Each log line's pattern (stack frames left out) and on how many ticks it was logged."""
    counts: dict[str, int] = {}
    for tick in ticks:
        lines = {line for entry in tick.log for line in entry.splitlines() if line.strip()}
        # A stack's frames are the caught error's, reported as such: the diff is of what the bot says.
        for pattern in {normalise(line) for line in lines if not FRAME.match(html.unescape(line))}:
            counts[pattern] = counts.get(pattern, 0) + 1
    return counts


def new_patterns(head: Mapping[str, int], base: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """The head's patterns the base never logged, most ticks first (at most :data:`MAX_PATTERNS`)."""
    new = [(pattern, count) for pattern, count in head.items() if pattern not in base]
    return tuple(sorted(new, key=lambda item: (-item[1], item[0]))[:MAX_PATTERNS])


__all__ = [
    "FRAME",
    "RUNTIME",
    "Caught",
    "caught_errors",
    "caught_in",
    "log_patterns",
    "new_patterns",
    "normalise",
    "place",
]
