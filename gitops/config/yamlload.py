"""The YAML files the tool reads (the manifest, the credentials file, the stand-in's accounts file), one way.

:func:`read_yaml` reads at most :data:`MAX_FILE_BYTES`, UTF-8, composes with :class:`UntrustedLoader` and builds
plain data with the line of every key path; each file then reports every problem through :class:`Problems`, as
``gitops.yaml:12: branches[0].include[1]: <what is wrong>; <how to fix>``.

Why stricter than ``yaml.safe_load``: these small files have no use for aliases, and a self-referencing or nested
one ("billion laughs") makes a structure without end or of exponential size, so anchors and aliases are refused
before anything is expanded (each reported at its line), and so is nesting deeper than :data:`MAX_DEPTH`. Values
are built one node at a time, so a value that does not fit its tag (``!!int x``, ``2024-13-45``) or a tag these
files do not use (``!!binary``, ``!!python/...``) is a problem at its line and key, not an exception from deep in
pyyaml; it is :data:`UNFIT` in the data, and :meth:`Problems.cover` keeps later checks from reporting it again. A
key written twice is a problem (YAML would silently keep the last).

No message here quotes a value: the credentials and accounts files hold secrets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple, cast

import yaml
from yaml.composer import ComposerError

# Re-exported: reading a file and naming key paths need no YAML, and live where a manifest cache hit can use them
# without importing pyyaml.
from gitops.config.reading import (
    MAX_FILE_BYTES,
    Loc,
    Unreadable,
    _named,
    counted,
    format_loc,
    line_of,
    read_capped,
    size_text,
)

#: Far deeper than any of the three files needs, far from Python's recursion limit.
MAX_DEPTH = 64

_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
_CORE = "tag:yaml.org,2002:"
#: The scalar tags whose values these files can hold, and how a message names each.
_SCALAR_TAGS = {
    f"{_CORE}null": "null",
    f"{_CORE}bool": "true or false",
    f"{_CORE}int": "a whole number",
    f"{_CORE}float": "a number",
    f"{_CORE}str": "a string",
    f"{_CORE}timestamp": "a date or timestamp",
}


class _Unfit:
    """What the data holds in place of a value that could not be read (reported once, where it was)."""

    def __repr__(self) -> str:
        return "<unreadable value>"


#: In the data where a value did not fit its tag: not ``None``, so that "is it given?" checks see a value there.
UNFIT: Any = _Unfit()


class Refused(NamedTuple):
    """An anchor (``&name``) or alias (``*name``) found while composing; ``line`` and ``column`` count from 1."""

    kind: Literal["anchor", "alias"]
    name: str
    line: int
    column: int


class UntrustedLoader(yaml.SafeLoader):
    """A ``yaml.SafeLoader`` that composes no anchor, no alias and no deep nesting; read :attr:`refused` after
    composing."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.refused: list[Refused] = []
        self._depth = 0

    def _refuse(self, event: yaml.NodeEvent, kind: Literal["anchor", "alias"]) -> None:
        mark = event.start_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        self.refused.append(Refused(kind, str(event.anchor), line, column))

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            alias: yaml.AliasEvent = self.get_event()  # type: ignore[no-untyped-call]
            self._refuse(alias, "alias")
            # A null in its place: the anchored value is never copied, however often or deeply it is named.
            mark = cast("yaml.Mark | None", alias.start_mark)
            return yaml.ScalarNode("tag:yaml.org,2002:null", "", mark, mark)
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.NodeEvent) and event.anchor is not None:
            self._refuse(event, "anchor")
            event.anchor = None  # not registered, so a later alias to it cannot reach it either
        if self._depth >= MAX_DEPTH:
            raise ComposerError(
                None,
                None,
                f"found values nested more than {MAX_DEPTH} levels deep",
                cast("yaml.Mark", event.start_mark),
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


# --- key paths and problems ------------------------------------------------------------------------------------


class Problems:
    """Every problem of one file, each as ``file:line: key: problem`` (``key: problem`` without a file).

    :meth:`texts` sorts them by line (in the order found within a line) and drops repeats; a problem at or under a
    key path passed to :meth:`cover` is dropped too (its value was left out, and one problem says why).
    """

    def __init__(self, display: str | None, locations: Mapping[Loc, int]) -> None:
        self.display = display
        self.locations = locations
        self._found: list[tuple[Loc, str, int | None]] = []
        self._covering: set[int] = set()  # indexes of the problems that cover their key path
        self._covered: set[Loc] = set()

    def add(self, loc: Loc, message: str, line: int | None = None) -> None:
        """One problem at ``loc`` (on ``line``, or the line of ``loc``); ``message`` says what is wrong and the fix."""
        self._found.append((loc, message, line))

    def extend(self, found: Iterable[tuple[Loc, str]]) -> None:
        for loc, message in found:
            self.add(loc, message)

    def cover(self, found: Iterable[Found]) -> None:
        """Problems that stand for everything at and under their key path: later problems there are not reported."""
        for item in found:
            if item.covers:
                self._covering.add(len(self._found))
                self._covered.add(_named(item.loc))
            self.add(item.loc, item.message, item.line)

    def texts(self) -> list[str]:
        """The problems as lines of text, sorted by line."""
        lines: list[tuple[int, int, str]] = []
        seen: set[str] = set()
        for n, (loc, message, at) in enumerate(self._found):
            if n not in self._covering and self._covered:
                named = _named(loc)
                if any(named[:end] in self._covered for end in range(len(named) + 1)):
                    continue
            line = line_of(self.locations, loc) if at is None else at
            text = f"{format_loc(loc)}: {message}"
            if self.display is not None:
                text = f"{self.display}:{line}: {text}"
            if text not in seen:
                seen.add(text)
                lines.append((line, n, text))
        return [text for _, _, text in sorted(lines)]

    def __bool__(self) -> bool:
        return bool(self._found)


class Found(NamedTuple):
    """A problem found while building the data: its key path, the message, and its line where that is not the
    key path's (a key that could not be read)."""

    loc: Loc
    message: str
    line: int | None = None
    #: Whether the value at ``loc`` was left out, so that later problems at and under it are not reported.
    covers: bool = True


# --- reading a file ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Document:
    """A YAML file as plain data (``None`` for an empty file), the line of every key path, and the problems found
    while building it (pass them to :meth:`Problems.cover`)."""

    data: Any
    locations: dict[Loc, int]
    problems: list[Found]


#: What YAML allows in a stream (YAML 1.1's printable set, as pyyaml's reader checks it): anything else, even in a
#: comment, makes pyyaml refuse the whole file.
_NOT_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _unprintable(text: str, display: str) -> list[str]:
    """A problem for the first character YAML does not allow, at its line and column."""
    hit = _NOT_PRINTABLE.search(text)
    if hit is None:
        return []
    line = text.count("\n", 0, hit.start()) + 1
    column = hit.start() - (text.rfind("\n", 0, hit.start()) + 1) + 1
    return [
        f"{display}:{line}:{column}: the control character U+{ord(hit.group()):04X} is not allowed in YAML (not even "
        'in a comment); remove it, or write it as an escape such as "\\u0001" inside double quotes'
    ]


def decode(raw: bytes, display: str) -> str:
    """UTF-8 text (a byte-order mark is dropped); :class:`Unreadable` names the first byte that is not."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        byte = raw[exc.start]
        raise Unreadable(
            [f"{display}:{line}: not UTF-8 (byte 0x{byte:02x} at offset {exc.start}); save the file as UTF-8"]
        ) from None


def read_yaml(path: Path, display: str, *, what: str, limit: int = MAX_FILE_BYTES) -> Document:
    """Read, decode and parse ``path``: :func:`read_capped`, :func:`decode`, :func:`parse`.

    ``what`` names the kind of file in messages ("a manifest"). ``OSError`` passes through (each file words a
    missing file its own way); every other problem is :class:`Unreadable`.
    """
    return parse(decode(read_capped(path, display, limit=limit, what=what), display), display, what=what)


def parse(text: str, display: str, *, what: str) -> Document:
    """The data of a YAML document with the line of every key path; :class:`Unreadable` for what stops reading."""
    problems = _unprintable(text, display)
    if problems:
        raise Unreadable(problems)
    try:
        loader = UntrustedLoader(text)
    except yaml.YAMLError as exc:  # pragma: no cover - the printable check above runs first; kept as a guard
        raise Unreadable([f"{display}:1: not valid YAML ({type(exc).__name__})"]) from None
    try:
        try:
            node = loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            raise Unreadable([_yaml_error_text(display, exc, what)]) from None
        except yaml.YAMLError as exc:  # pragma: no cover - pyyaml marks its errors; kept as a guard
            raise Unreadable([f"{display}:1: not valid YAML ({type(exc).__name__})"]) from None
        refused = [_refused_text(display, r) for r in loader.refused]
        if node is not None:
            refused += _lone_surrogates(display, node)
        if refused:
            raise Unreadable(refused)
        if node is None:
            return Document(None, {(): 1}, [])
        builder = _Builder(loader)
        data = builder.build(node, ())
        return Document(data, builder.locations, builder.problems)
    finally:
        loader.dispose()


def _refused_text(display: str, refused: Refused) -> str:
    where = f"{display}:{refused.line}:{refused.column}"
    if refused.kind == "alias":
        return f"{where}: YAML aliases are not supported in {display}; write the value out"
    return (
        f"{where}: YAML anchors are not supported in {display}; remove '&{refused.name}' and write the value out "
        "where it is needed"
    )


def _lone_surrogates(display: str, root: yaml.Node) -> list[str]:
    """Scalars holding an escape such as ``"\\udce9"``: not a character, so no name or path can hold it."""
    found: list[str] = []
    stack = [root]
    while stack:  # a tree: composing refused every alias
        node = stack.pop()
        if isinstance(node, yaml.ScalarNode):
            hit = _LONE_SURROGATE.search(node.value)
            if hit is not None:
                mark = node.start_mark
                found.append(
                    f"{display}:{mark.line + 1}:{mark.column + 1}: the escape {hit.group()!r} is a lone surrogate, "
                    "not a character; write the text itself"
                )
        elif isinstance(node, yaml.MappingNode):
            stack += [part for pair in reversed(node.value) for part in reversed(pair)]
        elif isinstance(node, yaml.SequenceNode):
            stack += reversed(node.value)
    return found


def _yaml_error_text(display: str, exc: yaml.MarkedYAMLError, what: str) -> str:
    # Only pyyaml's problem and context, never str(exc): that quotes the line, which may hold a secret.
    mark = exc.problem_mark or exc.context_mark
    where = f"{display}:{mark.line + 1}:{mark.column + 1}" if mark is not None else f"{display}:1"
    problem = exc.problem or exc.context or "unreadable YAML"
    if exc.context and exc.problem:
        problem = f"{exc.problem} ({exc.context})"
    if "\\t" in problem:
        return f"{where}: not valid YAML: {problem}; indent with spaces, not tabs"
    if problem.endswith("levels deep"):  # UntrustedLoader: valid YAML, but no such file is nested like that
        return f"{where}: {problem}; {what} needs only a few levels"
    return (
        f"{where}: not valid YAML: {problem}; check the indentation, and quote values that contain ': ' or start "
        "with '*', '&', '!' or '{'"
    )


def _tag_text(tag: str) -> str:
    """``!!int``, ``!custom``: how the file spells a tag (shortened, and escaped, since it is the file's text)."""
    short = "!!" + tag[len(_CORE) :] if tag.startswith(_CORE) else tag
    if len(short) > 40:
        short = short[:37] + "..."
    return json.dumps(short, ensure_ascii=True)[1:-1]


class _Builder:
    """Plain data from composed nodes, one node at a time, with the line of every key path."""

    def __init__(self, loader: yaml.SafeLoader) -> None:
        self.loader = loader
        self.locations: dict[Loc, int] = {}
        self.problems: list[Found] = []

    def build(self, node: yaml.Node, loc: Loc) -> Any:
        self.locations.setdefault(loc, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            if node.tag != f"{_CORE}map":
                return self._unsupported(node, loc, "a mapping")
            return self._mapping(node, loc)
        if isinstance(node, yaml.SequenceNode):
            if node.tag != f"{_CORE}seq":
                return self._unsupported(node, loc, "a list")
            out: list[Any] = []
            for i, item in enumerate(node.value):
                self.locations[(*loc, i)] = item.start_mark.line + 1
                out.append(self.build(item, (*loc, i)))
            return out
        return self._scalar(cast("yaml.ScalarNode", node), loc)

    def _mapping(self, node: yaml.MappingNode, loc: Loc) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        first_line: dict[Any, int] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                self.problems.append(
                    Found(loc, "a key is a list or mapping; write a plain name as the key", line, False)
                )
                continue
            if key_node.tag == f"{_CORE}merge":
                self.problems.append(
                    Found(loc, "'<<' (a YAML merge key) is not supported; write the keys out", line, False)
                )
                continue
            key = self._scalar(key_node, loc, line)
            if key is UNFIT:
                continue  # its tag did not fit: reported
            # The data keeps the key as it is (each file says which keys it takes); its path names it as text.
            named: str | int = key if isinstance(key, str | int) else str(key)
            sub = (*loc, named)
            if named in first_line:
                again = f"appears twice (also on line {first_line[named]}), and YAML keeps only the last; keep one"
                self.problems.append(Found(sub, again, None, False))
            else:
                first_line[named] = line
            self.locations[sub] = line
            out[key] = self.build(value_node, sub)
        return out

    def _scalar(self, node: yaml.ScalarNode, loc: Loc, key_line: int | None = None) -> Any:
        """The value of ``node``, or :data:`UNFIT` and a problem (``key_line``: the node is the key on that line)."""
        tag = node.tag
        if tag == f"{_CORE}value":  # a plain '=': pyyaml's "value" key, a string here
            return node.value
        name = _SCALAR_TAGS.get(tag)
        if name is None:
            return self._unsupported(node, loc, "a key" if key_line else "a value", key_line)
        try:
            return self.loader.construct_object(node, deep=True)
        except Exception:  # pyyaml raises anything from ValueError to TypeError for a misfit
            what = "a key" if key_line else "the value"
            implicit = (
                node.style is None
                and self.loader.resolve(  # type: ignore[no-untyped-call]
                    yaml.ScalarNode, node.value, (True, False)
                )
                == tag
            )
            if implicit:  # 2024-13-45, or a whole number of thousands of digits
                message = f"{what} reads as {name} but is not a valid one; quote it if it is text"
            else:
                message = (
                    f"{what} is not {name}, as its tag {_tag_text(tag)} says; write {name}, or remove the tag (and "
                    "quote the value if it is text)"
                )
            self.problems.append(Found(loc, message, key_line, key_line is None))
            return UNFIT

    def _unsupported(self, node: yaml.Node, loc: Loc, shape: str, line: int | None = None) -> Any:
        self.problems.append(
            Found(
                loc,
                f"the YAML tag {_tag_text(node.tag)} on {shape} is not supported; remove the tag (and quote the value "
                "if it is text)",
                line,
                line is None,
            )
        )
        return UNFIT


__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "UNFIT",
    "Document",
    "Found",
    "Loc",
    "Problems",
    "Refused",
    "Unreadable",
    "UntrustedLoader",
    "counted",
    "decode",
    "format_loc",
    "line_of",
    "parse",
    "read_capped",
    "read_yaml",
    "size_text",
]
