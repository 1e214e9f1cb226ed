"""The Markdown of a run's :class:`~gitops.app.ci.report.Report` (what the Action found out): the job summary and the
pull request's plan comment.

The Markdown is cut to GitHub's limits (a summary's bytes, a comment's characters), the plan's diffs first; it is
redacted, because a comment is not masked by GitHub as a log is, and a diff may show a module holding a credential.
A comment that cannot be posted is a warning, never the reason a step fails.
"""

from __future__ import annotations

from typing import Literal

from gitops.app.ci.report import Report
from gitops.errors import BudgetError
from gitops.github.api import COMMENT_LIMIT, GitHubClient, GitHubError, GitHubPermissionError, marker
from gitops.github.runner import Echo, PullRequest, Runner, annotation, write_outputs
from gitops.github.sections import upsert_sections
from gitops.render.drift import render_markdown as render_drift
from gitops.render.outcome import markdown_sections
from gitops.render.plan import md_code, md_fence, render_markdown
from gitops.render.rehearsal import markdown as rehearsal_markdown
from gitops.secrets import Secret, redact

#: GitHub's limit of one step's job summary (bytes), with room for what other steps of the same step append.
SUMMARY_LIMIT_BYTES = 1024 * 1024 - 4096


#: Characters kept free in the comment for the marker and footer estimate errors.
COMMENT_MARGIN = 512


#: The most characters of the comment's rehearsal section (a table row and chart per branch: a few thousand for a
#: manifest of a few branches); the plan's section gets the rest of GitHub's limit.
REHEARSAL_CHARS = 16_000
#: Characters a section's two hidden markers and their line breaks take, at most.
SECTION_MARKERS = 96


#: An error message longer than this is cut in the summary and comment (the log has all of it).
_ERROR_CHARS = 8000


def write_files(runner: Runner, report: Report) -> None:
    """The job summary, then the outputs."""
    write_summary(runner, report)
    if runner.output is not None:
        write_outputs(runner.output, report.outputs())


def write_summary(runner: Runner, report: Report) -> None:
    """Append the run's Markdown to the job summary, within what the summary has left of GitHub's limit."""
    if runner.summary is not None:
        used = runner.summary.stat().st_size if runner.summary.exists() else 0
        text = document(report, runner, limit=SUMMARY_LIMIT_BYTES - used, unit="bytes")
        with runner.summary.open("a", encoding="utf-8") as fh:
            fh.write(text)


def post_comment(runner: Runner, report: Report, pr: PullRequest, *, echo: Echo, github_token: str) -> None:
    """The one plan comment of the pull request, posted or edited in place (found by its marker)."""
    if not github_token:
        echo(
            annotation(
                "warning", "comment is true but the github-token input is empty; the plan is only in the job summary."
            )
        )
        return
    mark = marker(report.manifest)
    sections = comment_sections(report, runner, limit=COMMENT_LIMIT - len(mark) - COMMENT_MARGIN)
    gh: GitHubClient | None = None
    try:
        with GitHubClient(Secret(github_token), runner.repository, api_url=runner.api_url) as gh:
            comment, what = upsert_sections(gh, pr.number, mark, sections)
    except GitHubPermissionError as exc:
        fork = " (a fork's pull request gets a read-only token)" if pr.from_fork else ""
        echo(annotation("warning", f"the plan comment was not posted{fork}: {exc}"))
        return
    except GitHubError as exc:
        echo(annotation("warning", f"the plan comment was not posted: {exc}"))
        return
    finally:
        for warning in dict.fromkeys(gh.warnings if gh is not None else []):  # a page read twice warns once
            echo(annotation("warning", warning))
    report.comment_url = comment.url
    echo(f"Plan comment {what} on pull request #{pr.number}: {comment.url}")


def comment_sections(report: Report, runner: Runner, *, limit: int) -> dict[str, str]:
    """The sections of the pull request's one comment this run writes (:mod:`gitops.github.sections`): the plan's
    (``plan``, ``apply``, and a rehearsal that planned too), the rehearsal's (``rehearse``, ``comment``). The plan's
    gets what the rehearsal's may take (:data:`REHEARSAL_CHARS`) leaves of ``limit`` characters."""
    sections: dict[str, str] = {}
    if report.command in ("rehearse", "comment"):
        sections["rehearsal"] = rehearsal_section(report, runner)
    if report.command != "comment" and (report.command != "rehearse" or report.plan is not None):
        # Room for the rehearsal's section always: another job may have written it, and it is kept.
        room = limit - REHEARSAL_CHARS - SECTION_MARKERS * 2
        sections["plan"] = document(report, runner, limit=room, unit="chars", rehearsal=False)
    return sections


def rehearsal_section(report: Report, runner: Runner) -> str:
    """The rehearsal's section of the comment: its table and charts, the error that stopped it, the footer; at
    most :data:`REHEARSAL_CHARS` characters (the charts are left out first, then the text is cut)."""
    parts: list[str] = []
    r = report.rehearsal
    if r is not None:
        parts.append(rehearsal_markdown(r.branches, r.result, r.ticks, r.head_source, r.base_source).rstrip("\n"))
    elif report.error is None:
        parts.append("### Rehearsal\n\nNo rehearsal result.")
    if report.error is not None:
        parts += [_error_block(report)]
    parts.append(_footer(report, runner))
    text = redact("\n\n".join(parts))
    if len(text) > REHEARSAL_CHARS:
        note = "\n\n_(cut to fit the comment; the job summary has all of it)_"
        text = text[: REHEARSAL_CHARS - len(note)].rsplit("\n", 1)[0] + note
        if text.count("```") % 2:  # a fence cut open would swallow what follows
            text += "\n```"
    return text


def document(
    report: Report, runner: Runner, *, limit: int, unit: Literal["bytes", "chars"], rehearsal: bool = True
) -> str:
    """The Markdown of a run: notices, the plan (table first, diffs folded), apply outcomes, the rehearsal (unless
    ``rehearsal`` is false: the comment gives it a section of its own), error, footer, within ``limit`` characters
    or UTF-8 bytes (the plan's diffs are cut first, with a note). Redacted: a diff may show a server's module that
    holds a credential, and a comment body is not masked by GitHub as logs are."""
    return redact(_document(report, runner, limit=limit, unit=unit, rehearsal=rehearsal))


def _error_block(report: Report) -> str:
    message = redact(str(report.error))
    if len(message) > _ERROR_CHARS:
        message = message[:_ERROR_CHARS] + "\n... (cut; the job log has all of it)"
    return f"**{_verdict(report)}** (exit code {report.exit_code}):\n\n" + md_fence(message, "text")


def _document(report: Report, runner: Runner, *, limit: int, unit: Literal["bytes", "chars"], rehearsal: bool) -> str:
    def measure(text: str) -> int:
        return len(text.encode("utf-8")) if unit == "bytes" else len(text)

    title = f"screeps-gitops {report.command}" + (
        f" ({md_code(report.manifest)})" if report.manifest not in ("", "gitops.yaml") else ""
    )
    head = "".join(f"> [!NOTE]\n> {line}\n\n" for line in report.notices) + _servers_markdown(report)
    tail: list[str] = []
    tail.extend(markdown_sections(report.outcomes, report.verifications, report.health()))
    if report.rehearsal is not None and rehearsal:
        r = report.rehearsal
        tail.extend(["", rehearsal_markdown(r.branches, r.result, r.ticks, r.head_source, r.base_source).rstrip("\n")])
    if report.error is not None and (rehearsal or report.command not in ("rehearse", "comment")):
        tail.extend(["", _error_block(report)])
    footer = _footer(report, runner)
    tail.extend(["", footer, ""])
    rest = "\n".join(tail)
    if report.drift is not None:
        return head + render_drift(report.drift, title=title) + rest
    if report.plan is None:
        return f"{head}### {title}\n" + rest
    now = report.plan.created_at
    room = limit - measure(head) - measure(rest)
    text = render_markdown(report.plan, now=now, max_chars=max(room, 1000), title=title)
    for _ in range(8):  # characters are not bytes: shrink until the bytes fit too
        if measure(text) <= room or room <= 1000:
            break
        room_chars = int(len(text) * room / measure(text)) - 64
        text = render_markdown(report.plan, now=now, max_chars=max(room_chars, 1000), title=title)
    return head + text + rest


def _servers_markdown(report: Report) -> str:
    """Each server's url and what the pull request changes of the credential routes and builds: a url change is
    seen in review, where the plan's table alone would not show it."""
    if not report.servers:
        return ""
    lines = ["| server | url |", "|---|---|"]
    lines += [f"| {md_code(name)} | {_url_cell(report, name, url)} |" for name, url in sorted(report.servers.items())]
    if report.route_changes:
        lines += ["", "> [!WARNING]", "> This pull request changes where credentials go or what a build runs:"]
        lines += [f"> - {md_code(change.text())}" for change in report.route_changes]
    elif report.routes_unknown:
        lines += ["", f"Not compared with the base branch's manifest: {md_code(report.routes_unknown)}."]
    else:
        lines += ["", "Servers, credential variables and builds: unchanged from the base branch's manifest."]
    return "\n".join(lines) + "\n\n"


def _url_cell(report: Report, name: str, url: str) -> str:
    """The server's url, and what it was on the base branch when the pull request moves it (or adds the server):
    the reviewer reads both where the url is, not only in the list of changes below."""
    for change in report.route_changes:
        if change.what == f"server '{name}' url":
            was = "not set" if change.before is None else md_code(change.before, table=True)
            return f"{md_code(url, table=True)} (was {was})"
        if change.what == f"server '{name}'" and change.before is None:
            return f"{md_code(url, table=True)} (new in this pull request)"
    return md_code(url, table=True)


def _verdict(report: Report) -> str:
    if isinstance(report.error, BudgetError) and report.plan is not None:
        return "The plan does not fit the token's rate limits; a deploy now would be refused"
    if report.command == "apply":
        return "Apply failed"
    if report.command == "drift":
        return "The drift check failed"
    if report.command in ("rehearse", "comment"):
        return "The rehearsal failed"
    return "Planning failed"


def _footer(report: Report, runner: Runner) -> str:
    parts = ["screeps-gitops"]
    pr = runner.pull_request
    if pr is not None and pr.head_sha:
        parts.append(f"for commit {pr.head_sha[:7]}")
    elif runner.sha:
        parts.append(f"for commit {runner.sha[:7]}")
    if report.plan is not None:
        parts.append(f"refresh: {report.plan.refresh}")
    if runner.run_url:
        parts.append(f"[workflow run]({runner.run_url})")
    return "<sub>" + " · ".join(parts) + "</sub>"


__all__ = [
    "COMMENT_MARGIN",
    "REHEARSAL_CHARS",
    "SECTION_MARKERS",
    "SUMMARY_LIMIT_BYTES",
    "Report",
    "comment_sections",
    "document",
    "post_comment",
    "rehearsal_section",
    "write_files",
    "write_summary",
]
