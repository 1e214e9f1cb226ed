"""``gitops help [TOPIC]``: the documentation, shipped inside the package.

A player who installed the tool with ``pip`` or ``pipx`` has no checkout of this repository's ``docs/``: the pages
travel inside the package (``gitops._docs``, mapped from ``docs/`` in pyproject.toml) and this command prints them.
Messages and the manifests ``gitops init`` writes name ``gitops help TOPIC``, never a path of the repository.
"""

from __future__ import annotations

import re
from contextlib import suppress
from pathlib import Path

import click

#: Topic -> (the file under docs/, a line of description). ``exit-codes`` is made from :mod:`gitops.errors`.
TOPICS: dict[str, tuple[str, str]] = {
    "manifest": ("manifest.md", "gitops.yaml, every key"),
    "layouts": ("your-layout.md", "how a repository's files become modules: roots, builds, naming, source maps"),
    "adopting": ("adopting.md", "bringing a bot that is already on a server under Git (init --pull)"),
    "credentials": ("credentials.md", "tokens, passwords and the screepers credentials file"),
    "private-server": ("private-server.md", "deploying to a private server (screepsmod-auth)"),
    "github-action": ("github-action.md", "the GitHub Action: plans on pull requests, deploys on push"),
    "safe-deploys": ("safe-deploys.md", "verify: watch the game's console after apply, roll back a failing deploy"),
    "rehearsal": ("rehearsal.md", "rehearse: run the code in a throwaway world of the real private server first"),
    "budget": ("budget-and-ledger.md", "the rate limits, the ledger and what each command spends"),
    "serve": ("serve.md", "the local stand-in of the game service"),
    "exit-codes": ("", "what each exit code means"),
}


def docs_folder() -> Path | None:
    """The folder of the shipped pages: inside the package when installed, the checkout's ``docs/`` when editable
    (setuptools' editable finder does not resolve a mapped data folder)."""
    from importlib import resources

    candidates: list[Path] = []
    with suppress(ModuleNotFoundError):
        # joinpath first: the folder has no __init__.py, and str() of a namespace package's files() is no path.
        candidates.append(Path(str(resources.files("gitops._docs").joinpath("manifest.md"))).parent)
    candidates.append(Path(__file__).resolve().parents[2] / "docs")
    return next((c for c in candidates if (c / "manifest.md").is_file()), None)


def exit_codes_text() -> str:
    """The exit-code table of :mod:`gitops.errors` (the README's table, which a test keeps equal)."""
    import gitops.errors

    doc = gitops.errors.__doc__ or ""
    table = re.search(r"(=+\s+=+\n.*?\n=+\s+=+\n.*?\n=+\s+=+)", doc, re.DOTALL)
    return "Exit codes of gitops\n\n" + (table.group(1) if table else doc) + "\n"


def topic_text(topic: str) -> str | None:
    """The text of ``topic``, or ``None`` when this installation lacks its page."""
    if topic == "exit-codes":
        return exit_codes_text()
    folder = docs_folder()
    if folder is None:
        return None
    try:
        return (folder / TOPICS[topic][0]).read_text(encoding="utf-8")
    except OSError:
        return None


@click.command("help")
@click.argument("topic", required=False, metavar="[TOPIC]")
def help_(topic: str | None) -> int:
    """Show a documentation page (the same pages as the repository's docs/), or list them."""
    from gitops.errors import UsageError

    if topic is None:
        click.echo("Topics (gitops help TOPIC); each command also has --help:\n")
        width = max(len(t) for t in TOPICS)
        for name, (_, line) in TOPICS.items():
            click.echo(f"  {name.ljust(width)}  {line}")
        return 0
    if topic not in TOPICS:
        import difflib

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
    click.echo(text.rstrip("\n"))
    return 0
