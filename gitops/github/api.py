"""The GitHub REST API's endpoints, as far as the Action needs them: the one plan comment on a pull request, the one
drift issue (opened or updated while something drifted, closed when nothing has), a file at a commit, deployments.

:class:`GitHubClient` asks them for one repository, through :class:`gitops.github.rest.RestClient` (the token, the
origin it goes to, each request's bounds, error answers worded); here are the endpoints' paths and shapes, and
pagination. The plan comment is found by a hidden marker at the start of its body, so each push edits the same
comment instead of adding one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from gitops.github.rest import (
    ANSWER_CAP,
    PAGE_CAP,
    TIMEOUT,
    TOTAL,
    GitHubError,
    GitHubPermissionError,
    RestClient,
    answer_json,
    origin_text,
    use_transport,
)

__all__ = [
    "ACTIONS_BOT",
    "ANSWER_CAP",
    "COMMENT_LIMIT",
    "MAX_PAGES",
    "PAGE_CAP",
    "PER_PAGE",
    "TIMEOUT",
    "TOTAL",
    "Comment",
    "GitHubClient",
    "GitHubError",
    "GitHubPermissionError",
    "Issue",
    "drift_marker",
    "marker",
    "use_transport",
]

#: GitHub refuses comment bodies longer than this many characters.
COMMENT_LIMIT = 65_536

#: Pages of 100 comments read at most while looking for ours; a pull request with more gets a new comment.
MAX_PAGES = 30
#: Comments asked for per page (GitHub's most).
PER_PAGE = 100


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


class GitHubClient(RestClient):
    """Requests to the GitHub REST API for one repository."""

    #: The login the token writes as, once asked (:meth:`identity`).
    _identity: str | None = None

    # --- files ---------------------------------------------------------------------------------------------

    def file_at(self, path: str, ref: str) -> bytes | None:
        """The raw bytes of the repository's file ``path`` at commit ``ref`` (the contents API), or ``None`` when
        the commit has no such file."""
        try:
            response = self.call(
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
                response = self.call("GET", "/user", what="learn who the token is", permission="")
                data = answer_json(response, "learn who the token is")
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
        response = self.call(
            "POST",
            f"/repos/{self.repository}/issues/{number}/comments",
            json={"body": _fit(body)},
            what=f"comment on pull request #{number}",
        )
        return Comment.from_json(answer_json(response, f"comment on pull request #{number}"))

    def update_comment(self, comment_id: int, body: str) -> Comment:
        response = self.call(
            "PATCH",
            f"/repos/{self.repository}/issues/comments/{comment_id}",
            json={"body": _fit(body)},
            what=f"edit comment {comment_id}",
        )
        return Comment.from_json(answer_json(response, f"edit comment {comment_id}"))

    def get_comment(self, comment_id: int) -> Comment:
        """One comment as it is now (the sections' check before and after a write)."""
        what = f"read comment {comment_id}"
        response = self.call("GET", f"/repos/{self.repository}/issues/comments/{comment_id}", what=what)
        return Comment.from_json(answer_json(response, what))

    def delete_comment(self, comment_id: int) -> None:
        """Delete one of our comments (the second of two that writers created at once)."""
        self.call("DELETE", f"/repos/{self.repository}/issues/comments/{comment_id}", what="delete a comment")

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
            response = self.call("GET", url, params=params, what=what, cap=PAGE_CAP, permission="issues: write")
            data = answer_json(response, what)
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
            if not self.is_home(url):
                self.warnings.append(
                    f"GitHub's list of issues links its next page to {origin_text(url)}, not to the API at "
                    f"{origin_text(self.api_url)}; the link was not followed (the token is only sent to "
                    "GITHUB_API_URL), so issues on later pages were not read"
                )
                return None
        return None

    def create_issue(self, title: str, body: str) -> Issue:
        response = self.call(
            "POST",
            f"/repos/{self.repository}/issues",
            json={"title": title, "body": _fit(body)},
            what="open an issue",
            permission="issues: write",
        )
        return Issue.from_json(answer_json(response, "open an issue"))

    def update_issue(self, number: int, **fields: Any) -> Issue:
        """Edit issue ``number``: ``title``, ``body`` (cut to fit), ``state``, ``state_reason``."""
        if "body" in fields:
            fields["body"] = _fit(fields["body"])
        what = f"edit issue #{number}"
        response = self.call(
            "PATCH", f"/repos/{self.repository}/issues/{number}", json=fields, what=what, permission="issues: write"
        )
        return Issue.from_json(answer_json(response, what))

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
        response = self.call(
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
        data = answer_json(response, what)
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
        self.call(
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
            response = self.call("GET", url, params=params, what=what, cap=PAGE_CAP, permission="deployments: write")
            data = answer_json(response, what)
            if not isinstance(data, list):
                raise GitHubError(f"GitHub answered the list of deployments to {environment} with something not a list")
            for item in data:
                if isinstance(item, dict) and isinstance(item.get("id"), int):
                    yield int(item["id"])
            url = response.links.get("next", {}).get("url")
            params = None
            if not url:
                return
            if not self.is_home(url):
                self.warnings.append(
                    f"GitHub's list of deployments links its next page to {origin_text(url)}, not to the API at "
                    f"{origin_text(self.api_url)}; the link was not followed (the token is only sent to "
                    "GITHUB_API_URL), so older deployments were not read"
                )
                return

    def deployment_state(self, deployment_id: int) -> str | None:
        """The deployment's newest status (``None``: it has none)."""
        what = f"read the state of deployment {deployment_id}"
        response = self.call(
            "GET",
            f"/repos/{self.repository}/deployments/{deployment_id}/statuses",
            params={"per_page": 1},
            what=what,
            permission="deployments: write",
        )
        data = answer_json(response, what)
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
            response = gh.call("GET", url, params=params, what=what, cap=PAGE_CAP)
            data = answer_json(response, what)
            if not isinstance(data, list):
                raise GitHubError(f"GitHub answered the comments of pull request #{number} with something not a list")
            yield [Comment.from_json(item) for item in data]
            url = response.links.get("next", {}).get("url")
            params = None  # the next link carries them
            if not url:
                self.complete = True
                return
            if not gh.is_home(url):
                # The token goes with every request: a link to another host would hand it over.
                gh.warnings.append(
                    f"GitHub's list of the comments of pull request #{number} links its next page to "
                    f"{origin_text(url)}, not to the API at {origin_text(gh.api_url)}; the link was not followed "
                    "(the token is only sent to GITHUB_API_URL), so comments on later pages were not read"
                )
                return


def _fit(body: str) -> str:
    """The body cut to GitHub's limit (callers render to fit; this is the last guard, never a silent refusal)."""
    if len(body) <= COMMENT_LIMIT:
        return body
    note = "\n\n_(cut to fit GitHub's comment size limit)_\n"
    return body[: COMMENT_LIMIT - len(note)] + note
