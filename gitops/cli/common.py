"""Options and terminal helpers shared by the commands.

Every option CI needs also reads an environment variable, and each is written once here so that the commands that
share it (``--manifest``, ``--server``/``--branch``, ``--state-dir``, the plan options) cannot drift apart. The run's
:class:`~gitops.app.options.Options` are made here from click's context (:func:`options_from`), with the injected
clock and transport of tests. This module is imported by ``gitops --help``: what only a run needs is imported where
it is used.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import click
from click.core import ParameterSource

from gitops.app.options import (
    DEFAULT_FORMAT,
    DEFAULT_MANIFEST,
    DEFAULT_MAX_WAIT,
    DEFAULT_REFRESH,
    FORMATS,
    REFRESH_CHOICES,
    Options,
)
from gitops.app.targets import Targets
from gitops.config.discovery import discover_manifest
from gitops.edges.clock import SystemClock
from gitops.errors import UsageError
from gitops.inert import inert
from gitops.secrets import HIDDEN, redact

if TYPE_CHECKING:
    from gitops.core.health import VerifyOverrides

F = TypeVar("F", bound=Callable[..., Any])


def manifest_option(f: F) -> F:
    return _manifest(
        f,
        _found_manifest,
        "The manifest file. Not given: gitops.yaml (or gitops.yml) here or in a folder above, up to the top of "
        "the Git repository. [env: GITOPS_MANIFEST]",
    )


def new_manifest_option(f: F) -> F:
    """``-m/--manifest`` of a command that writes a new manifest (init): this folder's, never one found above (a bot's
    folder in a monorepo whose top holds another manifest)."""
    return _manifest(
        f, None, "The manifest file to write (in this folder unless it names another). [env: GITOPS_MANIFEST]"
    )


def _manifest(f: F, callback: Callable[[click.Context, click.Parameter, Path], Path] | None, help_text: str) -> F:
    return click.option(
        "-m",
        "--manifest",
        type=click.Path(path_type=Path, dir_okay=False),
        default=DEFAULT_MANIFEST,
        show_default=True,
        envvar="GITOPS_MANIFEST",
        callback=callback,
        help=help_text,
    )(f)


def _found_manifest(ctx: click.Context, param: click.Parameter, value: Path) -> Path:
    """The manifest named by ``-m``/``GITOPS_MANIFEST`` as given; when neither names one, the nearest one found
    (:func:`gitops.config.discovery.discover_manifest`), said on standard error when it is not in this folder."""
    if param.name is None or ctx.get_parameter_source(param.name) is not ParameterSource.DEFAULT:
        return value
    found = discover_manifest(Path.cwd())
    if found is None:
        return value
    if found.parent != Path("."):
        click.echo(f"gitops: using the manifest {found} (found above this folder)", err=True)
    return found


def max_wait_option(f: F) -> F:
    """``--max-wait``: the longest 429 wait before retrying (every command that talks to a server)."""
    return click.option(
        "--max-wait",
        type=click.FloatRange(min=0),
        metavar="SECONDS",
        default=DEFAULT_MAX_WAIT,
        show_default=True,
        envvar="GITOPS_MAX_WAIT",
        help="Longest wait (seconds) after a 429 before retrying; longer waits stop with an error. "
        "[env: GITOPS_MAX_WAIT]",
    )(f)


def state_dir_option(f: F) -> F:
    """``--state-dir``: where the ledger lives (every command that keeps one)."""
    return click.option(
        "--state-dir",
        type=click.Path(path_type=Path, file_okay=False),
        metavar="DIR",
        default=None,
        envvar="GITOPS_STATE_DIR",
        help="Where the ledger lives [default: $XDG_STATE_HOME/screeps-gitops]. [env: GITOPS_STATE_DIR]",
    )(f)


def format_options(what: str) -> Callable[[F], F]:
    """``--format`` (text, json, markdown; from ``gitops.app.options``) with its ``--json``/``--markdown`` short
    forms, for a command that prints ``what``; :func:`chosen_format` reads them."""

    def decorate(f: F) -> F:
        f = click.option("--markdown", "as_markdown", is_flag=True, help="Same as --format markdown.")(f)
        f = click.option("--json", "as_json", is_flag=True, help="Same as --format json.")(f)
        return click.option(
            "--format",
            "fmt",
            type=click.Choice(FORMATS),
            default=DEFAULT_FORMAT,
            show_default=True,
            envvar="GITOPS_FORMAT",
            help=f"How to print {what}. [env: GITOPS_FORMAT]",
        )(f)

    return decorate


def chosen_format(fmt: str, as_json: bool, as_markdown: bool) -> str:
    """The format :func:`format_options` asked for; a usage error when both short forms are given."""
    if as_json and as_markdown:
        raise click.UsageError("--json and --markdown exclude each other")
    return "json" if as_json else "markdown" if as_markdown else fmt


def plan_options(f: F) -> F:
    """Options of every command that plans: where the code comes from and how the servers are read."""
    for option in reversed(
        [
            manifest_option,
            click.option(
                "--ref",
                envvar="GITOPS_REF",
                default=None,
                metavar="REF",
                help="Read the code from this Git ref (commit, branch, tag) instead of the working tree; "
                "uncommitted changes are ignored. [env: GITOPS_REF]",
            ),
            click.option(
                "--codeset",
                envvar="GITOPS_CODESET",
                default=None,
                metavar="FILE",
                expose_value=False,
                callback=_remember_codeset,
                help="Deploy the code of this code set file (written by `gitops build --out` in a job without "
                "credentials) instead of reading and building the working tree; it must come from this commit and "
                "this manifest file. [env: GITOPS_CODESET]",
            ),
            click.option(
                "--refresh",
                type=click.Choice(REFRESH_CHOICES),
                default=DEFAULT_REFRESH,
                show_default=True,
                envvar="GITOPS_REFRESH",
                help="always: download every branch; auto: skip branches this tool uploaded recently; "
                "never: plan from the ledger alone (no request at all). [env: GITOPS_REFRESH]",
            ),
            rebuild_option,
            max_wait_option,
            state_dir_option,
            # NO_COLOR is read by use_color(), not by click: click would parse it as a boolean and refuse
            # NO_COLOR=x, while no-color.org says any non-empty value means no colour.
            click.option(
                "--no-color",
                is_flag=True,
                help="No colour even on a terminal. [env: NO_COLOR, any non-empty value]",
            ),
            click.option(
                "--full",
                is_flag=True,
                envvar="GITOPS_FULL",
                help="Show every module and every diff line of the plan (the terminal shows a summary, at most 20 "
                "module lines and 40 diff lines per branch; --json has everything). [env: GITOPS_FULL]",
            ),
        ]
    ):
        f = option(f)
    return f


def rebuild_option(f: F) -> F:
    """``--rebuild``: build even when the last build's output can be reused (:mod:`gitops.edges.buildcache`)."""
    return click.option(
        "--rebuild",
        is_flag=True,
        expose_value=False,
        envvar="GITOPS_REBUILD",
        callback=_remember_rebuild,
        help="Run the build command even when its inputs and its output are unchanged since its last run (whose "
        "output is otherwise reused). [env: GITOPS_REBUILD]",
    )(f)


def _remember_rebuild(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """Keep ``--rebuild`` for :func:`run_environment`, which hands it to the build as ``GITOPS_REBUILD``."""
    if value:
        ctx.meta["gitops.rebuild"] = True


def run_environment(ctx: click.Context) -> dict[str, str]:
    """The run's environment: this process's, with ``--rebuild`` (:func:`rebuild_option`) as ``GITOPS_REBUILD=1``."""
    env = dict(os.environ)
    if ctx.meta.get("gitops.rebuild"):
        env["GITOPS_REBUILD"] = "1"
    return env


def _remember_codeset(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    """Keep ``--codeset`` for :func:`options_from`, which hands it to the local read as ``GITOPS_CODESET``."""
    if value:
        ctx.meta["gitops.codeset"] = str(Path(value).absolute())


class _Name(click.ParamType):  # type: ignore[type-arg]
    """A server or branch name; its environment variable is a comma-separated list (click splits on whitespace by
    default)."""

    name = "NAME"
    envvar_list_splitter = ","

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        return str(value)

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[click.shell_completion.CompletionItem]:
        """The manifest's server names for ``--server``, its branch names (and ``server/branch``) for ``--branch``
        (shell completion: ``eval "$(_GITOPS_COMPLETE=bash_source gitops)"``); nothing when the manifest does not
        load."""
        # Imported when a shell asks: gitops --help would pay for it (the manifest's reader is kept off it).
        from gitops.cli import completion  # noqa: PLC0415 (boundary: the lazy group)

        return completion.target_names(ctx, param, incomplete)


#: Spellings of the targets' variables that are not read, and the one that is: set, they are refused (exit 4) rather
#: than silently ignored (``GITOPS_SERVER`` was ``token``'s once, while ``plan`` read ``GITOPS_SERVERS``).
NOT_READ_ENV = {"GITOPS_SERVER": ("GITOPS_SERVERS", "--server"), "GITOPS_BRANCH": ("GITOPS_BRANCHES", "--branch")}


def refuse_unread_env(ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
    """A ``--server``/``--branch`` callback: :class:`UsageError` when a variable of :data:`NOT_READ_ENV` is set."""
    for name, (read, flag) in NOT_READ_ENV.items():
        if os.environ.get(name):
            raise UsageError(
                f"the environment variable {name} is set, but it is not read: {flag} reads {read} (a "
                "comma-separated list), for every command",
                hint=f"Rename it to {read} (or unset {name}).",
            )
    return value


def target_options(f: F) -> F:
    """``--server``/``--branch`` (repeatable, or comma-separated): restrict the run to those
    (:mod:`gitops.app.targets`). Every command that reads or contacts servers takes them."""
    f = click.option(
        "--branch",
        "branches",
        multiple=True,
        type=_Name(),
        envvar="GITOPS_BRANCHES",
        callback=refuse_unread_env,
        help="Only this branch: a name (on every chosen server) or server/branch; repeat it or separate names "
        "with commas. Other branches' code is neither read nor built. [env: GITOPS_BRANCHES, comma-separated]",
    )(f)
    return click.option(
        "--server",
        "servers",
        multiple=True,
        type=_Name(),
        envvar="GITOPS_SERVERS",
        callback=refuse_unread_env,
        help="Only this server of the manifest (repeat it or separate names with commas); other servers are not "
        "contacted. [env: GITOPS_SERVERS, comma-separated]",
    )(f)


def is_terminal(stream: Any = None) -> bool:
    stream = stream or sys.stdout
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def debug_log(ctx: click.Context) -> Callable[[str], None] | None:
    """A logger to stderr in debug mode; every line is redacted."""
    if not (ctx.find_root().obj or {}).get("debug"):
        return None

    def log(line: str) -> None:
        click.echo(inert(redact(f"debug: {line}"), one_line=True), err=True)

    return log


def countdown(seconds: float, endpoint: str) -> None:
    """Show a wait before a retry: a live countdown on a terminal, one line otherwise.

    The client does the sleeping (on its clock) right after this returns; on a terminal a daemon thread rewrites
    the line once a second for as long as the wait lasts, so the person sees it go down.
    """
    what = "pacing requests under 120 per minute" if endpoint == "global" else f"rate limited on {endpoint} (429)"
    if not is_terminal(sys.stderr):
        click.echo(f"{what}: waiting {seconds:.0f} s before retrying", err=True)
        return

    def tick() -> None:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            click.echo(f"\r{what}: retrying in {left:4.0f} s ", err=True, nl=False)
            time.sleep(min(1.0, left))
        click.echo(f"\r{what}: retrying now{' ' * 8}", err=True)

    threading.Thread(target=tick, name="gitops-countdown", daemon=True).start()


def options_from(
    ctx: click.Context,
    *,
    manifest: Path,
    ref: str | None,
    refresh: str,
    max_wait: float,
    state_dir: Path | None,
    servers: tuple[str, ...] = (),
    branches: tuple[str, ...] = (),
    verify: VerifyOverrides | None = None,
    unattended_apply: bool = False,
    deploy_how: Literal["apply", "rollback"] = "apply",
) -> Any:
    """The run's :class:`Options`, built once (they are frozen): every value a command decides is given here."""
    # Not at the top: gitops --help imports this module and would pay for it.
    from gitops.render.progress import Progress  # noqa: PLC0415 (boundary: the lazy group)

    injected = ctx.find_root().obj or {}
    env = run_environment(ctx)
    codeset = ctx.meta.get("gitops.codeset")
    if codeset:
        env["GITOPS_CODESET"] = codeset
    return Options(
        clock=injected.get("clock") or SystemClock(),
        transport=injected.get("transport"),
        manifest=manifest,
        env=env,
        ref=ref,
        refresh=refresh,  # type: ignore[arg-type]
        max_wait=max_wait,
        state_dir=state_dir,
        on_wait=countdown,
        log=debug_log(ctx),
        waiting=Progress().waiting,
        targets=Targets.of(servers, branches),
        verify=verify,
        unattended_apply=unattended_apply,
        deploy_how=deploy_how,
    )


def ci_context(ctx: click.Context) -> dict[str, Any]:
    """What a CI step's run takes from the CLI: the clock and transport a test injects, the retry countdown, the
    debug log (``gitops action``, ``gitops gitlab``)."""
    injected = ctx.find_root().obj or {}
    clock, transport = injected.get("clock"), injected.get("transport")
    return {"clock": clock, "transport": transport, "on_wait": countdown, "log": debug_log(ctx)}


def use_color(no_color: bool) -> bool:
    """Colour only on a terminal, and not with ``--no-color``, a non-empty ``NO_COLOR`` (no-color.org) or TERM=dumb."""
    root = click.get_current_context(silent=True)
    group_says = root is not None and bool((root.find_root().obj or {}).get("no_color"))
    if no_color or group_says or os.environ.get("NO_COLOR", "") != "":
        return False
    return is_terminal(sys.stdout) and os.environ.get("TERM") != "dumb"


def debug_from_env(env: Mapping[str, str] | None = None) -> bool:
    """Whether ``GITOPS_DEBUG`` asks for debug output: set, non-empty, and not 0, false, no or off."""
    value = (os.environ if env is None else env).get("GITOPS_DEBUG", "").strip().lower()
    return value not in ("", "0", "false", "no", "off")


def print_unlock_links(error: Any) -> None:
    """After a budget refusal: the no-rate-limit link, whole only on an interactive terminal."""
    links: dict[str, Any] = getattr(error, "unlock_links", {}) or {}
    for server, link in links.items():
        if is_terminal(sys.stderr) and is_terminal(sys.stdin):
            shown = link.reveal()
            click.echo(f"No-rate-limit link for server '{server}' (open it, press Proceed): {shown}", err=True)
        else:
            click.echo(
                f"No-rate-limit link for server '{server}': {redact(link.reveal())}\n"
                f"(the token in it is shown as {HIDDEN} because this is not an interactive terminal; "
                f"run 'gitops unlock --server {server}' at a terminal to see it whole)",
                err=True,
            )


#: Whether this run printed its JSON document on stdout (then an error is not printed there as JSON too).
_JSON_STATE = {"printed": False}


def echo_json(text: str) -> None:
    """Print a command's JSON document on stdout (redacted), and remember that it was printed."""
    _JSON_STATE["printed"] = True
    click.echo(redact(text), nl=not text.endswith("\n"))


def json_printed() -> bool:
    return _JSON_STATE["printed"]


def forget_json() -> None:
    """A new run (the CLI runs in-process in tests and in the Action): nothing printed yet."""
    _JSON_STATE["printed"] = False


def wants_json(args: list[str]) -> bool:
    """Whether the command line asks for JSON (``--json``, ``--format json``, ``--format=json``)."""
    for index, arg in enumerate(args):
        if arg in {"--json", "--format=json"}:
            return True
        if arg == "--format" and index + 1 < len(args) and args[index + 1] == "json":
            return True
    return False
