"""The pull request comment's sections: the plan and the rehearsal, written by different jobs into one comment.

The plan workflow's job writes the ``plan`` section and the rehearsal workflow's comment job the ``rehearsal``
section, often at the same moment. Each section sits between hidden markers of its own, and each writer changes only
its own, in a read-modify-write (:func:`upsert_sections`):

1. find our comment (its first line is the manifest's marker, and the token's own identity wrote it) and read it;
2. put our sections in, keeping every other section as read;
3. read the comment again just before writing: when it changed since step 1 (another writer was quicker), start over
   from step 1 with what it wrote;
4. write, then read it back, and when another writer's section is in the comment read it again :data:`SETTLE`
   seconds later: when our section is not what we wrote (a writer that had read the comment before our write
   wrote after it), start over.

GitHub's REST API has no conditional write (``If-Match`` is not honoured on a comment's ``PATCH``; only reads are
conditional), so no client alone can make a read-modify-write atomic: the check in step 3 narrows the window in which
two writers can meet to the time between that read and the write landing, and step 4 lets the writer whose section
was lost in that window see it and write again (it is lost for good only when the other's write takes longer than
:data:`SETTLE` seconds to land). The example workflows close the rest: the two jobs that write the comment share one
concurrency group (``screeps-comment-<pull request>``), so GitHub does not run them at once (docs/github-action.md,
"One comment, two jobs").

Two writers that find no comment both create one: the second of ours is then merged into the first and deleted.
Pure parsing and composing, and the loop over a :class:`~gitops.github.api.GitHubClient`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from typing import Literal

from gitops.github.api import Comment, GitHubClient, GitHubError

#: The sections, in the order the comment shows them.
SECTIONS = ("plan", "rehearsal")
#: Attempts of the read-modify-write before giving up (a warning, as every failure to comment).
ATTEMPTS = 6
#: Seconds after a write before the last check of our sections, when another writer's section is in the comment.
SETTLE = 3.0
_PREFIX = "<!-- screeps-gitops section "


class SectionConflict(GitHubError):
    """Other writers kept changing the comment during every attempt (a warning, as every failure to comment)."""


def _start(name: str) -> str:
    return f"{_PREFIX}{name} -->"


def _end(name: str) -> str:
    return f"{_PREFIX}end {name} -->"


def _inert(content: str) -> str:
    """The content with no line that reads as a section marker: such a line (from a name in the plan, say) gets a
    leading space, which the parser does not take for a marker and Markdown shows the same."""
    lines = content.split("\n")
    return "\n".join(" " + line if line.startswith(_PREFIX) else line for line in lines)


def parse(body: str, mark: str) -> dict[str, str]:
    """The sections of a comment body that starts with ``mark``. A comment written before sections existed (the
    marker, then the plan) reads as its ``plan`` section; a section whose end marker is missing is dropped."""
    rest = body[len(mark) :].lstrip("\n") if body.startswith(mark) else body
    lines = rest.split("\n")
    if not any(line.startswith(_PREFIX) for line in lines):
        return {"plan": rest.rstrip("\n")} if rest.strip() else {}
    found: dict[str, str] = {}
    current: str | None = None
    held: list[str] = []
    for line in lines:
        if current is None:
            name = next((n for n in SECTIONS if line == _start(n)), None)
            if name is not None:
                current, held = name, []
        elif line == _end(current):
            found[current] = "\n".join(held)
            current = None
        else:
            held.append(line)
    return found


def compose(mark: str, sections: Mapping[str, str]) -> str:
    """The comment body: the marker, then each section between its markers, in :data:`SECTIONS` order."""
    parts = [mark]
    for name in SECTIONS:
        if name in sections:
            parts += [_start(name), sections[name].rstrip("\n"), _end(name)]
    return "\n".join(parts) + "\n"


def upsert_sections(
    gh: GitHubClient,
    number: int,
    mark: str,
    sections: Mapping[str, str],
    *,
    pause: Callable[[float], None] = time.sleep,
) -> tuple[Comment, Literal["created", "updated", "unchanged"]]:
    """Put ``sections`` into our comment on pull request ``number`` (found by ``mark``), keeping the other
    sections; create the comment when there is none. :class:`SectionConflict` after :data:`ATTEMPTS` attempts."""
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        raise ValueError(f"unknown comment sections: {sorted(unknown)}")
    ours = {name: _inert(text).rstrip("\n") for name, text in sections.items()}
    for attempt in range(ATTEMPTS):
        if attempt:
            pause(random.uniform(0.5, 1.5) * min(8.0, 2.0 ** (attempt - 1)))
        existing = gh.find_comment(number, mark)
        if existing is None:
            created = gh.create_comment(number, compose(mark, ours))
            first = gh.find_comment(number, mark)
            if first is None or first.id == created.id:
                return created, "created"
            gh.delete_comment(created.id)  # another writer created one first: ours goes into it
            continue
        kept = parse(existing.body, mark)
        if all(kept.get(name) == text for name, text in ours.items()):
            return existing, "unchanged"
        body = compose(mark, {**kept, **ours})
        if gh.get_comment(existing.id).body != existing.body:
            continue  # changed since it was read: merge with what the other writer wrote
        written = gh.update_comment(existing.id, body)
        if _holds(gh, existing.id, mark, ours) and (
            set(kept) <= set(ours) or _settled(gh, existing.id, mark, ours, pause)
        ):
            return written, "updated"
    raise SectionConflict(
        f"the comment on pull request #{number} kept changing under {ATTEMPTS} attempts to write its "
        f"{', '.join(sorted(sections))} section"
    )


def _holds(gh: GitHubClient, comment_id: int, mark: str, ours: Mapping[str, str]) -> bool:
    now = parse(gh.get_comment(comment_id).body, mark)
    return all(now.get(name) == text for name, text in ours.items())


def _settled(
    gh: GitHubClient, comment_id: int, mark: str, ours: Mapping[str, str], pause: Callable[[float], None]
) -> bool:
    """Our sections still there after :data:`SETTLE` seconds: another writer's write that was on its way while we
    wrote (it read the comment before our write, so it would carry the old sections) has landed by then. Only when
    the comment has another writer's section: a comment of ours alone has nobody to race."""
    pause(SETTLE)
    return _holds(gh, comment_id, mark, ours)


__all__ = ["ATTEMPTS", "SECTIONS", "SETTLE", "SectionConflict", "compose", "parse", "upsert_sections"]
