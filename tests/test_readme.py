"""The README's docs check: every ``gitops`` command it shows exists, with options the command takes, and every
relative link leads to a file of the repository (the commands of the docs/ pages are checked the same way).

The commands are the lines of its ```sh blocks and its inline code spans that start with ``gitops`` (split at
``&&``, ``||``, ``;`` and ``|``); each is resolved through click, the same group the installed ``gitops`` runs, and
each ``-x``/``--flag`` must be an option that command declares. ``gitops help TOPIC`` must name a topic or a
command. What a command does is tested elsewhere; this keeps the README from naming what does not exist.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from urllib.parse import unquote

import click
import pytest

from gitops.cli import COMMANDS, cli
from gitops.cli.help import TOPICS

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

#: Options of the group that every command also takes after its name (``gitops plan --debug``).
_EVERYWHERE = {"--debug", "--no-color", "--help", "-h"}
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")


def command_lines(markdown: str) -> list[str]:
    """Every ``gitops ...`` command of the ```sh blocks and of the inline code spans outside blocks."""
    found: list[str] = []
    for lang, body in _FENCE.findall(markdown):
        if lang in ("sh", "bash", "shell", "console"):
            for line in body.splitlines():
                found.extend(_commands_in(line))
    prose = _FENCE.sub("", markdown)
    for span in re.findall(r"`([^`\n]+)`", prose):
        # Not `gitops serve: ... listening on URL` (a line it prints) nor `gitops COMMAND --help` (a placeholder).
        if span.startswith("gitops ") and not re.match(r"gitops ([^\s-]+:|[A-Z]+\b)", span):
            found.extend(_commands_in(span))
    return found


def _commands_in(line: str) -> list[str]:
    words = shlex.split(line, comments=True)
    out: list[str] = []
    current: list[str] = []
    redirected = False
    for word in [*words, ";"]:
        if word in ("&&", "||", ";", "|"):
            if current and current[0] == "gitops":
                out.append(shlex.join(current))
            current, redirected = [], False
        elif redirected or re.fullmatch(r"\d?[<>]{1,2}&?\d?", word):
            redirected = True  # `gitops schema > gitops.schema.json`: the rest of it is the shell's
        elif word.strip("[]"):
            current.append(word.strip("[]"))  # `gitops rollback [--to N]`: optional parts are still checked
    return out


def problems(command_line: str) -> list[str]:
    """What is wrong with one ``gitops ...`` command line, as click sees it (empty: nothing)."""
    words = shlex.split(command_line)
    assert words[0] == "gitops", command_line
    group_options = {"-h", "--help"} | {opt for param in cli.params for opt in param.opts}
    args = words[1:]
    while args and args[0].startswith("-"):  # the group's own options before the command: gitops --debug plan
        if args[0] not in group_options:
            return [f"{command_line!r}: gitops takes no option {args[0]}"]
        args = args[1:]
    if not args:
        return []
    name = args[0]
    group_ctx = cli.make_context("gitops", [name], resilient_parsing=True)
    command = cli.get_command(group_ctx, name)
    if command is None:
        return [f"{command_line!r}: no command {name!r}"]
    declared = set(_EVERYWHERE)
    for param in command.params:
        if isinstance(param, click.Option):
            declared.update(param.opts, param.secondary_opts)
    wrong: list[str] = []
    for word in args[1:]:
        if word.startswith("-") and word != "-":
            flag = word.split("=", 1)[0]
            if flag not in declared:
                wrong.append(f"{command_line!r}: {name} takes no option {flag}")
    if not wrong:
        # click itself: the words parse (resilient: no callbacks, no prompts), and nothing is left over that the
        # command would refuse as an extra argument.
        ctx = command.make_context(name, list(args[1:]), parent=group_ctx, resilient_parsing=True)
        if ctx.args and not ctx.allow_extra_args and not isinstance(command, click.Group):
            wrong.append(f"{command_line!r}: {name} takes no argument {ctx.args[0]!r}")
    if name == "help" and len(args) > 1 and not args[1].startswith("-"):
        topic = args[1]
        if topic.isupper():  # a placeholder: gitops help TOPIC
            return wrong
        if topic not in TOPICS and topic not in COMMANDS:
            wrong.append(f"{command_line!r}: no help topic {topic!r}")
    return wrong


def relative_links(markdown: str) -> list[str]:
    return [t for t in _LINK.findall(_FENCE.sub("", markdown)) if not re.match(r"[a-z]+:|#", t)]


def test_every_gitops_command_in_the_readme_exists_with_the_options_it_shows() -> None:
    lines = command_lines(README.read_text(encoding="utf-8"))
    assert {"gitops init", "gitops validate", "gitops plan", "gitops apply"} <= set(lines)
    assert len(lines) >= 8, lines
    wrong = [problem for line in lines for problem in problems(line)]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("page", sorted(p.name for p in (ROOT / "docs").glob("*.md")))
def test_every_gitops_command_in_the_docs_exists_with_the_options_it_shows(page: str) -> None:
    lines = command_lines((ROOT / "docs" / page).read_text(encoding="utf-8"))
    wrong = [problem for line in lines for problem in problems(line)]
    assert not wrong, "\n".join(wrong)


def test_the_quick_start_is_the_two_commands_ci_and_the_demo_run() -> None:
    text = README.read_text(encoding="utf-8")
    quick = text[text.index("## Quick start") :]
    block = re.search(r"```sh\n(.*?)```", quick, re.S)
    assert block is not None
    assert [line.split("#")[0].strip() for line in block.group(1).splitlines()] == [
        "bash scripts/demo.sh",
        "bash scripts/test.sh",
    ]
    assert (ROOT / "scripts" / "demo.sh").is_file()
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_every_relative_link_in_the_readme_leads_to_a_file_of_the_repository() -> None:
    links = relative_links(README.read_text(encoding="utf-8"))
    assert len(links) >= 10, links
    missing = [t for t in links if not (ROOT / unquote(t.split("#", 1)[0])).exists()]
    assert not missing, missing
    no_section = [
        t
        for t in links
        if "#" in t and t.split("#")[0].endswith(".md") and t.split("#", 1)[1] not in anchors(ROOT / t.split("#")[0])
    ]
    assert not no_section, no_section


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", _FENCE.sub("", page.read_text(encoding="utf-8")), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_script_the_readme_runs_exists() -> None:
    text = README.read_text(encoding="utf-8")
    scripts = set(re.findall(r"\bbash ((?:scripts|bench)/[\w./-]+\.sh)\b", text))
    assert {"scripts/demo.sh", "scripts/test.sh"} <= scripts
    assert not [s for s in scripts if not (ROOT / s).is_file()], scripts


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("gitops plan --refresh=always", []),
        ("gitops apply --yes --keep-going", []),
        ("gitops -h", []),
        ("gitops --debug plan --json", []),
        ("gitops --verbose plan", ["'gitops --verbose plan': gitops takes no option --verbose"]),
        ("gitops help adopting", []),
        ("gitops plan --no-such-flag", ["'gitops plan --no-such-flag': plan takes no option --no-such-flag"]),
        ("gitops deploy --yes", ["'gitops deploy --yes': no command 'deploy'"]),
        ("gitops validate extra", ["'gitops validate extra': validate takes no argument 'extra'"]),
        ("gitops help no-such-page", ["'gitops help no-such-page': no help topic 'no-such-page'"]),
    ],
)
def test_the_check_refuses_what_does_not_exist(line: str, expected: list[str]) -> None:
    assert problems(line) == expected


def test_commands_are_found_in_blocks_and_spans_and_links_are_relative_ones() -> None:
    text = (
        "Run `gitops plan && gitops apply --yes` or `bash x.sh`.\n\n"
        "```sh\ncd bot   # not ours\ngitops init --pull   # with a comment\nexport A=1\n```\n\n"
        "```yaml\ngitops: not a command\n```\n"
        "[a](docs/a.md) [b](https://example.org) [c](#here) [d](examples/x.yml#L1)\n"
    )
    assert command_lines(text) == ["gitops init --pull", "gitops plan", "gitops apply --yes"]
    assert command_lines("`gitops schema > x.json` `gitops rollback [--to N]` `gitops serve: listening`") == [
        "gitops schema",
        "gitops rollback --to N",
    ]
    assert relative_links(text) == ["docs/a.md", "examples/x.yml#L1"]
    assert anchors(ROOT / "docs" / "commands.md") >= {"installing", "deploy-on-save-gitops-watch", "the-plan-explained"}
    assert problems("gitops plan --bogus") != []  # a README line naming a flag that does not exist fails
