"""The drift issue: one issue, found by its marker, opened or updated while something drifted and closed when
nothing has (``command: drift`` with ``drift-issue: true``).

Problems with the issue are warnings: the drift report stays in the job summary and the outputs.
"""

from __future__ import annotations

from gitops.app.ci.report import Report
from gitops.github.api import COMMENT_LIMIT, GitHubClient, GitHubError, drift_marker
from gitops.github.report import COMMENT_MARGIN, document
from gitops.github.runner import Echo, Runner, annotation
from gitops.secrets import Secret

#: The drift issue's title.
DRIFT_ISSUE_TITLE = "Screeps code changed outside Git"


def update_drift_issue(runner: Runner, report: Report, *, echo: Echo, github_token: str) -> None:
    """Open or update the one drift issue while something drifted; close it when nothing has. Problems are
    warnings: the report stays in the job summary and the outputs."""
    if not github_token:
        echo(annotation("warning", "drift-issue is true but the github-token input is empty; no issue was touched."))
        return
    mark = drift_marker(report.manifest)
    body = mark + "\n" + document(report, runner, limit=COMMENT_LIMIT - len(mark) - 1 - COMMENT_MARGIN, unit="chars")
    title = DRIFT_ISSUE_TITLE + (f" ({report.manifest})" if report.manifest not in ("", "gitops.yaml") else "")
    gh: GitHubClient | None = None
    try:
        with GitHubClient(Secret(github_token), runner.repository, api_url=runner.api_url) as gh:
            if report.drift is not None and report.drift.has_drift:  # the step calls it with a drift report
                issue, what = gh.upsert_issue(mark, title, body)
                report.issue_url = issue.url
                echo(f"Drift issue {what}: #{issue.number} {issue.url}")
            else:
                closed = gh.close_issue(mark, body)
                if closed is not None:
                    report.issue_url = closed.url
                    echo(f"Drift issue closed: #{closed.number} {closed.url} (nothing has drifted)")
    except GitHubError as exc:
        echo(annotation("warning", f"the drift issue was not updated: {exc}"))
    finally:
        for warning in gh.warnings if gh is not None else []:
            echo(annotation("warning", warning))
