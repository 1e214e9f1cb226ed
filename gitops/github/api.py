"""The GitHub REST API, as far as the Action needs it: the one plan comment on a pull request, and the one drift
issue (opened or updated while something drifted, closed when nothing has).

:class:`GitHubClient` owns every request to GitHub: the base URL (``GITHUB_API_URL``, so GitHub Enterprise Server
works), the token (a :class:`~gitops.secrets.Secret`, never printed), pagination, and turning error answers into
:class:`GitHubError` messages that say what to change in the workflow. The plan comment is found by a hidden marker
at the start of its body, so each push edits the same comment instead of adding one.

Every answer is read as the game service's are (:func:`gitops.edges.http.send_bounded`): with a byte cap
(:data:`PAGE_CAP`, :data:`ANSWER_CAP`) and a deadline per request and for them all, so that a hostile or broken
GitHub (an endless answer, a gzip bomb, one byte a second, silence) ends in a :class:`GitHubError` in bounded time
and memory, which the Action shows as a warning.

Tests hand the client an ``httpx.MockTransport``; :func:`use_transport` does the same for a whole in-process run
of ``gitops action`` (the game service keeps its own transport), and may shorten the deadlines.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

import httpx

from gitops import __version__
from gitops.edges.http import AnswerTooLarge, DeadlinePassed, UnreadableJSON, parse_json, send_bounded
from gitops.edges.service.failures import transport_detail
from gitops.errors import GitopsError
from gitops.secrets import Secret, redact

DEFAULT_API_URL = "https://api.github.com"

#: GitHub refuses comment bodies longer than this many characters.
COMMENT_LIMIT = 65_536

#: Pages of 100 comments read at most while looking for ours; a pull request with more gets a new comment.
MAX_PAGES = 30
#: Comments asked for per page (GitHub's most).
PER_PAGE = 100

_MIB = 1024 * 1024
#: The most bytes read of one page of comments: 100 comments of GitHub's longest body (65,536 characters), each
#: with a few kB of user, reactions and URLs, fill about 7 MB in ASCII; twice that leaves room for other scripts.
PAGE_CAP = 16 * _MIB
#: The most bytes read of any other answer: one comment (at most 65,536 characters, even all of them written as
#: six-byte ``\uXXXX`` escapes, is under 400 kB) or an error.
ANSWER_CAP = 1 * _MIB
#: Seconds one request may take, headers and whole body (a deadline, not a pause between reads).
TIMEOUT = 30.0
#: Seconds all of one client's requests may take together (the comment is a courtesy: it must not hold the job).
TOTAL = 120.0


@dataclass(frozen=True, slots=True)
class _Seam:
    transport: httpx.BaseTransport | None = None
    timeout: float | None = None


_seam: ContextVar[_Seam | None] = ContextVar("gitops_github_seam", default=None)


@contextmanager
def use_transport(transport: httpx.BaseTransport, *, timeout: float | None = None) -> Iterator[None]:
    """Within the block, every :class:`GitHubClient` made without a transport uses this one, and ``timeout``
    (when given) as its deadline per request instead of :data:`TIMEOUT` (tests)."""
    token = _seam.set(_Seam(transport, timeout))
    try:
        yield
    finally:
        _seam.reset(token)


class GitHubError(GitopsError):
    """GitHub refused or failed a request."""

    exit_code = 1

    def __init__(self, message: str, *, status: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status


class GitHubPermissionError(GitHubError):
    """The token may not do this (403/404 on a write): typically a read-only ``GITHUB_TOKEN``."""


@dataclass(frozen=True, slots=True)
class Comment:
    """An issue (pull request) comment."""

    id: int
    body: str
    url: str
    #: The login of who wrote it (``github-actions[bot]`` for the Actions token).
    author: str = ""

    @classmethod
    def from_json(cls, data: Any) -> Comment:
        if not isinstance(data, dict) or not isinstance(data.get("id"), int):
            raise GitHubError("GitHub answered with something that is not a comment")
        return cls(
            id=data["id"], body=str(data.get("body") or ""), url=str(data.get("html_url") or ""), author=_login(data)
        )


@dataclass(frozen=True, slots=True)
class Issue:
    """An issue (not a pull request)."""

    number: int
    title: str
    body: str
    url: str
    state: str
    #: The login of who opened it.
    author: str = ""

    @classmethod
    def from_json(cls, data: Any) -> Issue:
        if not isinstance(data, dict) or not isinstance(data.get("number"), int):
            raise GitHubError("GitHub answered with something that is not an issue")
        return cls(
            number=data["number"],
            title=str(data.get("title") or ""),
            body=str(data.get("body") or ""),
            url=str(data.get("html_url") or ""),
            state=str(data.get("state") or ""),
            author=_login(data),
        )


def _login(data: dict[str, Any]) -> str:
    user = data.get("user")
    login = user.get("login") if isinstance(user, dict) else None
    return login if isinstance(login, str) else ""


#: Who a GitHub Actions ``GITHUB_TOKEN`` (an app installation token) writes as; ``GET /user`` does not answer it.
ACTIONS_BOT = "github-actions[bot]"


def drift_marker(manifest: str) -> str:
    """The hidden first line of the drift issue: one issue per manifest."""
    safe = manifest.replace("--", "- -").replace(">", "")
    return f"<!-- screeps-gitops drift: {safe} -->"


def marker(manifest: str) -> str:
    """The hidden first line of our comment: one comment per manifest, so two manifests get two comments."""
    safe = manifest.replace("--", "- -").replace(">", "")
    return f"<!-- screeps-gitops plan: {safe} -->"


class GitHubClient:
    """Requests to the GitHub REST API for one repository."""

    def __init__(
        self,
        token: Secret,
        repository: str,
        *,
        api_url: str | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout: float | None = None,
        total: float = TOTAL,
    ) -> None:
        """``timeout``: seconds each request may take, whole (:data:`TIMEOUT` unless given); ``total``: seconds all
        requests may take together, from now."""
        if repository.count("/") != 1:
            raise GitHubError(f"GITHUB_REPOSITORY is {repository!r}, not OWNER/NAME")
        self.repository = repository
        self.api_url = (api_url or DEFAULT_API_URL).rstrip("/")
        self._home = _origin(httpx.URL(self.api_url))
        self._token = token
        seam = _seam.get() or _Seam()
        self._timeout = timeout if timeout is not None else seam.timeout if seam.timeout is not None else TIMEOUT
        self._total = total
        self._ends = time.monotonic() + total
        #: What went wrong without stopping a request (a ``next`` link elsewhere): the caller shows them.
        self.warnings: list[str] = []
        self._identity: str | None = None
        self._http = httpx.Client(
            base_url=self.api_url,
            transport=transport or seam.transport,
            headers={
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": f"screeps-gitops/{__version__}",
            },
        )

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # --- files ---------------------------------------------------------------------------------------------

    def file_at(self, path: str, ref: str) -> bytes | None:
        """The raw bytes of the repository's file ``path`` at commit ``ref`` (the contents API), or ``None`` when
        the commit has no such file."""
        try:
            response = self._request(
                "GET",
                f"/repos/{self.repository}/contents/{quote(path)}",
                what=f"read {path} at {ref[:12]}",
                permission="contents: read",
                params={"ref": ref},
                headers={"Accept": "application/vnd.github.raw"},
            )
        except GitHubError as exc:
            if exc.status == 404:
                return None
            raise
        return response.content

    # --- comments ------------------------------------------------------------------------------------------

    def list_comments(self, number: int) -> tuple[list[Comment], bool]:
        """The pull request's comments, oldest first, and whether the list is complete (``MAX_PAGES`` bound)."""
        comments: list[Comment] = []
        pages = _Pages(self, number)
        for page in pages:
            comments.extend(page)
        return comments, pages.complete

    def identity(self) -> str:
        """The login this client's token writes as: ``GET /user`` for a person's token; for the Actions
        ``GITHUB_TOKEN`` (which that endpoint refuses, "Resource not accessible by integration") the Actions bot,
        :data:`ACTIONS_BOT`. Asked once."""
        if self._identity is None:
            try:
                response = self._request("GET", "/user", what="learn who the token is", permission="")
                data = _json(response, "learn who the token is")
                login = data.get("login") if isinstance(data, dict) else None
                self._identity = login if isinstance(login, str) and login else ACTIONS_BOT
            except GitHubError as exc:
                if exc.status not in (401, 403, 404):
                    raise
                self._identity = ACTIONS_BOT
        return self._identity

    def find_comment(self, number: int, mark: str) -> Comment | None:
        """Our comment: the first whose body starts with the marker (a quote of it starts with ``>``) and that this
        client's token wrote (:meth:`identity`): anyone can post a comment that starts with the marker, and it must
        never be taken for ours (we would then write the plan into their comment, which they can edit).

        Pages are read until it is found, and only the page being read is kept: at most one page's cap in memory.
        """
        for page in _Pages(self, number):
            for comment in page:
                # Who the token is, asked only once a comment with the marker turns up.
                if comment.body.startswith(mark) and comment.author == self.identity():
                    return comment
        return None

    def create_comment(self, number: int, body: str) -> Comment:
        response = self._request(
            "POST",
            f"/repos/{self.repository}/issues/{number}/comments",
            json={"body": _fit(body)},
            what=f"comment on pull request #{number}",
        )
        return Comment.from_json(_json(response, f"comment on pull request #{number}"))

    def update_comment(self, comment_id: int, body: str) -> Comment:
        response = self._request(
            "PATCH",
            f"/repos/{self.repository}/issues/comments/{comment_id}",
            json={"body": _fit(body)},
            what=f"edit comment {comment_id}",
        )
        return Comment.from_json(_json(response, f"edit comment {comment_id}"))

    def get_comment(self, comment_id: int) -> Comment:
        """One comment as it is now (the sections' check before and after a write)."""
        what = f"read comment {comment_id}"
        response = self._request("GET", f"/repos/{self.repository}/issues/comments/{comment_id}", what=what)
        return Comment.from_json(_json(response, what))

    def delete_comment(self, comment_id: int) -> None:
        """Delete one of our comments (the second of two that writers created at once)."""
        self._request("DELETE", f"/repos/{self.repository}/issues/comments/{comment_id}", what="delete a comment")

    def upsert_comment(
        self, number: int, mark: str, body: str
    ) -> tuple[Comment, Literal["created", "updated", "unchanged"]]:
        """Edit our comment in place (found by ``mark``), or create it; ``body`` must start with ``mark``."""
        if not body.startswith(mark):
            raise ValueError("the comment body must start with its marker, or it would never be found again")
        existing = self.find_comment(number, mark)
        if existing is None:
            return self.create_comment(number, body), "created"
        if existing.body == _fit(body):
            return existing, "unchanged"
        return self.update_comment(existing.id, body), "updated"

    # --- the drift issue -----------------------------------------------------------------------------------

    def find_issue(self, mark: str) -> Issue | None:
        """Our open issue: the first open issue (not pull request) whose body starts with ``mark``, newest first.

        Reads at most ``MAX_PAGES`` pages (each within :data:`PAGE_CAP`), keeping only the page being read; a
        ``next`` link to another host is not followed (a warning)."""
        url: str | None = f"/repos/{self.repository}/issues"
        params: dict[str, Any] | None = {"state": "open", "per_page": PER_PAGE, "sort": "created", "direction": "desc"}
        what = "read the open issues"
        for _ in range(MAX_PAGES):
            assert url is not None
            response = self._request("GET", url, params=params, what=what, cap=PAGE_CAP, permission="issues: write")
            data = _json(response, what)
            if not isinstance(data, list):
                raise GitHubError("GitHub answered the list of issues with something not a list")
            for item in data:
                if isinstance(item, dict) and "pull_request" not in item:
                    issue = Issue.from_json(item)
                    if issue.body.startswith(mark) and issue.author == self.identity():
                        return issue
            url = response.links.get("next", {}).get("url")
            params = None
            if not url:
                return None
            if not self._is_home(url):
                self.warnings.append(
                    f"GitHub's list of issues links its next page to {_origin_text(url)}, not to the API at "
                    f"{_origin_text(self.api_url)}; the link was not followed (the token is only sent to "
                    "GITHUB_API_URL), so issues on later pages were not read"
                )
                return None
        return None

    def create_issue(self, title: str, body: str) -> Issue:
        response = self._request(
            "POST",
            f"/repos/{self.repository}/issues",
            json={"title": title, "body": _fit(body)},
            what="open an issue",
            permission="issues: write",
        )
        return Issue.from_json(_json(response, "open an issue"))

    def update_issue(self, number: int, **fields: Any) -> Issue:
        """Edit issue ``number``: ``title``, ``body`` (cut to fit), ``state``, ``state_reason``."""
        if "body" in fields:
            fields["body"] = _fit(fields["body"])
        what = f"edit issue #{number}"
        response = self._request(
            "PATCH", f"/repos/{self.repository}/issues/{number}", json=fields, what=what, permission="issues: write"
        )
        return Issue.from_json(_json(response, what))

    def upsert_issue(
        self, mark: str, title: str, body: str
    ) -> tuple[Issue, Literal["created", "updated", "unchanged"]]:
        """Edit our open issue in place (found by ``mark``), or open it; ``body`` must start with ``mark``."""
        if not body.startswith(mark):
            raise ValueError("the issue body must start with its marker, or it would never be found again")
        existing = self.find_issue(mark)
        if existing is None:
            return self.create_issue(title, body), "created"
        if existing.body == _fit(body) and existing.title == title:
            return existing, "unchanged"
        return self.update_issue(existing.number, title=title, body=body), "updated"

    def close_issue(self, mark: str, body: str) -> Issue | None:
        """Close our open issue (found by ``mark``) with ``body`` as its last word; ``None`` when none is open."""
        if not body.startswith(mark):
            raise ValueError("the issue body must start with its marker")
        existing = self.find_issue(mark)
        if existing is None:
            return None
        return self.update_issue(existing.number, body=body, state="closed", state_reason="completed")

    # --- deployment records -----------------------------------------------------------------------------------

    def create_deployment(self, ref: str, environment: str, *, description: str, payload: dict[str, Any]) -> int:
        """A deployment of commit ``ref`` to ``environment`` (created by GitHub on first use); its id. No merge of
        the default branch into it and no required status checks: the code is deployed already, this records it."""
        what = f"record a deployment to {environment}"
        response = self._request(
            "POST",
            f"/repos/{self.repository}/deployments",
            json={
                "ref": ref,
                "environment": environment,
                "auto_merge": False,
                "required_contexts": [],
                "description": description[:140],
                "payload": payload,
                "transient_environment": False,
            },
            what=what,
            permission="deployments: write",
        )
        data = _json(response, what)
        if not isinstance(data, dict) or not isinstance(data.get("id"), int):
            raise GitHubError(f"GitHub answered the request to {what} with something that is not a deployment")
        return int(data["id"])

    def create_deployment_status(
        self, deployment_id: int, state: str, *, log_url: str | None, description: str = ""
    ) -> None:
        """Set the deployment's state (``success``, ``failure``, ``inactive``...). ``auto_inactive`` is off: which
        earlier deployments stop being active is decided by :meth:`deactivate_earlier`, for production
        environments too."""
        body: dict[str, Any] = {"state": state, "description": description[:140], "auto_inactive": False}
        if log_url:
            body["log_url"] = log_url
        what = f"set deployment {deployment_id} to {state}"
        self._request(
            "POST",
            f"/repos/{self.repository}/deployments/{deployment_id}/statuses",
            json=body,
            what=what,
            permission="deployments: write",
        )

    def deployments(self, environment: str) -> Iterator[int]:
        """The ids of the environment's deployments, newest first: at most :data:`MAX_PAGES` pages, following only
        ``next`` links to the API's origin."""
        url: str | None = f"/repos/{self.repository}/deployments"
        params: dict[str, Any] | None = {"environment": environment, "per_page": PER_PAGE}
        what = f"read the deployments to {environment}"
        for _ in range(MAX_PAGES):
            assert url is not None
            response = self._request(
                "GET", url, params=params, what=what, cap=PAGE_CAP, permission="deployments: write"
            )
            data = _json(response, what)
            if not isinstance(data, list):
                raise GitHubError(f"GitHub answered the list of deployments to {environment} with something not a list")
            for item in data:
                if isinstance(item, dict) and isinstance(item.get("id"), int):
                    yield int(item["id"])
            url = response.links.get("next", {}).get("url")
            params = None
            if not url:
                return
            if not self._is_home(url):
                self.warnings.append(
                    f"GitHub's list of deployments links its next page to {_origin_text(url)}, not to the API at "
                    f"{_origin_text(self.api_url)}; the link was not followed (the token is only sent to "
                    "GITHUB_API_URL), so older deployments were not read"
                )
                return

    def deployment_state(self, deployment_id: int) -> str | None:
        """The deployment's newest status (``None``: it has none)."""
        what = f"read the state of deployment {deployment_id}"
        response = self._request(
            "GET",
            f"/repos/{self.repository}/deployments/{deployment_id}/statuses",
            params={"per_page": 1},
            what=what,
            permission="deployments: write",
        )
        data = _json(response, what)
        if not isinstance(data, list):
            raise GitHubError(f"GitHub answered the statuses of deployment {deployment_id} with something not a list")
        state = data[0].get("state") if data and isinstance(data[0], dict) else None
        return state if isinstance(state, str) else None

    def deactivate_earlier(self, environment: str, current: int) -> int:
        """Mark the environment's deployments before ``current`` inactive, newest first, until one that already
        is: every earlier run did the same, so what lies beyond it is inactive too (a walk of a few requests, not
        of the whole history). Returns how many were marked."""
        marked = 0
        for deployment_id in self.deployments(environment):
            if deployment_id >= current:  # this one, or a newer one of a run that overlapped (ids only grow)
                continue
            if self.deployment_state(deployment_id) == "inactive":
                break
            self.create_deployment_status(
                deployment_id, "inactive", log_url=None, description="superseded by a newer deploy"
            )
            marked += 1
        return marked

    # --- the one place requests are made -------------------------------------------------------------------

    def _is_home(self, url: str) -> bool:
        try:
            return _origin(self._http.base_url.join(url)) == self._home
        except httpx.InvalidURL:
            return False

    def _request(
        self,
        method: str,
        url: str,
        *,
        what: str,
        cap: int = ANSWER_CAP,
        permission: str = "pull-requests: write",
        **kwargs: Any,
    ) -> httpx.Response:
        if not self._is_home(url):  # pragma: no cover - list_comments checks its links; this is the last guard
            raise GitHubError(f"refused to send the GitHub token to {_origin_text(url)} to {what}")
        headers = {**kwargs.pop("headers", {}), "Authorization": f"Bearer {self._token.reveal()}"}
        started = time.monotonic()
        deadline = min(started + self._timeout, self._ends)
        try:
            request = self._http.build_request(method, url, headers=headers, **kwargs)
            response = send_bounded(self._http, request, cap=cap, deadline=deadline)
        except AnswerTooLarge as exc:
            raise GitHubError(
                f"GitHub sent more than {_size(exc.cap)} in answer to {what}, the most the tool reads",
                hint=_NOT_THE_API,
            ) from None
        except DeadlinePassed:
            if deadline < self._ends:
                within = f"within {self._timeout:g} s"
            else:
                within = f"within the {self._total:g} s allowed for all of this run's requests to GitHub"
            raise GitHubError(
                f"GitHub did not answer (headers and whole body) to {what} {within}",
                hint="GitHub, or a proxy in between, is slow or stalled; the plan is in the job summary all the same. "
                "Check GITHUB_API_URL if this repeats.",
            ) from None
        except httpx.HTTPError as exc:
            raise GitHubError(
                f"could not reach GitHub at {self.api_url} to {what}: {transport_detail(exc)}",
                hint="Check GITHUB_API_URL (GitHub Enterprise Server: https://HOST/api/v3) and the runner's network.",
            ) from None
        if response.is_success:
            return response
        raise self._error(response, what, permission)

    def _error(self, response: httpx.Response, what: str, permission: str = "pull-requests: write") -> GitHubError:
        status = response.status_code
        try:
            data = parse_json(response.content)
            text = str(data.get("message") or "") if isinstance(data, dict) else ""
        except UnreadableJSON:
            text = response.content[:200].decode("utf-8", "replace")
        text = redact(text.strip()) or response.reason_phrase
        message = f"GitHub refused to {what}: {status} {text}"
        if status == 401:
            return GitHubError(
                message,
                status=status,
                hint="The github-token input is not a valid token; leave it at its default (${{ github.token }}).",
            )
        if (status in (403, 404) and response.request.method != "GET") or "not accessible by integration" in text:
            return GitHubPermissionError(
                message,
                status=status,
                hint=f"Give the workflow `permissions: {permission}` (GITHUB_TOKEN is read-only for pull "
                "requests from forks; those get the plan in the job summary only).",
            )
        if status == 403 and response.headers.get("x-ratelimit-remaining") == "0":
            return GitHubError(
                message, status=status, hint="GitHub's API rate limit is spent; run the job again later."
            )
        if status == 404:
            return GitHubError(
                message,
                status=status,
                hint="Check GITHUB_REPOSITORY and the pull request number, and that the token can read the repository.",
            )
        return GitHubError(message, status=status)


class _Pages:
    """The pages of a pull request's comments, read one at a time (at most :data:`MAX_PAGES`, only following
    ``next`` links to the API's origin); :attr:`complete` says, once iterated, whether the list ended."""

    def __init__(self, client: GitHubClient, number: int) -> None:
        self._client = client
        self._number = number
        self.complete = False

    def __iter__(self) -> Iterator[list[Comment]]:
        gh, number = self._client, self._number
        url: str | None = f"/repos/{gh.repository}/issues/{number}/comments"
        params: dict[str, Any] | None = {"per_page": PER_PAGE}
        what = f"read the comments of pull request #{number}"
        for _ in range(MAX_PAGES):
            assert url is not None
            response = gh._request("GET", url, params=params, what=what, cap=PAGE_CAP)
            data = _json(response, what)
            if not isinstance(data, list):
                raise GitHubError(f"GitHub answered the comments of pull request #{number} with something not a list")
            yield [Comment.from_json(item) for item in data]
            url = response.links.get("next", {}).get("url")
            params = None  # the next link carries them
            if not url:
                self.complete = True
                return
            if not gh._is_home(url):
                # The token goes with every request: a link to another host would hand it over.
                gh.warnings.append(
                    f"GitHub's list of the comments of pull request #{number} links its next page to "
                    f"{_origin_text(url)}, not to the API at {_origin_text(gh.api_url)}; the link was not followed "
                    "(the token is only sent to GITHUB_API_URL), so comments on later pages were not read"
                )
                return


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    """Scheme, host and port (the default port made explicit): where a request, and its token, goes."""
    port = url.port or {"https": 443, "http": 80}.get(url.scheme)
    return url.scheme, url.host, port


def _origin_text(url: str) -> str:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return "an address that is not a URL"
    return redact(f"{parsed.scheme}://{parsed.netloc.decode('ascii', 'replace')}")


#: Why an answer may not be GitHub's API at all.
_NOT_THE_API = (
    "Check GITHUB_API_URL: it must be the API's address (GitHub Enterprise Server: https://HOST/api/v3), "
    "not the web site's; a proxy in between may answer with its own page."
)


def _json(response: httpx.Response, what: str) -> Any:
    """The answer's JSON; an answer of 200 that is not JSON (an HTML page of a proxy or a login wall, a cut
    answer, nesting too deep) is a :class:`GitHubError` saying so, never a crash."""
    try:
        return parse_json(response.content)
    except UnreadableJSON:
        kind = response.headers.get("content-type", "").split(";")[0].strip() or "no content type"
        raise GitHubError(
            f"GitHub answered {response.status_code} to {what} with something that is not JSON "
            f"({kind}, {len(response.content)} bytes)",
            status=response.status_code,
            hint=_NOT_THE_API,
        ) from None


def _size(cap: int) -> str:
    return f"{cap // _MIB} MiB" if cap % _MIB == 0 else f"{cap} bytes"


def _fit(body: str) -> str:
    """The body cut to GitHub's limit (callers render to fit; this is the last guard, never a silent refusal)."""
    if len(body) <= COMMENT_LIMIT:
        return body
    note = "\n\n_(cut to fit GitHub's comment size limit)_\n"
    return body[: COMMENT_LIMIT - len(note)] + note
