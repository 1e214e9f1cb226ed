"""The command line: click parses, the use cases decide, a renderer prints.

This is the only place that turns exceptions into ``Error: ...`` and an exit code (see ``gitops.errors``), so every
command ends the same way, with the same redaction, and a script can rely on the exit codes. Each command lives in
its own module, listed in :data:`COMMANDS` and imported only when it runs or shows its own help: ``gitops --help``
and a mistyped command never pay for the others. A command that ends on its own also skips the cycle collector and
the interpreter's teardown (:func:`main`), which a deploy would otherwise wait for.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import click

from gitops import __version__
from gitops.cli.common import debug_from_env, forget_json, json_printed, wants_json
from gitops.cli.pipes import protect_stdout
from gitops.errors import EXIT_INTERRUPTED, ExitCode, GitopsError, UsageError
from gitops.inert import inert
from gitops.secrets import redact

#: name -> (module, attribute, one-line help). Import happens only when the command runs or shows its own help.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "init": ("gitops.cli.init", "init", "Write a commented gitops.yaml for this repository (--pull: and its code)."),
    "pull": ("gitops.cli.pull", "pull", "Bring the server's code into the repository (files under each root)."),
    "validate": ("gitops.cli.validate", "validate", "Check the manifest and the local code (no network)."),
    "build": ("gitops.cli.build", "build", "Run the manifest's build commands, with no credential in reach."),
    "plan": ("gitops.cli.plan", "plan", "Show what apply would change on the servers."),
    "apply": ("gitops.cli.apply", "apply", "Make the servers hold what the repository holds."),
    "rehearse": (
        "gitops.cli.rehearse",
        "rehearse_command",
        "Run each branch's code in a throwaway world of the real private server, and judge it (--base: compare).",
    ),
    "drift": ("gitops.cli.drift", "drift", "Show branches changed on the servers outside Git since they were applied."),
    "status": ("gitops.cli.state", "status_", "What runs where: commit, time, active, verification state."),
    "history": ("gitops.cli.state", "history_", "The deploys this tool recorded, newest first."),
    "rollback": ("gitops.cli.state", "rollback", "Restore the code of an earlier deploy (--to N), budget checked."),
    "watch": (
        "gitops.cli.watch",
        "watch_command",
        "Deploy on every change, paced under the day's upload limit (Ctrl-C stops).",
    ),
    "console": ("gitops.cli.console", "console", "Stream the account's console (redacted) until Ctrl-C."),
    "token": ("gitops.cli.token", "token", "Show a token's scope and its unlimited time left."),
    "unlock": ("gitops.cli.token", "unlock", "Print the no-rate-limit link; --wait until the token is unlimited."),
    "serve": ("gitops.cli.serve", "serve", "Run the local stand-in of the game service."),
    "schema": ("gitops.cli.schema", "schema", "Print the manifest's JSON Schema."),
    "demo": ("gitops.cli.demo", "demo", "Deploy a bundled example to a local stand-in service, then stop it."),
    "action": ("gitops.cli.action", "action", "Steps of the GitHub Action (used by action.yml)."),
    "gitlab": ("gitops.cli.gitlab", "gitlab", "A GitLab CI job: plan or apply, then the merge request's note."),
    "help": ("gitops.cli.help", "help_", "Show a documentation page: manifest, layouts, adopting, ... (or list them)."),
}


#: What users of other tools type for a command of this one: the word, then ours and whose word it is. Asked before
#: the spelling's near misses, which would answer 'deploy' with 'demo' and 'diff' with 'drift'.
OTHER_TOOLS: dict[str, tuple[str, str]] = {
    "deploy": ("apply", "most deploy tools' word"),
    "sync": ("apply", "Argo CD's 'app sync'"),
    "upload": ("apply", "the screeps-api CLI's 'upload'"),
    "push": ("apply", "the npm script of many Screeps starters"),
    "diff": ("plan", "Argo CD's 'app diff' and kubectl's 'diff'"),
    "preview": ("plan", "Pulumi's 'preview'"),
    "download": ("pull", "the screeps-api CLI's 'download'"),
    "logs": ("console", "kubectl's 'logs'"),
    "log": ("console", "kubectl's 'logs'"),
    "undo": ("rollback", "kubectl's 'rollout undo'"),
    "revert": ("rollback", "Git's word for undoing a commit"),
    "get": ("status", "kubectl's 'get'"),
    "show": ("status", "Terraform's 'show'"),
    "state": ("status", "Terraform's 'state list' ('gitops history' lists the deploys)"),
}


def command_hint(name: str) -> str:
    """`` Did you mean 'apply'? ...`` for an unknown command: another tool's word for one of ours first, else the
    nearest spelling (or nothing)."""
    other = OTHER_TOOLS.get(name.lower())
    if other is not None:
        ours, whose = other
        return f" Did you mean '{ours}'? ('{name}' is {whose}; here it is 'gitops {ours}'.)"
    # Only for a mistyped command: gitops --help would pay for it.
    import difflib  # noqa: PLC0415 (boundary: the lazy group)

    close = difflib.get_close_matches(name, list(COMMANDS), n=1, cutoff=0.6)
    return f" Did you mean '{close[0]}'?" if close else ""


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module = importlib.import_module(entry[0])
        command = getattr(module, entry[1])
        assert isinstance(command, click.Command)
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if name and not name.startswith("-") and name not in COMMANDS:
            raise click.UsageError(f"No such command '{name}'.{command_hint(name)}", ctx)
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_) for name, (_, _, help_) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="gitops")
@click.option(
    "--debug",
    is_flag=True,
    # GITOPS_DEBUG is read by debug_from_env(), not by click, which would refuse GITOPS_DEBUG=x as no boolean.
    help="Log requests (never secrets) to stderr. [env: GITOPS_DEBUG, any value but empty, 0, false, no, off]",
)
@click.option(
    "--no-color",
    is_flag=True,
    help="No colour even on a terminal, for every command. [env: NO_COLOR, any non-empty value]",
)
@click.pass_context
def cli(ctx: click.Context, debug: bool, no_color: bool) -> None:
    """Declarative deployment of Screeps code: plan, then apply, within the token's rate limits.

    Start with 'gitops init' in your bot's repository; 'gitops help' lists the documentation pages.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug or debug_from_env()
    ctx.obj["no_color"] = no_color


#: Commands that take --no-color themselves (the others get it moved to the group's option).
_OWN_NO_COLOR = frozenset({"plan", "apply"})

#: Set per run when the command line asks for JSON: an error is then also a JSON object on stdout.
_ERRORS_AS_JSON = {"on": False}


def _print_error(message: str, *, exit_code: int | None = None) -> None:
    # An error's text may hold a server's (an error body, a close reason): inert, as everything printed.
    click.echo(inert(redact(f"Error: {message}")), err=True)
    if _ERRORS_AS_JSON["on"] and not json_printed():
        # Scripts that asked for JSON read stdout: the error is there too, as one documented object.
        document = {"format_version": 1, "error": {"message": message, "exit_code": exit_code}}
        click.echo(inert(redact(json.dumps(document, indent=2))))


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``gitops`` script: runs a command and exits with its documented code."""
    protect_stdout()  # a closed pipe never cuts a command short (gitops apply --yes | head -1)
    short = _short_lived(sys.argv[1:] if argv is None else argv)
    if short:
        # A plan or apply allocates hundreds of thousands of objects (the modules, their JSON) and frees them by
        # reference counting; the cycle collector's passes found nothing worth their CPU. The process ends within
        # seconds, so the few cycles it leaves are returned to the system at exit.
        gc.disable()
    code = run(argv)
    if short:
        _end_now(code)
    sys.exit(code)


def _end_now(code: int) -> None:
    """End the process at once, without the interpreter's teardown: freeing every object and module one by one
    takes measurable time after a deploy, and the system takes the memory back anyway.

    Nothing is left to do at that point: the session has saved and closed the ledgers (and released their locks),
    every file was written in a ``with`` block, child processes were waited for, and the local read's thread was
    joined. Output is flushed first; when that fails (a closed pipe), the normal exit runs and reports it as before.
    The normal exit runs too under a profiler or a tracer (``python -m cProfile``, coverage): they write their
    results at exit.
    """
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


#: Commands that run until they are stopped: the stand-in, and the watch mode (hours of plans, where the cyclic
#: garbage of retried errors, their tracebacks and frames, must be collected).
LONG_RUNNING = frozenset({"serve", "watch"})


def _short_lived(args: list[str]) -> bool:
    """Whether the command ends on its own (everything but :data:`LONG_RUNNING`)."""
    command = next((a for a in args if not a.startswith("-")), None)
    return command not in LONG_RUNNING


def run(argv: list[str] | None = None, *, clock: Any = None, transport: Any = None) -> int:
    """Run the CLI and return the exit code instead of exiting (tests and the Action call this).

    ``clock`` (a ``gitops.edges.clock.Clock``) and ``transport`` (an ``httpx.BaseTransport`` for the game service) are
    the two injectable edges: tests pass the stand-in's clock, or a transport that produces faults.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    debug = debug_from_env() or "--debug" in args
    if not args and "_GITOPS_COMPLETE" not in os.environ:
        # Bare 'gitops': the help, as 'gitops --help' prints it (not a usage error). (Shell completion also runs
        # without arguments, with _GITOPS_COMPLETE set: click answers it.)
        with click.Context(cli, info_name="gitops") as ctx:
            click.echo(ctx.get_help())
        return ExitCode.OK
    if "--debug" in args[1:] and args[0] != "--debug":
        # '--debug' is the group's option; 'gitops plan --debug' means the same as 'gitops --debug plan'.
        args = ["--debug", *(a for a in args if a != "--debug")]
    command = next((a for a in args if not a.startswith("-")), None)
    if "--no-color" in args and command not in _OWN_NO_COLOR and args[0] != "--no-color":
        # Accepted after any command too: the group's option ('gitops drift --no-color' = 'gitops --no-color drift').
        args = ["--no-color", *(a for a in args if a != "--no-color")]
    argv = args
    _ERRORS_AS_JSON["on"] = wants_json(args)
    forget_json()
    try:
        result: Any = cli.main(
            args=argv, prog_name="gitops", standalone_mode=False, obj={"clock": clock, "transport": transport}
        )
    except GitopsError as exc:
        _print_error(str(exc), exit_code=exc.exit_code)
        return exc.exit_code
    except click.exceptions.Abort:
        # click turns a Ctrl-C into Abort too: say so when a write was in flight (it may have landed).
        message = _interrupted()
        _print_error("aborted; nothing was changed after this point." if message == "interrupted." else message)
        return EXIT_INTERRUPTED
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        # click's usage errors (exit 2 by default) would collide with plan's "changes" code.
        habit = habit_hint(args) if isinstance(exc, click.exceptions.NoSuchOption) else None
        _print_error(
            exc.format_message() + (f"\n{habit}" if habit else "\nSee 'gitops --help' or 'gitops COMMAND --help'."),
            exit_code=UsageError.exit_code,
        )
        return UsageError.exit_code
    except KeyboardInterrupt:
        _print_error(_interrupted())
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug: say so briefly, traceback only in debug mode (redacted)
        if debug:
            click.echo(redact(traceback.format_exc()), err=True)
        # Where, never the exception's text: that may quote a header value or server data (--debug shows the
        # redacted traceback).
        _print_error(
            f"internal error ({type(exc).__name__}{_where(exc)}).\n"
            "This is a bug in screeps-gitops; run again with --debug and report the output."
        )
        return ExitCode.BUG
    return int(result) if isinstance(result, int) else ExitCode.OK


#: Flags that players bring from Terraform, kubectl and other deploy tools, and what this tool calls them.
HABITS: dict[str, str] = {
    "-auto-approve": "--yes (gitops apply --yes)",
    "--auto-approve": "--yes (gitops apply --yes)",
    "-out": "--out FILE (gitops plan --out plan.json, then gitops apply plan.json)",
    "-json": "--json",
    "-no-color": "--no-color",
    "-chdir": "-m/--manifest (gitops plan -m path/to/gitops.yaml)",
    "-target": "--server/--branch (gitops plan --branch main)",
    "-o": "--format json, or --json",
    "--output": "--format json, or --json",
    "-f": "-m/--manifest (gitops apply -m gitops.yaml)",
    "--filename": "-m/--manifest (gitops apply -m gitops.yaml)",
    "--dry-run": "gitops plan (a plan is the dry run; apply then carries it out)",
    "-detailed-exitcode": "nothing: gitops plan always exits 2 when there are changes (0 when none)",
    "--force": "--yes, or --refresh=always to download every branch first",
}


def habit_hint(args: list[str]) -> str | None:
    """What this tool calls the first flag of ``args`` that another deploy tool uses (``-auto-approve``), or
    ``None``. A single-dash long flag reaches click as short options (``-a``), so the whole word is read here."""
    for arg in args:
        if arg == "--":
            break
        name = arg.split("=", 1)[0]
        if name in HABITS:
            return f"'{name}' is another tool's flag; here it is {HABITS[name]}. See 'gitops COMMAND --help'."
    return None


def _interrupted() -> str:
    """What a Ctrl-C cut: when a write was in flight, that it may have landed and that the next plan checks it."""
    # Looked up, never imported: a run that sent a write has loaded it, and one that did not has nothing in flight.
    inflight = sys.modules.get("gitops.edges.service.inflight")
    if inflight is None:
        return "interrupted."
    cut: list[str] = inflight.writes_in_flight()
    if not cut:
        return "interrupted."
    return (
        f"interrupted while {' and '.join(cut)} was in flight: the server may have received it, or not. The next "
        "'gitops plan' checks the server (this tool forgot what it knew of that branch), so nothing is assumed."
    )


def _where(exc: BaseException) -> str:
    """`` in gitops/edges/service/ratelimits.py line 144 (_rate_limited)``: the innermost frame of this package (bug
    reports)."""
    package = Path(__file__).resolve().parent.parent
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        path = Path(frame.filename).resolve()
        if path.is_relative_to(package):
            return f" in {path.relative_to(package.parent).as_posix()} line {frame.lineno} ({frame.name})"
    return ""
