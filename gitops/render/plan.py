"""Renderers of a plan: terminal text, Markdown (pull requests, job summaries) and JSON (machines).

All three read the same :class:`gitops.core.plan.Plan`, so a terminal, a pull request and a script cannot be
told different things; none does I/O. Every text from a server or a file is made inert before it is styled. The
JSON document is versioned by ``format_version`` and documented in docs/commands.md ("The plan explained").
"""

from __future__ import annotations

import dataclasses
import html
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import click

from gitops.core.budget import EndpointBudget, utc
from gitops.core.deploys import UnsettledDeploy
from gitops.core.diff import ModuleChange
from gitops.core.driftfinding import Drift
from gitops.core.endpoints import ACTIVATE, GLOBAL_KEY, UPLOAD, Limit, path_of
from gitops.core.plan import BranchPlan, Plan, VerifyStep
from gitops.core.planlines import NOT_CHECKED, age, no_changes_line
from gitops.inert import BIDI_CONTROLS, inert, shown

JSON_FORMAT_VERSION = 1

Style = Callable[..., str]

_SIGNS = {"added": "+", "changed": "~", "removed": "-", "kept": "="}
_COLOURS = {"added": "green", "changed": "yellow", "removed": "red", "kept": "cyan"}
_ACTIONS = {
    "create": "create (clone-branch with the modules)",
    "update": "update (upload)",
    "activate": "activate only",
    "none": "no changes",
}


def printable(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (``\\udc80``), everything else unchanged.

    A server may hold module names and texts that are not valid Unicode (JSON allows ``"\\udc80"``); the plan shows
    them, and standard output, UTF-8 with strict errors, cannot encode a lone surrogate.
    """
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def size(n: int | None) -> str:
    """``812 B``, ``4.2 kB``, ``1.3 MB`` (decimal units, as file managers show)."""
    if n is None:
        return "-"
    if n < 1000:
        return f"{n} B"
    if n < 1_000_000:
        return f"{n / 1000:.1f} kB"
    return f"{n / 1_000_000:.2f} MB"


def seen_text(branch: BranchPlan, now: float) -> str:
    """What the plan's statement about the branch rests on, and how old it is: verified now (a download, the
    server's branch list) or taken from a record this run did not check, which says so."""
    remote = branch.remote
    if remote.how == "unknown" or remote.learnt_at is None:
        return "server state unknown (nothing downloaded, nothing in the ledger)"
    when = age(now - remote.learnt_at)
    checked = age(now - (remote.checked_at if remote.checked_at is not None else remote.learnt_at))
    if remote.exists is False:
        if remote.verified:
            return f"the branch does not exist on the server (checked {checked})"
        return f"the branch did not exist on the server {when} (this tool's record; {NOT_CHECKED})"
    if remote.basis == "branch-list":
        return {
            "download": f"read from the server's branch list {checked}",
            "own-upload": f"this tool's own upload {when}, confirmed unchanged by the server's branch list {checked}",
            "ledger": f"from the ledger, learnt {when}, confirmed unchanged by the server's branch list {checked}",
        }.get(remote.how, f"confirmed by the server's branch list {checked}")
    return {
        "download": f"downloaded {when}",
        "own-upload": f"from this tool's own upload {when} ({NOT_CHECKED})",
        "ledger": f"from the ledger, learnt {when} ({NOT_CHECKED})",
    }[remote.how]


#: Module names shown per drifted branch in Markdown (job summaries, comments, issues have size limits).
MARKDOWN_DRIFT_NAMES = 50


def drift_text(drift: Drift, now: float, *, limit: int | None = None) -> str:
    """``changed outside Git since this tool applied it 3 h ago (commit 1a2b3c4d5e6f): ~ main, + hack``."""
    when = "" if drift.applied_at is None else f" {age(now - drift.applied_at)}"
    commit = f" (commit {drift.commit[:12]})" if drift.commit else ""
    also = f", and not the repository's code either ({drift.repository})" if drift.repository else ""
    return f"changed outside Git since this tool applied it{when}{commit}{also}: {drift.modules_text(limit)}"


def drift_document(drift: Drift | None, now: float) -> dict[str, Any]:
    """The drift fields of a branch in the JSON documents of ``plan`` and ``drift``."""
    if drift is None:
        return {"drift": None, "drift_status": None, "changed_outside_git": None, "last_applied": None}
    return {
        "drift": {"drifted": True, "none": False}.get(drift.status),
        "drift_status": drift.status,
        "changed_outside_git": {
            "added": list(drift.added),
            "changed": list(drift.changed),
            "removed": list(drift.removed),
            "branch_deleted": drift.missing,
        },
        "last_applied": None
        if drift.applied_at is None
        else {
            "at": drift.applied_at,
            "age_seconds": max(0.0, now - drift.applied_at),
            "how": drift.applied_how,
            "commit": drift.commit,
        },
        "compared_with_repository": drift.repository,
        "equals_repository": drift.equals_repository,
    }


def _module_line(entry: ModuleChange) -> str:
    sizes = {
        "added": size(entry.new_size),
        "removed": size(entry.old_size),
        "kept": size(entry.old_size),
        "changed": f"{size(entry.old_size)} -> {size(entry.new_size)}",
    }[entry.change]
    kind = " (binary)" if entry.binary else ""
    line = f"{_SIGNS[entry.change]} {entry.name}  {sizes}{kind}"
    if entry.change == "changed" and entry.diff is None:
        line += f"  sha256 {(entry.old_digest or '')[:12]} -> {(entry.new_digest or '')[:12]}"
    return line


NOT_LIMITED = "not rate limited (password login; only token requests count against limits)"


def budget_row_text(row: EndpointBudget) -> str:
    limit = Limit(row.endpoint, row.limit, row.period)
    name = "all requests" if row.endpoint == GLOBAL_KEY else row.endpoint
    if row.source == "unlimited":
        left = f"unlimited until {utc(row.reset or 0)}"
    elif row.remaining is None:
        left = f"remaining unknown (at most {row.limit})"
    elif row.estimate:
        # Not from the server's headers of this window: requests made elsewhere with the token are not in it.
        left = f"~{row.remaining} left, estimated from this tool's own requests"
    elif row.remaining >= row.limit:
        left = f"{row.remaining} left"  # the window has not started: nothing counted yet
    else:
        left = f"{row.remaining} left, resets {utc(row.reset or 0)}"
    reserve = f", {row.reserve} reserved" if row.reserve else ""
    verdict = "ok" if row.fits else "DOES NOT FIT"
    paced = " (paced)" if row.endpoint == GLOBAL_KEY else ""
    needs = f"needs {row.needed}"
    if row.for_rollback:
        what = "upload(s)" if row.endpoint == UPLOAD else "activation(s)" if row.endpoint == ACTIVATE else "request(s)"
        needs = f"needs {row.needed - row.for_rollback} {what}, plus {row.for_rollback} reserved for rollback,"
    return f"{name}: {needs}{paced} of {limit.describe()}; {left}{reserve} -> {verdict}"


#: At a terminal, at most this many module lines per branch, and this many diff lines per branch, unless ``--full``:
#: a plan of 2,000 new modules is a summary and a sample, not 2,000 lines before apply's question.
TEXT_MODULE_LINES = 20
TEXT_DIFF_LINES = 40


def render_text(plan: Plan, *, now: float, color: bool = False, full: bool = False) -> str:
    """The plan for a person at a terminal (``color`` only when stdout is one); per branch its counts and sizes,
    then at most :data:`TEXT_MODULE_LINES` module lines and :data:`TEXT_DIFF_LINES` diff lines, the rest counted
    (``full``: all of them; the JSON always has all)."""

    def style(text: str, *, indent: str = "", **kw: Any) -> str:
        shown = inert(text, one_line=True)
        return _Styled(indent + (click.style(shown, **kw) if color else shown))

    # Names, messages and diff lines come from servers and files: each line is made inert (gitops.inert) before
    # it is styled, so that only the colours added here reach the terminal as escape sequences.
    out = _InertLines()
    out.append(f"Plan from {_source_text(plan.source)}, manifest {plan.manifest_path}, refresh={plan.refresh}")
    for warning in plan.warnings:
        out.append(style(f"warning: {warning}", fg="yellow"))
    for failure in plan.failed:
        out.append("")
        out.append(style(f"{failure.server}: FAILED (exit {failure.exit_code}), not planned", bold=True, fg="red"))
        out.append(f"  branches: {', '.join(failure.branches)}")
        out.extend(f"  {line}" for line in failure.message.splitlines())
    for note in plan.unsettled:
        out.append("")
        out.append(style(note.line(), bold=True, fg="red"))
    for branch in plan.branches:
        out.append("")
        head = f"{branch.label}: {_ACTIONS[branch.action]}"
        out.append(style(head, bold=True, fg=None if branch.action == "none" else "cyan"))
        out.append(f"  server view: {seen_text(branch, now)}")
        if branch.drift is not None and branch.drift.drifted:
            out.append(style(f"  drift: {drift_text(branch.drift, now)}", fg="red", bold=True))
        counts = {c: len(branch.names(c)) for c in ("added", "changed", "removed", "kept")}
        sent = f"; {branch.upload_length:,} characters to send" if branch.writes_code else ""
        out.append(
            f"  modules: {counts['added']} added, {counts['changed']} changed, {counts['removed']} removed, "
            f"{branch.unchanged} unchanged" + (f", {counts['kept']} kept" if counts["kept"] else "") + sent
        )
        if branch.ignored:
            out.append(f"  {ignored_text(branch)}")
        shown_modules = shown_diff = hidden_diff = 0
        for entry in branch.modules:
            if not full and shown_modules >= TEXT_MODULE_LINES:
                break
            shown_modules += 1
            out.append(style(_module_line(entry), indent="  ", fg=_COLOURS[entry.change]))
            if entry.note:
                out.append(f"      ({entry.note})")
            if entry.diff:
                for line in entry.diff.splitlines():
                    if not full and shown_diff >= TEXT_DIFF_LINES:
                        hidden_diff += 1
                        continue
                    shown_diff += 1
                    fg = "green" if line.startswith("+") else "red" if line.startswith("-") else None
                    out.append(style(line, indent="      ", fg=fg))
        rest = len(branch.modules) - shown_modules
        if hidden_diff:
            out.append(f"      ... and {hidden_diff} more diff line(s): --full shows all")
        if rest > 0:
            out.append(f"  ... and {rest} more module(s): --full shows all")
        for which in branch.activate:
            out.append(f"  activate for {which}")
        if branch.steps:
            out.append("  requests: " + ", ".join(s.describe() for s in branch.steps))
        if branch.verify is not None:
            out.append("  " + branch.verify.describe())
    if plan.budget or plan.not_rate_limited:
        out.append("")
        out.append(style("Budget", bold=True))
        for row in plan.budget:
            line = f"  {row.server}: {budget_row_text(row)}"
            out.append(line if row.fits else style(line, fg="red", bold=True))
        out.extend(f"  {server}: {NOT_LIMITED}" for server in plan.not_rate_limited)
    out.append("")
    out.append(summary_line(plan, now=now))
    return printable("\n".join(out) + "\n")


class _Styled(str):
    """A line :func:`render_text` made inert and then styled: :class:`_InertLines` keeps it as it is."""

    __slots__ = ()


class _InertLines(list[str]):
    """The lines of a text rendering: each one not already :class:`_Styled` is made inert as it is added."""

    def append(self, line: str) -> None:
        super().append(line if isinstance(line, _Styled) else inert(line, one_line=True))

    def extend(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.append(line)


def _source_text(source: Mapping[str, Any]) -> str:
    """Where the plan's code came from: ``git ref main (1a2b3c4d5e6f)``, ``code set FILE (1a2b3c4d5e6f)`` (a build
    job's file, ``--codeset``) or ``working tree``."""
    commit = str(source.get("commit") or "")[:12]
    if source.get("kind") == "ref":
        return f"git ref {source.get('ref')} ({commit})"
    if source.get("kind") == "codeset":
        return f"code set {source.get('ref')} ({commit or 'no commit'})"
    if source.get("kind") == "rollback":
        return f"the code kept for {source.get('ref')} (commit {commit or 'unknown'})"
    return "working tree" + (" (uncommitted changes)" if source.get("dirty") else "")


def summary_line(plan: Plan, *, now: float) -> str:
    """The plan's last line. "No changes: the servers hold what the repository holds" only when every branch was
    verified on the server in this run; otherwise what the statement rests on."""
    changed = [b for b in plan.branches if b.has_changes]
    unchecked = [b for b in plan.branches if not b.remote.verified]
    label = f" ({len(unchecked)} branch(es) {NOT_CHECKED})" if unchecked else ""
    failed = ""
    if plan.failed:
        failed = f" {len(plan.failed)} server(s) failed: {', '.join(f.server for f in plan.failed)}."
    if not changed:
        if failed:
            return f"No changes on the servers that answered{label}." + failed
        if plan.unsettled:
            labels = ", ".join(n.label for n in plan.unsettled)
            return f"Nothing new to deploy, but the last deploy is unverified or failing on {labels} (exit 12)."
        return no_changes_line(plan, now=now, head="No changes")
    line = f"Plan: {len(changed)} of {len(plan.branches)} branch(es) to change, {plan.uploads_needed} upload(s) needed"
    created = [b for b in changed if b.action == "create" and not any(s.kind == "upload" for s in b.steps)]
    if created:
        # A new branch gets its modules in the clone-branch request itself, which counts against no upload limit:
        # "0 upload(s)" beside modules to send read as a contradiction (issue 41).
        failed = f" {len(created)} new branch(es) get their modules by clone-branch, not an upload." + failed
    return line + label + "." + failed


def plan_document(plan: Plan, *, now: float) -> dict[str, Any]:
    """The documented JSON document of ``gitops plan --json`` (no module content)."""
    return {
        "format_version": JSON_FORMAT_VERSION,
        "has_changes": plan.has_changes,
        "verified": all(b.remote.verified for b in plan.branches),
        "uploads_needed": plan.uploads_needed,
        "fits_budget": plan.fits_budget,
        "created_at": plan.created_at,
        "manifest": plan.manifest_path,
        "source": plan.source,
        "refresh": plan.refresh,
        "branches": [
            {
                "server": b.server,
                "branch": b.branch,
                "action": b.action,
                "added": b.names("added"),
                "changed": b.names("changed"),
                "removed": b.names("removed"),
                "kept": b.names("kept"),
                "unchanged": b.unchanged,
                "activate": list(b.activate),
                "requests": [s.request for s in b.steps],
                "module_count": b.module_count,
                "upload_length": b.upload_length,
                "remote": {
                    "how": b.remote.how,
                    "verified": b.remote.verified,
                    "basis": b.remote.basis,
                    "checked_at": b.remote.checked_at,
                    "exists": b.remote.exists,
                    "learnt_at": b.remote.learnt_at,
                    "age_seconds": None if b.remote.learnt_at is None else max(0.0, now - b.remote.learnt_at),
                },
                **({"ignored": list(b.ignored)} if b.ignored else {}),
                **drift_document(b.drift, now),
                **({} if b.verify is None else {"verify": _flat(b.verify)}),
            }
            for b in plan.branches
        ],
        "budget": [_flat(row) for row in plan.budget],
        "not_rate_limited": list(plan.not_rate_limited),
        "warnings": list(plan.warnings),
        "failed": [
            {"server": f.server, "branches": list(f.branches), "error": f.message, "exit_code": f.exit_code}
            for f in plan.failed
        ],
        "unsettled": [unsettled_document(n) for n in plan.unsettled],
    }


def unsettled_document(note: UnsettledDeploy) -> dict[str, Any]:
    """One unverified or failing deploy in JSON (``plan``, ``apply``, ``drift``, ``status``)."""
    return {
        "server": note.server,
        "branch": note.branch,
        "state": note.state,
        "reason": note.reason,
        "commit": note.commit,
        "applied_at": note.applied_at,
        "undo": note.undo,
    }


_FIELDS: dict[type, tuple[str, ...]] = {}


def _flat(row: EndpointBudget | VerifyStep) -> dict[str, Any]:
    """The fields of a flat record (no nested dataclass) in declaration order, lists copied: what
    ``dataclasses.asdict`` gives, a tenth of its cost (it deep-copies every value)."""
    names = _FIELDS.get(type(row))
    if names is None:
        names = _FIELDS[type(row)] = tuple(f.name for f in dataclasses.fields(row))
    values = ((name, getattr(row, name)) for name in names)
    return {name: list(value) if isinstance(value, list) else value for name, value in values}


def render_json(plan: Plan, *, now: float) -> str:
    return json.dumps(plan_document(plan, now=now), indent=2, sort_keys=False) + "\n"


# --- Markdown that stays inert ----------------------------------------------------------------------------------
#
# Names (servers, branches, modules) and server-provided text reach the job summary and the pull request comment,
# where a newline could start a heading, a backtick end a code span, a `|` split a table cell, `<details>` open HTML
# and `@name` notify someone. Names are shown as code (GitHub links no mention and reads no Markdown there), prose is
# backslash-escaped, and line breaks and other control characters are shown as escapes (`\n`) in both; a fenced
# block (a diff, a log) keeps its line breaks and shows the other control characters so.

#: What is shown as an escape: the characters the text output's neutraliser escapes (its bidirectional controls
#: included, so that ``\u202etxt.js`` reads the same in a comment as in a terminal), and the backslash that begins
#: an escape.
_INVISIBLE = re.compile(rf"[\x00-\x1f\x7f-\x9f\u2028\u2029{BIDI_CONTROLS}\\]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}
#: What Markdown reads within a line (emphasis, links, images, HTML, entities, tables, strike-through, headings).
_PUNCTUATION = re.compile(r"([\\`*_\[\]<>&!~|#])")
_MENTION = re.compile(r"@[A-Za-z0-9][A-Za-z0-9_/-]*")


def _visible(text: str) -> str:
    """``text`` on one line: line breaks, control characters and backslashes as escapes (``\\n``, ``\\x07``)."""
    return _INVISIBLE.sub(lambda m: _ESCAPES.get(m.group(), f"\\u{ord(m.group()):04x}"), text)


def md_code(text: str, *, table: bool = False) -> str:
    """``text`` as an inline code span that no character of it can end or turn into Markdown or HTML.

    The fence is one backtick longer than the longest run of backticks in the text, padded with a space where the
    text starts or ends with a backtick or a space (CommonMark strips one space on each side). In a table cell
    ``table=True`` escapes ``|``: GitHub splits cells before it reads code spans (and drops the backslash).
    """
    shown = _visible(text)
    longest = max((len(run) for run in re.findall(r"`+", shown)), default=0)
    fence = "`" * (longest + 1)
    if shown[:1] in ("`", " ") or shown[-1:] in ("`", " ") or not shown:
        shown = f" {shown} "
    if table:
        shown = shown.replace("|", "\\|")
    return f"{fence}{shown}{fence}"


def md_text(text: str) -> str:
    """Prose with every Markdown character backslash-escaped, on one line, and ``@name`` shown as code: GitHub
    links a mention in any text, escaped or not, but never in code."""
    parts: list[str] = []
    pos = 0
    for m in _MENTION.finditer(text):
        parts.append(_PUNCTUATION.sub(r"\\\1", _visible(text[pos : m.start()])))
        parts.append(md_code(m.group()))
        pos = m.end()
    parts.append(_PUNCTUATION.sub(r"\\\1", _visible(text[pos:])))
    return "".join(parts)


def _html_code(text: str) -> str:
    """``text`` inside an HTML ``<code>`` (within ``<details>``): escaped for HTML, on one line."""
    return "<code>" + html.escape(_visible(text)) + "</code>"


def md_fence(text: str, info: str = "diff") -> str:
    """``text`` as a fenced code block no line of it can end, its control characters shown as escapes as the text
    output shows them (a diff or a game's error text may hold a bidirectional override)."""
    text = shown(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{text}\n{ticks}"


def render_markdown(plan: Plan, *, now: float, max_chars: int | None = None, title: str = "screeps-gitops plan") -> str:
    """Markdown: a summary table first, then each branch with its module diffs folded in ``<details>``.

    With ``max_chars`` the text is cut to fit (GitHub: 1 MiB job summaries, 65,536-character comments): the
    diffs go first, then whole branch sections, and a note says so.
    """
    head: list[str] = [f"### {title}", ""]
    head.append(md_text(summary_line(plan, now=now)))
    head.append("")
    head.append("| server | branch | action | added | changed | removed | requests | server view |")
    head.append("|---|---|---|---:|---:|---:|---|---|")
    for b in plan.branches:
        requests = ", ".join(path_of(s.request).rsplit("/", 1)[-1] for s in b.steps) or "-"
        head.append(
            f"| {md_code(b.server, table=True)} | {md_code(b.branch, table=True)} | {b.action} | "
            f"{len(b.names('added'))} | {len(b.names('changed'))} | {len(b.names('removed'))} | {md_text(requests)} | "
            f"{md_text(seen_text(b, now))} |"
        )
    if plan.budget or plan.not_rate_limited:
        head.extend(["", "**Budget**", ""])
        head.extend(f"- {md_code(r.server)}: {md_text(budget_row_text(r))}" for r in plan.budget)
        head.extend(f"- {md_code(server)}: {md_text(NOT_LIMITED)}" for server in plan.not_rate_limited)
    drifted = [b for b in plan.branches if b.drift is not None and b.drift.drifted]
    if drifted:
        head.extend(["", "**Drift** (applying overwrites these changes made outside Git)", ""])
        head.extend(
            f"- {md_code(b.label)}: {md_text(drift_text(b.drift, now, limit=MARKDOWN_DRIFT_NAMES))}"
            for b in drifted
            if b.drift is not None
        )
    if plan.unsettled:
        head.extend(["", "**Unverified or failing deploys** (exit 12)", ""])
        head.extend(f"- {md_text(n.line())}" for n in plan.unsettled)
    if plan.failed:
        head.extend(["", "**Failed servers** (not planned)", ""])
        head.extend(
            f"- {md_code(f.server)} (exit {f.exit_code}; branches {', '.join(md_code(b) for b in f.branches)}): "
            f"{md_text(f.message)}"
            for f in plan.failed
        )
    if plan.warnings:
        head.extend(["", "**Warnings**", ""])
        head.extend(f"- {md_text(w)}" for w in plan.warnings)
    head.append("")
    sections = [(b, _branch_markdown(b, with_diffs=True), _branch_markdown(b, with_diffs=False)) for b in plan.branches]
    text = printable("\n".join(head))
    full = text + "".join(s[1] for s in sections)
    if max_chars is None or len(full) <= max_chars:
        return full
    note = "\n_The plan was cut to fit GitHub's size limit; run `gitops plan` for the whole of it._\n"
    budget = max_chars - len(note)
    body = text
    for branch, with_diffs, without in sections:
        if len(body) + len(with_diffs) <= budget:
            body += with_diffs
        elif len(body) + len(without) <= budget:
            # As many of the branch's diffs as fit; one big branch must not lose them all.
            some = _branch_markdown(branch, with_diffs=True, room=budget - len(body))
            body += some if len(body) + len(some) <= budget else without
        else:
            break
    return body[:budget] + note


def ignored_text(branch: BranchPlan) -> str:
    """``only ignored lines differ: not uploaded (main, role/x)``: the modules whose only differences from the
    server's are lines ``ignore_lines`` matches."""
    return f"only ignored lines differ: not uploaded ({', '.join(branch.ignored)})"


def _branch_markdown(branch: BranchPlan, *, with_diffs: bool, room: int | None = None) -> str:
    if not branch.modules and not branch.activate and not branch.ignored:
        return ""
    lines = [f"#### {md_code(branch.label)}: {_ACTIONS[branch.action]}", ""]
    if branch.ignored:
        names = ", ".join(md_code(name) for name in branch.ignored)
        lines.append(f"- only ignored lines differ: not uploaded ({names})")
    for entry in branch.modules:
        lines.append(f"- {md_code(_module_line(entry))}" + (f" ({md_text(entry.note)})" if entry.note else ""))
    for which in branch.activate:
        lines.append(f"- activate for {md_text(which)}")
    if branch.verify is not None:
        lines.append(f"- {md_text(branch.verify.describe())}")
    diffs = [e for e in branch.modules if e.diff]
    if diffs:
        if with_diffs:
            blocks = [
                f"<details><summary>diff of {_html_code(e.name)}</summary>\n\n{md_fence(e.diff or '')}\n\n</details>"
                for e in diffs
            ]
            if room is not None:  # keep diffs while the section (with its "left out" line) stays within room
                used = len("\n".join(lines)) + 64
                fitting = 0
                for block in blocks:
                    used += len(block) + 1
                    if used > room:
                        break
                    fitting += 1
                blocks = blocks[:fitting]
            lines.append("")
            lines.extend(blocks)
            if len(blocks) < len(diffs):
                lines.append(f"- _{len(diffs) - len(blocks)} diff(s) left out to fit_")
        else:
            lines.append(f"- _{len(diffs)} diff(s) left out to fit_")
    lines.append("")
    return printable("\n".join(lines) + "\n")
