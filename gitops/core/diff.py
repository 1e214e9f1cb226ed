"""The diff of one branch: which modules the repository adds, changes or removes on the server.

A :class:`BranchDiff` is a value; renderers and exit codes read it. Pure: no I/O.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from gitops.core.codeset import CodeSet, Module
from gitops.core.remote import ModuleFacts

ChangeKind = Literal["added", "changed", "removed", "kept"]

#: Lines of unified diff kept per module; the rest is summarised.
MAX_DIFF_LINES = 120
#: A line longer than this marks a minified/bundled file: show sizes and hashes, not the diff.
MINIFIED_LINE = 1000
#: Files bigger than this get no line diff either (difflib is quadratic in the worst case).
MAX_DIFF_BYTES = 512 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class ModuleChange:
    """One module that differs between the repository and the server (also a row of a saved plan).

    A plan of 2,000 modules makes 2,000 of these: a slots dataclass, made without validation (the values come from
    typed code sets); a saved plan's rows are validated when the plan file is read (``gitops.edges.planfile``)."""

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}

    name: str
    change: ChangeKind
    old_size: int | None
    new_size: int | None
    old_digest: str | None
    new_digest: str | None
    binary: bool
    diff: str | None = None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class BranchDiff:
    """Changes of one branch; ``kept`` lists server-only modules re-sent under ``remote_only: keep``; ``ignored``
    the text modules that differ from the server's only in lines that ``ignore_lines`` matches (not counted in
    ``unchanged``, nor in :attr:`has_changes`: whether they are sent depends on the other changes)."""

    added: tuple[ModuleChange, ...]
    changed: tuple[ModuleChange, ...]
    removed: tuple[ModuleChange, ...]
    kept: tuple[ModuleChange, ...]
    unchanged: int
    ignored: tuple[ModuleChange, ...] = ()

    @property
    def has_changes(self) -> bool:
        return bool(self.added or self.changed or self.removed)


def diff_branch(
    local: CodeSet,
    remote: Mapping[str, ModuleFacts] | None,
    *,
    remote_only: Literal["remove", "keep"] = "remove",
    max_diff_lines: int = MAX_DIFF_LINES,
    ignore_lines: Sequence[str] = (),
) -> BranchDiff:
    """Compare the repository's modules of a branch with the server's (``None``: the branch does not exist).

    ``ignore_lines`` (regular expressions matched against whole lines): a text module whose only differences from
    the server's are lines matching one of them is listed in ``ignored`` instead of ``changed``
    (:func:`differ_only_in`); one whose server content is not known (planned from the ledger) is changed."""
    remote = remote or {}
    patterns = [re.compile(p) for p in ignore_lines]
    added: list[ModuleChange] = []
    changed: list[ModuleChange] = []
    removed: list[ModuleChange] = []
    kept: list[ModuleChange] = []
    ignored: list[ModuleChange] = []
    unchanged = 0
    for module in local:
        old = remote.get(module.name)
        if old is None:
            added.append(_added(module))
        elif old.digest == module.digest:
            unchanged += 1
        elif (
            patterns
            and old.text is not None
            and module.text is not None
            and differ_only_in(old.text, module.text, patterns)
        ):
            ignored.append(_changed(old, module, max_diff_lines))
        else:
            changed.append(_changed(old, module, max_diff_lines))
    for name in sorted(set(remote) - set(local.modules)):
        old = remote[name]
        if remote_only == "keep":
            kept.append(
                ModuleChange(
                    name=name,
                    change="kept",
                    old_size=old.size,
                    new_size=old.size,
                    old_digest=old.digest,
                    new_digest=old.digest,
                    binary=old.is_binary,
                )
            )
        else:
            removed.append(
                ModuleChange(
                    name=name,
                    change="removed",
                    old_size=old.size,
                    new_size=None,
                    old_digest=old.digest,
                    new_digest=None,
                    binary=old.is_binary,
                )
            )
    return BranchDiff(tuple(added), tuple(changed), tuple(removed), tuple(kept), unchanged, tuple(ignored))


def differ_only_in(old: str, new: str, patterns: Sequence[re.Pattern[str]]) -> bool:
    """Whether ``old`` and ``new`` are the same text once every line that one of ``patterns`` matches whole
    (``re.fullmatch``; lines split at ``\n``) is left out of both: a build's time stamp, say. ``False`` without
    patterns. A line removed or added that matches is ignored too; any other difference, a line ending
    included, is not."""
    if not patterns:
        return False

    def kept(text: str) -> list[str]:
        return [line for line in text.split("\n") if not any(p.fullmatch(line) for p in patterns)]

    return kept(old) == kept(new)


def _added(module: Module) -> ModuleChange:
    return ModuleChange(
        name=module.name,
        change="added",
        old_size=None,
        new_size=module.size,
        old_digest=None,
        new_digest=module.digest,
        binary=module.binary is not None,
    )


def _changed(old: ModuleFacts, new: Module, max_lines: int) -> ModuleChange:
    diff, note = text_diff(old, new, max_lines)
    return ModuleChange(
        name=new.name,
        change="changed",
        old_size=old.size,
        new_size=new.size,
        old_digest=old.digest,
        new_digest=new.digest,
        binary=new.is_binary,
        diff=diff,
        note=note,
    )


def text_diff(old: ModuleFacts, new: Module, max_lines: int) -> tuple[str | None, str | None]:
    """A capped unified diff, or ``None`` and a note saying why there is none."""
    if old.is_binary or new.is_binary:
        return None, "binary module: sizes and hashes only"
    if old.text is None:
        return None, "the server's content was not downloaded (planned from the ledger): sizes and hashes only"
    assert new.text is not None
    small = whitespace_difference(old.text, new.text)
    if small is not None:
        return None, small
    if max(len(old.text), len(new.text)) > MAX_DIFF_BYTES:
        return None, f"large module: sizes and hashes only; {first_difference(old.text, new.text)}"
    if _looks_minified(old.text) or _looks_minified(new.text):
        return None, f"minified module (very long lines): sizes and hashes only; {first_difference(old.text, new.text)}"

    lines = list(
        difflib.unified_diff(
            old.text.splitlines(), new.text.splitlines(), "server/" + new.name, "repo/" + new.name, lineterm="", n=2
        )
    )
    if not lines:
        # The texts differ only where splitlines() cannot see: line endings or the final newline.
        return None, "only line endings or the final newline differ"
    if len(lines) > max_lines:
        cut = len(lines) - max_lines
        lines = [*lines[:max_lines], f"... {cut} more diff lines not shown"]
        return "\n".join(lines), f"diff cut at {max_lines} lines"
    return "\n".join(lines), None


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b`` (by halving: fast on megabytes)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def whitespace_difference(old: str, new: str) -> str | None:
    """A note when ``old`` (the server's) and ``new`` (the repository's) differ only in their line endings or in
    the whitespace at their end, saying exactly how (a size and two hashes would not show one newline)."""
    if old == new:
        return None
    if old.rstrip() == new.rstrip():
        body = len(old.rstrip())
        return (
            f"only the end differs: the server's ends with {old[body:]!r}, the repository's with {new[body:]!r} "
            "(a newline the build or an uploader adds or drops)"
        )
    if old.replace("\r\n", "\n") == new.replace("\r\n", "\n"):
        return "only line endings differ: CRLF on one side, LF on the other"
    return None


def first_difference(old: str, new: str) -> str:
    """Where ``old`` and ``new`` first differ: ``first difference at line 1, column 5,123``."""
    at = _common_prefix(old, new)
    line = old.count("\n", 0, at) + 1
    column = at - (old.rfind("\n", 0, at) + 1) + 1
    return f"first difference at line {line:,}, column {column:,}"


def _looks_minified(text: str) -> bool:
    if len(text) <= MINIFIED_LINE:
        return False
    return any(len(line) > MINIFIED_LINE for line in text.splitlines())
