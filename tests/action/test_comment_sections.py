"""One pull request comment, two writers: the plan job's section and the rehearsal's, written at once.

Each writer runs the real :func:`gitops.github.sections.upsert_sections` over the real client against the fake GitHub
API (tests/action/fake_github.py); the other writer is run from inside the fake, between two requests of the first
(``on_request``), at every point of its read-modify-write: no interleaving loses either section."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from gitops.github.api import COMMENT_LIMIT, GitHubClient, marker
from gitops.github.report import COMMENT_MARGIN, REHEARSAL_CHARS, Report, comment_sections, document
from gitops.github.runner import Runner
from gitops.github.sections import ATTEMPTS, SectionConflict, compose, parse, upsert_sections
from gitops.secrets import Secret
from tests.action.fake_github import BOT, GITHUB_TOKEN, FakeGitHub
from tests.render.test_plan import many_diffs_plan

MARK = marker("gitops.yaml")
PR = 7


def client(fake: FakeGitHub) -> GitHubClient:
    return GitHubClient(Secret(GITHUB_TOKEN), fake.repository, api_url=fake.base_url, transport=fake.transport)


def write(fake: FakeGitHub, sections: dict[str, str]) -> str:
    with client(fake) as gh:
        _, what = upsert_sections(gh, PR, MARK, sections, pause=lambda _: None)
    return what


def body(fake: FakeGitHub) -> str:
    [comment] = fake.on(PR)
    return comment.body


def once_at(index: int, action: Callable[[], None]) -> Callable[[str, str], None]:
    """A hook that runs ``action`` (the other writer) just before the ``index``-th request is answered."""
    seen = [0]

    def hook(_method: str, _path: str) -> None:
        seen[0] += 1
        if seen[0] == index + 1:
            action()

    return hook


def test_sections_compose_and_parse_back_in_their_order() -> None:
    text = compose(MARK, {"rehearsal": "### Rehearsal\nok", "plan": "### Plan\n| a |"})
    assert text.startswith(MARK + "\n")
    assert text.index("### Plan") < text.index("### Rehearsal")
    assert parse(text, MARK) == {"plan": "### Plan\n| a |", "rehearsal": "### Rehearsal\nok"}
    # A comment from before the sections (the marker, then the plan) is the plan's section.
    assert parse(MARK + "\n### old plan\n", MARK) == {"plan": "### old plan"}


def test_a_line_of_the_content_that_reads_as_a_marker_cannot_end_or_open_a_section() -> None:
    fake = FakeGitHub()
    forged = "<!-- screeps-gitops section end plan -->\n<!-- screeps-gitops section rehearsal -->\nforged"
    write(fake, {"plan": f"### Plan\n{forged}"})
    write(fake, {"rehearsal": "### Rehearsal"})
    sections = parse(body(fake), MARK)
    assert sections["rehearsal"] == "### Rehearsal"
    assert sections["plan"].endswith(" <!-- screeps-gitops section rehearsal -->\nforged")


#: The plan writer's requests when the comment exists: 0 the list, 1 who the token is, 2 the check before the
#: write, 3 the write, 4 the check after it, 5 the check after the settling pause (a rehearsal section is there).
#: At 3 the other writer's whole turn falls between the check and the write landing: the threaded test below.
@pytest.mark.parametrize("index", [0, 1, 2, 4, 5])
def test_a_second_writer_at_any_point_of_the_first_writers_turn_loses_neither_section(index: int) -> None:
    fake = FakeGitHub()
    write(fake, {"plan": "plan 1", "rehearsal": "rehearsal 1"})
    ran: list[str] = []

    def rehearsal_job() -> None:
        fake.on_request = None  # the other writer's own requests are not interleaved again
        ran.append(write(fake, {"rehearsal": "rehearsal 2"}))

    fake.on_request = once_at(index, rehearsal_job)
    write(fake, {"plan": "plan 2"})
    assert ran == ["updated"]
    # Both writers' sections, whichever request of the plan's the rehearsal's write fell before.
    assert parse(body(fake), MARK) == {"plan": "plan 2", "rehearsal": "rehearsal 2"}


def test_a_write_that_lands_after_the_other_writers_whole_turn_is_repaired_by_its_settling_check() -> None:
    """The plan writer has checked the comment and its write is on its way; the rehearsal writer reads, writes and
    checks in that moment, so the plan's write (made from the older comment) drops the rehearsal's section when it
    lands. The rehearsal writer's check after its settling pause sees that, and writes its section again."""
    fake = FakeGitHub()
    write(fake, {"plan": "plan 1", "rehearsal": "rehearsal 1"})
    at_write, go, landed = threading.Event(), threading.Event(), threading.Event()
    plan_thread: list[threading.Thread] = []

    def hook(method: str, _path: str) -> None:
        if threading.current_thread() is not plan_thread[0]:
            return
        if method == "PATCH":
            at_write.set()
            assert go.wait(10)
        elif at_write.is_set():
            landed.set()  # the plan's next request: its write has landed

    def settle(_seconds: float) -> None:
        go.set()
        assert landed.wait(10)

    def plan_job() -> None:
        write(fake, {"plan": "plan 2"})

    plan_thread.append(threading.Thread(target=plan_job))
    fake.on_request = hook
    plan_thread[0].start()
    assert at_write.wait(10)
    with client(fake) as gh:
        _, what = upsert_sections(gh, PR, MARK, {"rehearsal": "rehearsal 2"}, pause=settle)
    plan_thread[0].join(10)
    assert what == "updated"
    assert parse(body(fake), MARK) == {"plan": "plan 2", "rehearsal": "rehearsal 2"}


#: The plan writer's requests when there is no comment: 0 the list, 1 the new comment, 2 the list again, 3 who
#: the token is.
@pytest.mark.parametrize("index", range(4))
def test_two_writers_that_find_no_comment_end_with_one_comment_holding_both(index: int) -> None:
    fake = FakeGitHub()

    def rehearsal_job() -> None:
        fake.on_request = None
        write(fake, {"rehearsal": "the rehearsal"})

    fake.on_request = once_at(index, rehearsal_job)
    write(fake, {"plan": "the plan"})
    assert parse(body(fake), MARK) == {"plan": "the plan", "rehearsal": "the rehearsal"}


def test_a_writer_whose_section_is_already_there_writes_nothing() -> None:
    fake = FakeGitHub()
    write(fake, {"plan": "p", "rehearsal": "r"})
    before = len(fake.writes())
    assert write(fake, {"rehearsal": "r"}) == "unchanged"
    assert len(fake.writes()) == before


def test_someone_elses_comment_with_the_marker_is_left_alone() -> None:
    fake = FakeGitHub()
    theirs = fake.add(PR, compose(MARK, {"plan": "not ours"}), {"login": "mallory", "type": "User"})
    write(fake, {"rehearsal": "ours"})
    assert theirs.body == compose(MARK, {"plan": "not ours"})
    [ours] = [c for c in fake.on(PR) if c.user == BOT]
    assert parse(ours.body, MARK) == {"rehearsal": "ours"}


def test_a_comment_that_keeps_changing_ends_in_a_warning_not_a_lost_section() -> None:
    fake = FakeGitHub()
    write(fake, {"plan": "p"})
    [comment] = fake.on(PR)
    n = [0]

    def busy(method: str, path: str) -> None:  # another writer changes the comment before every check
        if method == "GET" and path.endswith(f"/comments/{comment.id}"):
            n[0] += 1
            comment.body = compose(MARK, {"plan": f"p{n[0]}"})

    fake.on_request = busy
    with pytest.raises(SectionConflict, match=f"kept changing under {ATTEMPTS} attempts"):
        write(fake, {"rehearsal": "r"})
    assert "rehearsal" not in parse(comment.body, MARK)  # nothing half-merged was written


def test_the_plans_section_leaves_room_for_the_rehearsals_whoever_wrote_it() -> None:
    """A plan longer than the comment may be, written beside a rehearsal section as long as it may be: the body
    stays within GitHub's limit, so no end marker is ever cut off (which would lose a section)."""
    runner = Runner.from_env({"RUNNER_TEMP": "/tmp"})
    report = Report(command="plan", manifest="gitops.yaml")
    report.plan = many_diffs_plan(branches=25, modules=120)
    limit = COMMENT_LIMIT - len(MARK) - COMMENT_MARGIN
    assert len(document(report, runner, limit=10**9, unit="chars")) > COMMENT_LIMIT
    plan = comment_sections(report, runner, limit=limit)["plan"]
    body = compose(MARK, {"plan": plan, "rehearsal": "r" * REHEARSAL_CHARS})
    assert len(body) <= COMMENT_LIMIT
    assert parse(body, MARK) == {"plan": plan.rstrip("\n"), "rehearsal": "r" * REHEARSAL_CHARS}
