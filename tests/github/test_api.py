"""The GitHub client against a fake of the REST API at the httpx transport seam."""

from __future__ import annotations

import json
import time
import tracemalloc

import httpx
import pytest

from gitops.github.api import (
    ANSWER_CAP,
    COMMENT_LIMIT,
    MAX_PAGES,
    PAGE_CAP,
    TIMEOUT,
    TOTAL,
    GitHubClient,
    GitHubError,
    GitHubPermissionError,
    drift_marker,
    marker,
)
from gitops.secrets import Secret
from tests.action.fake_github import BOT, GITHUB_TOKEN, FakeGitHub
from tests.hostile import (
    SLOW_BODY,
    SLOW_HEADERS,
    Behaviour,
    HostileServer,
    answer,
    endless_chunked,
    gzip_bomb,
    hostile_server,
    huge,
    silence,
)

MARK = marker("gitops.yaml")


@pytest.fixture
def fake() -> FakeGitHub:
    return FakeGitHub()


def client(fake: FakeGitHub, token: str = GITHUB_TOKEN) -> GitHubClient:
    return GitHubClient(Secret(token), fake.repository, api_url=fake.base_url, transport=fake.transport)


def test_first_upsert_creates_then_edits_the_same_comment(fake: FakeGitHub) -> None:
    with client(fake) as gh:
        first, what = gh.upsert_comment(7, MARK, MARK + "\nplan one")
        assert what == "created"
        second, what = gh.upsert_comment(7, MARK, MARK + "\nplan two")
        assert what == "updated"
        third, what = gh.upsert_comment(7, MARK, MARK + "\nplan two")
        assert what == "unchanged"
    assert first.id == second.id == third.id
    assert [c.body for c in fake.on(7)] == [MARK + "\nplan two"]
    assert fake.writes() == [
        ("POST", "/api/v3/repos/alice/bot/issues/7/comments"),
        ("PATCH", f"/api/v3/repos/alice/bot/issues/comments/{first.id}"),
    ]
    assert second.url.endswith(f"#issuecomment-{first.id}")


def test_ours_is_found_on_a_later_page_and_quotes_of_it_are_not(fake: FakeGitHub) -> None:
    for n in range(130):
        fake.add(7, f"comment {n}")
    fake.add(7, "> " + MARK + "\n> quoted by a reviewer")
    ours = fake.add(7, MARK + "\nold plan", {"login": "github-actions[bot]", "type": "Bot"})
    for n in range(90):
        fake.add(7, f"later {n}")
    with client(fake) as gh:
        comments, complete = gh.list_comments(7)
        assert (len(comments), complete) == (222, True)
        _, what = gh.upsert_comment(7, MARK, MARK + "\nnew plan")
    assert what == "updated"
    assert ours.body == MARK + "\nnew plan"
    assert len(fake.on(7)) == 222
    # The listing reads all 3 pages; the search stops at page 2, where ours is, after asking who the token is (once a
    # comment with the marker turned up: the reviewer's quote does not start with it).
    assert sum(1 for m, _, _ in fake.requests if m == "GET") == 3 + 2 + 1


def test_pagination_is_bounded(fake: FakeGitHub) -> None:
    for n in range(MAX_PAGES * 100 + 5):
        fake.add(3, f"c{n}")
    with client(fake) as gh:
        comments, complete = gh.list_comments(3)
    assert (len(comments), complete) == (MAX_PAGES * 100, False)


def test_each_manifest_has_its_own_comment(fake: FakeGitHub) -> None:
    other = marker("deploy/season.yaml")
    assert other != MARK
    with client(fake) as gh:
        gh.upsert_comment(7, MARK, MARK + "\nmain")
        gh.upsert_comment(7, other, other + "\nseason")
        gh.upsert_comment(7, MARK, MARK + "\nmain again")
    assert sorted(c.body for c in fake.on(7)) == sorted([MARK + "\nmain again", other + "\nseason"])


def test_marker_cannot_be_closed_early_by_a_path() -> None:
    assert marker("a-->b.yaml") == "<!-- screeps-gitops plan: a- -b.yaml -->"
    assert marker("a-->b.yaml").count("-->") == 1


def test_read_only_token_says_which_permission_to_grant(fake: FakeGitHub) -> None:
    fake.read_only = True
    with client(fake) as gh, pytest.raises(GitHubPermissionError) as caught:
        gh.upsert_comment(7, MARK, MARK + "\nplan")
    assert str(caught.value) == (
        "GitHub refused to comment on pull request #7: 403 Resource not accessible by integration\n"
        "Give the workflow `permissions: pull-requests: write` (GITHUB_TOKEN is read-only for pull requests from "
        "forks; those get the plan in the job summary only)."
    )
    assert caught.value.status == 403


def test_bad_token_is_named_but_never_shown(fake: FakeGitHub) -> None:
    wrong = "ghs_wrongToken0123456789abcdefghijkl"
    with client(fake, wrong) as gh, pytest.raises(GitHubError) as caught:
        gh.list_comments(7)
    assert "401 Bad credentials" in str(caught.value)
    assert "github-token" in str(caught.value)
    assert wrong not in str(caught.value)
    assert not isinstance(caught.value, GitHubPermissionError)


def test_unreachable_api_says_where_it_looked() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    gh = GitHubClient(
        Secret(GITHUB_TOKEN),
        "alice/bot",
        api_url="https://ghe.example.test/api/v3/",
        transport=httpx.MockTransport(refuse),
    )
    with gh, pytest.raises(GitHubError) as caught:
        gh.find_comment(1, MARK)
    assert str(caught.value).startswith(
        "could not reach GitHub at https://ghe.example.test/api/v3 to read the comments of pull request #1: "
    )
    assert "GITHUB_API_URL" in str(caught.value)


def test_too_long_body_is_cut_to_the_limit(fake: FakeGitHub) -> None:
    with client(fake) as gh:
        comment = gh.create_comment(7, MARK + "\n" + "x" * (COMMENT_LIMIT + 10))
    assert len(comment.body) <= COMMENT_LIMIT
    assert comment.body.startswith(MARK)
    assert comment.body.endswith("_(cut to fit GitHub's comment size limit)_\n")


def test_body_without_its_marker_is_refused(fake: FakeGitHub) -> None:
    with client(fake) as gh, pytest.raises(ValueError, match="marker"):
        gh.upsert_comment(7, MARK, "no marker")
    assert fake.requests == []


def test_repository_must_be_owner_slash_name() -> None:
    with pytest.raises(GitHubError, match="not OWNER/NAME"):
        GitHubClient(Secret(GITHUB_TOKEN), "bot")


@pytest.mark.parametrize(
    "elsewhere",
    [
        "https://evil.example.test",  # another host
        "http://github.example.test",  # the same host without TLS
        "https://github.example.test:8443",  # another port
    ],
)
def test_a_next_link_elsewhere_is_not_followed_and_the_token_stays_home(fake: FakeGitHub, elsewhere: str) -> None:
    for n in range(150):
        fake.add(7, f"comment {n}")
    fake.next_origin = elsewhere
    with client(fake) as gh:
        comments, complete = gh.list_comments(7)
        assert (len(comments), complete) == (100, False)
        [warning] = gh.warnings
    assert fake.origins == ["https://github.example.test"]
    assert fake.tokens_sent_to == {"https://github.example.test"}
    assert warning == (
        f"GitHub's list of the comments of pull request #7 links its next page to {elsewhere}, not to the API at "
        "https://github.example.test; the link was not followed (the token is only sent to GITHUB_API_URL), so "
        "comments on later pages were not read"
    )


def test_a_next_link_to_the_api_with_its_default_port_spelt_out_is_followed(fake: FakeGitHub) -> None:
    for n in range(150):
        fake.add(7, f"comment {n}")
    fake.next_origin = "https://github.example.test:443"
    with client(fake) as gh:
        comments, complete = gh.list_comments(7)
        assert gh.warnings == []
    assert (len(comments), complete) == (150, True)


@pytest.mark.parametrize(
    ("method", "body"),
    [
        ("GET", b"<!DOCTYPE html><html><body>Sign in to your proxy</body></html>"),
        ("GET", b'[{"id": 1, "body": "cut'),
        ("GET", b"[" * 100_000),
        ("POST", b"<html>502 Bad Gateway</html>"),
    ],
)
def test_an_answer_that_is_not_json_is_a_github_error(fake: FakeGitHub, method: str, body: bytes) -> None:
    fake.not_json[method] = body
    with client(fake) as gh, pytest.raises(GitHubError) as caught:
        gh.upsert_comment(7, MARK, MARK + "\nplan")
    what = "read the comments of pull request #7" if method == "GET" else "comment on pull request #7"
    assert str(caught.value) == (
        f"GitHub answered 200 to {what} with something that is not JSON (text/html, {len(body)} bytes)\n"
        "Check GITHUB_API_URL: it must be the API's address (GitHub Enterprise Server: https://HOST/api/v3), not the "
        "web site's; a proxy in between may answer with its own page."
    )


# --- a hostile or broken GitHub: real sockets on 127.0.0.1 (tests/hostile.py) --------------------------------


def hostile_client(server: HostileServer, *, timeout: float = 30.0, total: float = TOTAL) -> GitHubClient:
    return GitHubClient(Secret(GITHUB_TOKEN), "alice/bot", api_url=server.url, timeout=timeout, total=total)


@pytest.mark.parametrize(
    ("behaviour", "cap"),
    [(endless_chunked, "16 MiB"), (gzip_bomb, "16 MiB"), (huge(100 * 1024 * 1024), "16 MiB")],
    ids=["endless-chunked", "gzip-bomb", "100-MB"],
)
def test_a_page_of_comments_is_read_up_to_its_cap(behaviour: Behaviour, cap: str) -> None:
    tracemalloc.start()
    try:
        with hostile_server(behaviour) as server, hostile_client(server) as gh, pytest.raises(GitHubError) as caught:
            gh.find_comment(7, MARK)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(caught.value) == (
        f"GitHub sent more than {cap} in answer to read the comments of pull request #7, the most the tool reads\n"
        "Check GITHUB_API_URL: it must be the API's address (GitHub Enterprise Server: https://HOST/api/v3), not the "
        "web site's; a proxy in between may answer with its own page."
    )
    assert PAGE_CAP == 16 * 1024 * 1024
    assert peak < 3 * PAGE_CAP, f"{peak} bytes at the peak while reading a page"
    assert server.connections == 1


def test_an_answer_to_a_write_has_a_smaller_cap() -> None:
    # A comment is at most 65,536 characters: its answer, even all escapes, is far under the cap.
    assert len(json.dumps({"id": 1, "body": "\x01" * COMMENT_LIMIT, "user": BOT})) < ANSWER_CAP
    with hostile_server(huge(2 * 1024 * 1024)) as server, hostile_client(server) as gh:
        with pytest.raises(GitHubError) as caught:
            gh.create_comment(7, MARK + "\nplan")
        assert str(caught.value).startswith("GitHub sent more than 1 MiB in answer to comment on pull request #7,")
        with pytest.raises(GitHubError) as caught:
            gh.update_comment(1000, MARK + "\nplan")
        assert str(caught.value).startswith("GitHub sent more than 1 MiB in answer to edit comment 1000,")


def test_an_error_answer_is_read_up_to_the_cap_too() -> None:
    page = b"<html>" + b"x" * 2 * 1024 * 1024 + b"</html>"
    with (
        hostile_server(answer(page, status=b"502 Bad Gateway")) as server,
        hostile_client(server) as gh,
        pytest.raises(GitHubError) as caught,
    ):
        gh.create_comment(7, MARK + "\nplan")
    assert str(caught.value).startswith("GitHub sent more than 1 MiB in answer to comment on pull request #7,")


@pytest.mark.parametrize("behaviour", [SLOW_HEADERS, SLOW_BODY, silence], ids=["slow-headers", "slow-body", "silent"])
def test_a_slow_or_silent_github_ends_by_the_request_deadline(behaviour: Behaviour) -> None:
    with hostile_server(behaviour) as server, hostile_client(server, timeout=1.0) as gh:
        started = time.monotonic()
        with pytest.raises(GitHubError) as caught:
            gh.upsert_comment(7, MARK, MARK + "\nplan")
        took = time.monotonic() - started
    assert str(caught.value) == (
        "GitHub did not answer (headers and whole body) to read the comments of pull request #7 within 1 s\n"
        "GitHub, or a proxy in between, is slow or stalled; the plan is in the job summary all the same. Check "
        "GITHUB_API_URL if this repeats."
    )
    # The deadline holds whatever the server does; the margin is for a loaded machine, not for the client.
    assert 0.9 <= took < 10.0
    assert server.connections == 1


def test_all_requests_together_end_by_the_clients_total_deadline() -> None:
    with hostile_server(silence) as server:
        # The run's total deadline starts when the client is made: so does the measurement (a loaded machine can
        # take a fifth of a second between the two).
        started = time.monotonic()
        with hostile_client(server, timeout=30.0, total=1.0) as gh, pytest.raises(GitHubError) as caught:
            gh.find_comment(7, MARK)
        took = time.monotonic() - started
    assert str(caught.value).startswith(
        "GitHub did not answer (headers and whole body) to read the comments of pull request #7 within the 1 s "
        "allowed for all of this run's requests to GitHub\n"
    )
    assert 0.9 <= took < 10.0


def test_the_default_deadlines() -> None:
    assert (TIMEOUT, TOTAL) == (30.0, 120.0)
    with GitHubClient(Secret(GITHUB_TOKEN), "alice/bot") as gh:
        assert gh._timeout == TIMEOUT


def test_a_page_within_the_cap_is_read_over_a_real_socket() -> None:
    entry = {"id": 5, "body": MARK + "\nours", "html_url": "https://x.test/5", "user": {"login": "github-actions[bot]"}}
    page = json.dumps([entry]).encode()
    with hostile_server(answer(page)) as server, hostile_client(server) as gh:
        found = gh.find_comment(7, MARK)
    assert found is not None
    assert (found.id, found.url) == (5, "https://x.test/5")


def test_a_redirect_is_not_followed_so_the_token_stays_home() -> None:
    seen: list[str] = []

    def moved(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(301, headers={"Location": "https://elsewhere.example.test/comments"})

    gh = GitHubClient(
        Secret(GITHUB_TOKEN),
        "alice/bot",
        api_url="https://ghe.example.test/api/v3",
        transport=httpx.MockTransport(moved),
    )
    with gh, pytest.raises(GitHubError) as caught:
        gh.find_comment(7, MARK)
    assert seen == ["https://ghe.example.test/api/v3/repos/alice/bot/issues/7/comments?per_page=100"]
    assert str(caught.value).startswith("GitHub refused to read the comments of pull request #7: 301 ")


def test_a_marker_comment_someone_else_wrote_is_never_taken_for_ours(fake: FakeGitHub) -> None:
    # Anyone may pre-post the hidden marker; writing the plan into their comment would let them edit what reviewers
    # read. Only a comment by the token's own identity (the Actions bot for GITHUB_TOKEN) is ours.
    planted = fake.add(7, MARK + "\nplanted by a stranger", {"login": "mallory", "type": "User"})
    with client(fake) as gh:
        comment, what = gh.upsert_comment(7, MARK, MARK + "\nthe plan")
    assert what == "created"
    assert planted.body == MARK + "\nplanted by a stranger"
    assert [c.body for c in fake.on(7)] == [MARK + "\nplanted by a stranger", MARK + "\nthe plan"]
    assert fake.on(7)[1].user["login"] == "github-actions[bot]"
    assert comment.author == "github-actions[bot]"
    # The next push edits ours, still not theirs.
    with client(fake) as gh:
        _, what = gh.upsert_comment(7, MARK, MARK + "\nthe new plan")
    assert what == "updated"
    assert [c.body for c in fake.on(7)] == [MARK + "\nplanted by a stranger", MARK + "\nthe new plan"]


def test_a_persons_token_takes_the_comments_that_person_wrote(fake: FakeGitHub) -> None:
    fake.user_login = "alice"
    bot = fake.add(7, MARK + "\nby the bot", {"login": "github-actions[bot]", "type": "Bot"})
    mine = fake.add(7, MARK + "\nby alice", {"login": "alice", "type": "User"})
    with client(fake) as gh:
        _, what = gh.upsert_comment(7, MARK, MARK + "\nplan")
    assert what == "updated"
    assert (bot.body, mine.body) == (MARK + "\nby the bot", MARK + "\nplan")


def test_a_drift_issue_someone_else_opened_with_the_marker_is_left_alone(fake: FakeGitHub) -> None:
    mark = drift_marker("gitops.yaml")
    planted = fake.add_issue("Drift", mark + "\nplanted", user={"login": "mallory", "type": "User"})
    with client(fake) as gh:
        issue, what = gh.upsert_issue(mark, "Drift", mark + "\nreport")
        assert gh.close_issue(mark, mark + "\nall clear") is not None
    assert what == "created"
    assert issue.number != planted.number
    assert (planted.body, planted.state) == (mark + "\nplanted", "open")
