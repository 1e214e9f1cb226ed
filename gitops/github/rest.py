"""Requests to the GitHub REST API: the one place the GitHub token is sent from, and how each request is bounded.

:class:`RestClient` holds the base URL (``GITHUB_API_URL``, so GitHub Enterprise Server works), the token (a
:class:`~gitops.secrets.Secret`, never printed), sends it to that origin only, and turns error answers into
:class:`GitHubError` messages that say what to change in the workflow. Every answer is read as the game service's
are (:func:`gitops.edges.http.send_bounded`): with a byte cap (:data:`PAGE_CAP`, :data:`ANSWER_CAP`) and a deadline
per request and for them all, so that a hostile or broken GitHub (an endless answer, a gzip bomb, one byte a second,
silence) ends in a :class:`GitHubError` in bounded time and memory, which the Action shows as a warning.

Tests hand the client an ``httpx.MockTransport``; :func:`use_transport` does the same for a whole in-process run
of ``gitops action`` (the game service keeps its own transport), and may shorten the deadlines. The endpoints the
Action uses are :class:`gitops.github.api.GitHubClient`'s.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Self

import httpx

from gitops import __version__
from gitops.edges.http import AnswerTooLarge, DeadlinePassed, UnreadableJSON, parse_json, send_bounded
from gitops.edges.service.failures import transport_detail
from gitops.errors import GitopsError
from gitops.secrets import Secret, redact

DEFAULT_API_URL = "https://api.github.com"

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


class RestClient:
    """Bounded requests to one repository's GitHub API with one token; :attr:`warnings` collects what went wrong
    without stopping a request, for the caller to show."""

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
        self._http = httpx.Client(
            base_url=self.api_url,
            transport=transport or seam.transport,
            headers={
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": f"screeps-gitops/{__version__}",
            },
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def is_home(self, url: str) -> bool:
        """Whether ``url`` (relative, or absolute as a ``next`` link is) goes to the API's own scheme, host and port."""
        try:
            return _origin(self._http.base_url.join(url)) == self._home
        except httpx.InvalidURL:
            return False

    def call(
        self,
        method: str,
        url: str,
        *,
        what: str,
        cap: int = ANSWER_CAP,
        permission: str = "pull-requests: write",
        **kwargs: Any,
    ) -> httpx.Response:
        """One request with the token, bounded; the answer when it succeeded, else :class:`GitHubError` (``what``:
        what the request was for, in the message; ``permission``: what the workflow must grant, in a refusal's)."""
        if not self.is_home(url):  # pragma: no cover - list_comments checks its links; this is the last guard
            raise GitHubError(f"refused to send the GitHub token to {origin_text(url)} to {what}")
        headers = {**kwargs.pop("headers", {}), "Authorization": f"Bearer {self._token.reveal()}"}
        started = time.monotonic()
        deadline = min(started + self._timeout, self._ends)
        try:
            request = self._http.build_request(method, url, headers=headers, **kwargs)
            response = send_bounded(self._http, request, cap=cap, deadline=deadline)
        except AnswerTooLarge as exc:
            raise GitHubError(
                f"GitHub sent more than {_size(exc.cap)} in answer to {what}, the most the tool reads",
                hint=NOT_THE_API,
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


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    """Scheme, host and port (the default port made explicit): where a request, and its token, goes."""
    port = url.port or {"https": 443, "http": 80}.get(url.scheme)
    return url.scheme, url.host, port


def origin_text(url: str) -> str:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return "an address that is not a URL"
    return redact(f"{parsed.scheme}://{parsed.netloc.decode('ascii', 'replace')}")


#: Why an answer may not be GitHub's API at all.
NOT_THE_API = (
    "Check GITHUB_API_URL: it must be the API's address (GitHub Enterprise Server: https://HOST/api/v3), "
    "not the web site's; a proxy in between may answer with its own page."
)


def answer_json(response: httpx.Response, what: str) -> Any:
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
            hint=NOT_THE_API,
        ) from None


def _size(cap: int) -> str:
    return f"{cap // _MIB} MiB" if cap % _MIB == 0 else f"{cap} bytes"
