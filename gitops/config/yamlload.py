"""YAML for the files a pull request can change: the manifest, the stand-in's accounts file.

An alias repeats a value in several places. A self-referencing one (``servers: &a {x: *a}``) makes a structure
without end, and nested ones ("billion laughs") one that grows exponentially as it is walked. These small files
have no use for either, so :class:`UntrustedLoader` refuses both while composing, before anything is expanded: an
alias is replaced by ``null`` and an anchor is not registered, and :attr:`UntrustedLoader.refused` says where each
one was, so that every one of them can be reported at once. Nesting deeper than :data:`MAX_DEPTH` levels is a
``yaml.MarkedYAMLError`` (composing recurses, and ``[[[[...`` would otherwise end in a ``RecursionError``).
"""

from __future__ import annotations

from typing import Literal, NamedTuple, cast

import yaml
from yaml.composer import ComposerError

#: Far deeper than any manifest or accounts file needs, far from Python's recursion limit.
MAX_DEPTH = 64


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


__all__ = ["MAX_DEPTH", "Refused", "UntrustedLoader"]
