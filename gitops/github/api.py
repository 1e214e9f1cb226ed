"""The GitHub REST API, as far as the Action needs it: the one plan comment on a pull request, and the one drift
issue (opened or updated while something drifted, closed when nothing has).

:class:`GitHubClient` owns every request to GitHub: the base URL (``GITHUB_API_URL``, so GitHub Enterprise Server
works), the token (a :class:`~gitops.secrets.Secret`, never printed), pagination, and turning error answers into
:class:`GitHubError` messages that say what to change in the workflow. The plan comment is found by a hidden marker
at the start of its body, so each push edits the same comment instead of adding one.

Tests hand the client an ``httpx.MockTransport``; :func:`use_transport` does the same for a whole in-process run
of ``gitops action`` (the game service keeps its own transport).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from gitops import __version__
from gitops.edges.client import transport_detail
from gitops.errors import GitopsError
from gitops.secrets import Secret, redact

DEFAULT_API_URL = "https://api.github.com"

#: GitHub refuses comment bodies longer than this many characters.
COMMENT_LIMIT = 65_536

#: Pages of 100 comments read at most while looking for ours; a pull request with more gets a new comment.
MAX_PAGES = 30

_transport: ContextVar[httpx.BaseTransport | None] = ContextVar("gitops_github_transport", default=None)


@contextmanager
def use_transport(transport: httpx.BaseTransport) -> Iterator[None]:
    """Within the block, every :class:`GitHubClient` made without a transport uses this one (tests)."""
    token = _transport.set(transport)
    try:
        yield
    finally:
        _transport.reset(token)


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

    @classmethod
    def from_json(cls, data: Any) -> Comment:
        if not isinstance(data, dict) or not isinstance(data.get("id"), int):
            raise GitHubError("GitHub answered with something that is not a comment")
        return cls(id=data["id"], body=str(data.get("body") or ""), url=str(data.get("html_url") or ""))


@dataclass(frozen=True, slots=True)
class Issue:
    """An issue (not a pull request)."""

    number: int
    title: str
    body: str
    url: str
    state: str

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
        )


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
        timeout: float = 30.0,
    ) -> None:
        if repository.count("/") != 1:
            raise GitHubError(f"GITHUB_REPOSITORY is {repository!r}, not OWNER/NAME")
        self.repository = repository
        self.api_url = (api_url or DEFAULT_API_URL).rstrip("/")
        self._home = _origin(httpx.URL(self.api_url))
        self._token = token
        #: What went wrong without stopping a request (a ``next`` link elsewhere): the caller shows them.
        self.warnings: list[str] = []
        self._http = httpx.Client(
            base_url=self.api_url,
            transport=transport or _transport.get(),
            timeout=timeout,
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

    # --- comments ------------------------------------------------------------------------------------------

    def list_comments(self, number: int) -> tuple[list[Comment], bool]:
        """The pull request's comments, oldest first, and whether the list is complete (``MAX_PAGES`` bound)."""
        comments: list[Comment] = []
        url: str | None = f"/repos/{self.repository}/issues/{number}/comments"
        params: dict[str, Any] | None = {"per_page": 100}
        for _ in range(MAX_PAGES):
            assert url is not None
            what = f"read the comments of pull request #{number}"
            response = self._request("GET", url, params=params, what=what)
            data = _json(response, what)
            if not isinstance(data, list):
                raise GitHubError(f"GitHub answered the comments of pull request #{number} with something not a list")
            comments.extend(Comment.from_json(item) for item in data)
            url = response.links.get("next", {}).get("url")
            params = None  # the next link carries them
            if not url:
                return comments, True
            if not self._is_home(url):
                # The token goes with every request: a link to another host would hand it over.
                self.warnings.append(
                    f"GitHub's list of the comments of pull request #{number} links its next page to "
                    f"{_origin_text(url)}, not to the API at {_origin_text(self.api_url)}; the link was not followed "
                    "(the token is only sent to GITHUB_API_URL), so comments on later pages were not read"
                )
                return comments, False
        return comments, False

    def find_comment(self, number: int, mark: str) -> Comment | None:
        """Our comment: the first whose body starts with the marker (a quote of it starts with ``>``)."""
        comments, _ = self.list_comments(number)
        for comment in comments:
            if comment.body.startswith(mark):
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

        Reads at most ``MAX_PAGES`` pages of 100; a ``next`` link to another host is not followed (a warning)."""
        url: str | None = f"/repos/{self.repository}/issues"
        params: dict[str, Any] | None = {"state": "open", "per_page": 100, "sort": "created", "direction": "desc"}
        what = "read the open issues"
        for _ in range(MAX_PAGES):
            assert url is not None
            response = self._request("GET", url, params=params, what=what, permission="issues: write")
            data = _json(response, what)
            if not isinstance(data, list):
                raise GitHubError("GitHub answered the list of issues with something not a list")
            for item in data:
                if isinstance(item, dict) and "pull_request" not in item:
                    issue = Issue.from_json(item)
                    if issue.body.startswith(mark):
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

    # --- the one place requests are made -------------------------------------------------------------------

    def _is_home(self, url: str) -> bool:
        try:
            return _origin(self._http.base_url.join(url)) == self._home
        except httpx.InvalidURL:
            return False

    def _request(
        self, method: str, url: str, *, what: str, permission: str = "pull-requests: write", **kwargs: Any
    ) -> httpx.Response:
        if not self._is_home(url):  # pragma: no cover - list_comments checks its links; this is the last guard
            raise GitHubError(f"refused to send the GitHub token to {_origin_text(url)} to {what}")
        headers = {"Authorization": f"Bearer {self._token.reveal()}"}
        try:
            response = self._http.request(method, url, headers=headers, **kwargs)
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
            data = response.json()
            text = str(data.get("message") or "") if isinstance(data, dict) else ""
        except (ValueError, RecursionError):
            text = response.text[:200]
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


def _json(response: httpx.Response, what: str) -> Any:
    """The answer's JSON; an answer of 200 that is not JSON (an HTML page of a proxy or a login wall, a cut
    answer) is a :class:`GitHubError` saying so, never a crash."""
    try:
        return response.json()
    except (ValueError, RecursionError):
        kind = response.headers.get("content-type", "").split(";")[0].strip() or "no content type"
        raise GitHubError(
            f"GitHub answered {response.status_code} to {what} with something that is not JSON "
            f"({kind}, {len(response.content)} bytes)",
            status=response.status_code,
            hint="Check GITHUB_API_URL: it must be the API's address (GitHub Enterprise Server: https://HOST/api/v3), "
            "not the web site's; a proxy in between may answer with its own page.",
        ) from None


def _fit(body: str) -> str:
    """The body cut to GitHub's limit (callers render to fit; this is the last guard, never a silent refusal)."""
    if len(body) <= COMMENT_LIMIT:
        return body
    note = "\n\n_(cut to fit GitHub's comment size limit)_\n"
    return body[: COMMENT_LIMIT - len(note)] + note
