"""``gitops help [TOPIC]``: the documentation, shipped inside the package.

A player who installed the tool with ``pip`` or ``pipx`` has no checkout of this repository's ``docs/``: the pages
travel inside the package (``gitops._docs``, mapped from ``docs/`` in pyproject.toml) and this command prints them.
Messages and the manifests ``gitops init`` writes name ``gitops help TOPIC``, never a path of the repository.
"""

from __future__ import annotations

import difflib
import re
import shutil
import sys
from contextlib import suppress
from importlib import resources
from pathlib import Path

import click

from gitops.cli import COMMANDS
from gitops.errors import EXIT_CODE_MEANINGS, EXIT_INTERRUPTED, UsageError

#: Topic -> (the file under docs/, a line of description). ``exit-codes`` is made from :mod:`gitops.errors`.
TOPICS: dict[str, tuple[str, str]] = {
    "commands": ("commands.md", "every command and shared option; watch, the plan explained, drift"),
    "manifest": ("manifest.md", "gitops.yaml, every key"),
    "layouts": ("your-layout.md", "how a repository's files become modules: roots, builds, naming, source maps"),
    "adopting": ("adopting.md", "bringing a bot that is already on a server under Git (init --pull)"),
    "credentials": ("credentials.md", "tokens, passwords and the screepers credentials file"),
    "private-server": ("private-server.md", "deploying to a private server (screepsmod-auth)"),
    "github-action": ("github-action.md", "the GitHub Action: plans on pull requests, deploys on push"),
    "gitlab-ci": ("gitlab-ci.md", "GitLab CI: plans on merge requests (one note), deploys on push"),
    "safe-deploys": ("safe-deploys.md", "verify: watch the game's console after apply, roll back a failing deploy"),
    "rehearsal": ("rehearsal.md", "rehearse: run the code in a throwaway world of the real private server first"),
    "budget": ("budget-and-ledger.md", "the rate limits, the ledger and what each command spends"),
    "serve": ("serve.md", "the local stand-in of the game service"),
    "architecture": ("architecture.md", "the layers, the modules, where a change goes, how it is tested"),
    "exit-codes": ("", "what each exit code means"),
}


def docs_folder() -> Path | None:
    """The folder of the shipped pages: inside the package when installed, the checkout's ``docs/`` when editable
    (setuptools' editable finder does not resolve a mapped data folder)."""
    candidates: list[Path] = []
    with suppress(ModuleNotFoundError):
        # joinpath first: the folder has no __init__.py, and str() of a namespace package's files() is no path.
        candidates.append(Path(str(resources.files("gitops._docs").joinpath("manifest.md"))).parent)
    candidates.append(Path(__file__).resolve().parents[2] / "docs")
    return next((c for c in candidates if (c / "manifest.md").is_file()), None)


def exit_codes_text() -> str:
    """The exit codes as a Markdown page, from :data:`gitops.errors.EXIT_CODE_MEANINGS` (the one list)."""
    rows = [f"| {int(code)} | {meaning} |" for code, meaning in EXIT_CODE_MEANINGS.items()]
    rows.append(f"| {EXIT_INTERRUPTED} | interrupted (Ctrl-C): what was in flight is said above |")
    return "# Exit codes of gitops\n\n| exit code | meaning |\n|---|---|\n" + "\n".join(rows) + "\n"


#: A Markdown link whose target is another page of docs/ (``[text](manifest.md#build)``) or a file of the repository
#: (``[text](../examples/workflows/plan.yml)``): neither opens where the tool was installed with pip.
_LINK = re.compile(r"\[([^\]\n]+)\]\((?!https?://|#)([^)\s]+)\)")


def installed_links(text: str) -> str:
    """Links rewritten for a terminal where the tool is installed: another page becomes ``gitops help TOPIC``, a
    file of the repository its path in the repository (web links and anchors stay as they are)."""
    pages = {file: topic for topic, (file, _) in TOPICS.items() if file}

    def replace(match: re.Match[str]) -> str:
        label, target = match.group(1), match.group(2)
        path, _, anchor = target.partition("#")
        name = path.rsplit("/", 1)[-1]
        if name in pages and not path.startswith("../"):
            section = f", section {anchor.replace('-', ' ')!r}" if anchor else ""
            return f"{label} (gitops help {pages[name]}{section})"
        if not path:
            return match.group(0)
        repository_path = path[3:] if path.startswith("../") else f"docs/{path}"
        if label.strip("`") in (repository_path, path, name):
            return f"{label} (in the screeps-gitops repository)"
        return f"{label} (the screeps-gitops repository's {repository_path})"

    return _LINK.sub(replace, text)


def topic_text(topic: str) -> str | None:
    """The text of ``topic``, or ``None`` when this installation lacks its page."""
    if topic == "exit-codes":
        return exit_codes_text()
    folder = docs_folder()
    if folder is None:
        return None
    try:
        return installed_links((folder / TOPICS[topic][0]).read_text(encoding="utf-8"))
    except OSError:
        return None


@click.command("help")
@click.argument("topic", required=False, metavar="[TOPIC]")
def help_(topic: str | None) -> int:
    """Show a documentation page (the same pages as the repository's docs/), or list them."""
    if topic is None:
        click.echo("Topics (gitops help TOPIC); each command also has --help:\n")
        width = max(len(t) for t in TOPICS)
        for name, (_, line) in TOPICS.items():
            click.echo(f"  {name.ljust(width)}  {line}")
        return 0
    if topic not in TOPICS and topic in COMMANDS:
        # 'gitops help plan': the command's own help, and where it lives (issue 41).
        ctx = click.get_current_context()
        command = ctx.find_root().command
        assert isinstance(command, click.Group)
        sub = command.get_command(ctx, topic)
        if sub is not None:
            with click.Context(sub, info_name=topic, parent=ctx.find_root()) as sub_ctx:
                _show(sub.get_help(sub_ctx) + f"\n\n('{topic}' is a command: this is 'gitops {topic} --help'.)")
            return 0
    if topic not in TOPICS:
        close = difflib.get_close_matches(topic, list(TOPICS), n=1, cutoff=0.5)
        raise UsageError(
            f"no help topic {topic!r}" + (f"; did you mean {close[0]!r}?" if close else ""),
            hint="'gitops help' lists the topics.",
        )
    text = topic_text(topic)
    if text is None:
        raise UsageError(
            f"the page {topic!r} is not part of this installation of screeps-gitops",
            hint="Reinstall screeps-gitops (pip install, pipx install).",
        )
    _show(text.rstrip("\n"))
    return 0


def _show(text: str) -> None:
    """Print, through the user's pager when standard output is a terminal and the page is longer than it (click
    honours PAGER and falls back to less or more); plain otherwise (pipes, CI logs)."""
    height = shutil.get_terminal_size((80, 24)).lines
    if sys.stdout.isatty() and text.count("\n") >= height - 1:
        click.echo_via_pager(text + "\n")
    else:
        click.echo(text)
