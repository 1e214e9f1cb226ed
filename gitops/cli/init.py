"""``gitops init``: a commented manifest for the repository it runs in (and, with ``--pull``, the server's code).

A player's first contact with the tool: it must work on the repository they already have. init detects the layout
(:func:`gitops.core.layoutdetect.detect_layout`), picks how the manifest signs in (a credentials-file entry, or what a
private server says of itself), writes a manifest that reads back as what it meant, and never overwrites one. With
``--pull`` it first downloads the server's code and widens the layout until every module reads back as itself, then
pulls. The command is cut into those phases; only the private server's question and ``--pull`` import the HTTP
client and the session.
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click
import yaml

from gitops.app.adopting import ignore_credentials_file, refuse_existing, snapshot_of, write_new_manifest
from gitops.app.initpull import download_branches, fit_to_server
from gitops.app.scaffold import (
    DEFAULT_BRANCH,
    DEFAULT_PASSWORD_ENV,
    DEFAULT_TOKEN_ENV,
    DEFAULT_URL,
    DEFAULT_USERNAME_ENV,
    ServerChoice,
    check_reads_back,
    manifest_data,
    manifest_text,
    server_name_for,
    signin_for,
)
from gitops.app.serverprobe import probe_version
from gitops.cli.common import max_wait_option, new_manifest_option, options_from, state_dir_option
from gitops.cli.pull import run_pull
from gitops.config.credentials import entry_for
from gitops.config.manifest import BranchConfig, Manifest, load_manifest, manifest_from_data
from gitops.core.endpoints import is_official
from gitops.core.layout import Layout, RepoSnapshot, workspaces
from gitops.core.layoutdetect import detect_layout
from gitops.edges.worktree import worktree_files
from gitops.errors import ManifestError, UsageError
from gitops.inert import inert

if TYPE_CHECKING:
    from gitops.app.options import Options
    from gitops.core.codeset import CodeSet

#: The screepers credentials file's entry written for the server's URL: (its name, the file), or ``None``.
FoundEntry = tuple[str, Path] | None


@click.command("init")
@new_manifest_option
@click.option(
    "--server",
    "url",
    default=DEFAULT_URL,
    show_default=True,
    metavar="URL",
    help="The server's base URL, with its path prefix: https://screeps.com/ptr, http://127.0.0.1:21025.",
)
@click.option("--name", default=None, help="The server's name in the manifest [default: mmo, ptr, season, local, ...].")
@click.option(
    "--branch",
    default=DEFAULT_BRANCH,
    metavar="NAME",
    show_default=True,
    help="The branch to deploy to (every account starts with 'default').",
)
@click.option(
    "--token-env", default=None, metavar="VAR", help="Environment variable holding the token [SCREEPS_TOKEN]."
)
@click.option("--credentials", default=None, metavar="NAME", help="An entry of the screepers credentials file.")
@click.option("--username-env", default=None, metavar="VAR", help="Private servers: variable holding the user name.")
@click.option("--password-env", default=None, metavar="VAR", help="Private servers: variable holding the password.")
@click.option("--pull", "then_pull", is_flag=True, help="Then bring the server's code into the repository (pull).")
@state_dir_option
@max_wait_option
@click.pass_context
def init(
    ctx: click.Context,
    manifest: Path,
    url: str,
    name: str | None,
    branch: str,
    token_env: str | None,
    credentials: str | None,
    username_env: str | None,
    password_env: str | None,
    then_pull: bool,
    state_dir: Path | None,
    max_wait: float,
) -> int:
    """Write a commented gitops.yaml for this repository, detecting its layout.

    It picks what the repository's own tooling does: the package script that runs the bundler whose output is the
    root, the separator the code's requires use, one branch per folder in the game client's layout, and for a
    private server a user name and password (asked of the server's /api/version when it answers). What it cannot
    tell, it says, on the terminal and in the manifest's comments. Refuses to overwrite an existing manifest
    (exit 4). With --pull it first downloads the branch, writes a manifest that reads every module the server
    holds back as itself (source maps, binary modules, names with '/'), then writes the modules as files (see
    'gitops pull --help'). 'gitops help layouts' explains the layouts.
    """
    ways = _one_way_to_sign_in(token_env, credentials, username_env, password_env)
    refuse_existing(manifest)
    folder = manifest.parent if str(manifest.parent) else Path(".")
    snapshot = snapshot_of(folder)
    layout = detect_layout(snapshot)
    _refuse_workspaces_root(snapshot, layout, folder)
    server = ServerChoice(
        name=name or server_name_for(url),
        url=url,
        token_env=None if (credentials or username_env) else (token_env or DEFAULT_TOKEN_ENV),
        credentials=credentials,
        username_env=username_env,
        password_env=password_env,
    )
    _check_text(manifest_text(layout, server, branch))  # a bad --server URL or variable name is the person's to fix
    found = entry_for(folder, url)
    server, layout = _choose_signin(server, layout, url, ways=bool(ways), found=found)
    text = manifest_text(layout, server, branch)
    prefetched = None
    if then_pull:
        options = options_from(
            ctx, manifest=manifest, ref=None, refresh="always", max_wait=max_wait, state_dir=state_dir
        )
        prefetched, layout, text = _download_and_fit(options, manifest, folder, layout, server, branch, text)
    _write_manifest(manifest, layout, server, branch, text)
    _report_written(manifest, layout, server, branch)
    load_manifest(manifest)  # what was written validates as a manifest
    if server.credentials is not None:
        ignored = ignore_credentials_file(folder)
        if ignored is not None:
            _say(f"Added .screeps.yaml to {ignored}: the credentials file holds a token, Git must not commit it")
    if then_pull:
        return run_pull(
            ctx,
            manifest=manifest,
            servers=(),
            branches=(),
            force=False,
            dry_run=False,
            state_dir=state_dir,
            max_wait=max_wait,
            prefetched=prefetched,
        )
    _print_next_steps(server, layout)
    return 0


def _refuse_workspaces_root(snapshot: RepoSnapshot, layout: Layout, folder: Path) -> None:
    """:class:`UsageError` at the top of an npm workspaces monorepo holding no bot of its own: a manifest there would
    deploy the tools' files; the bot is one of the workspaces."""
    declared = workspaces(snapshot)
    if declared and layout.kind in ("flat", "empty"):
        shown = ", ".join(repr(w) for w in declared[:5])
        raise UsageError(
            f"{folder / 'package.json'} declares npm workspaces ({inert(shown, one_line=True)}) and this folder holds "
            "no bot of its own; gitops init writes a manifest for the folder that holds the bot",
            hint="Run gitops init in the bot's workspace folder (for example: cd packages/bot && gitops init).",
        )


def _one_way_to_sign_in(
    token_env: str | None, credentials: str | None, username_env: str | None, password_env: str | None
) -> list[str]:
    """The ways to sign in the options name (at most one, else :class:`UsageError`)."""
    ways = [w for w in (token_env, credentials, username_env or password_env) if w is not None]
    if len(ways) > 1:
        raise UsageError(
            "--token-env, --credentials and --username-env/--password-env name credentials in different ways; "
            "give one of them"
        )
    if (username_env is None) != (password_env is None):
        raise UsageError("--username-env and --password-env go together; give both (private servers)")
    return ways


def _choose_signin(
    server: ServerChoice, layout: Layout, url: str, *, ways: bool, found: FoundEntry
) -> tuple[ServerChoice, Layout]:
    """How the manifest signs in when the options named no way: the credentials file's entry for ``url`` in the
    repository's own ``.screeps.yaml``, else what a private server's ``/api/version`` says; and the build's
    ``{server}`` replaced by the entry's name. What was seen joins the layout's notes."""
    signin_seen: tuple[str, ...] = ()
    own_entry = found is not None and found[1].name == ".screeps.yaml"
    if not ways and not own_entry and not is_official(url):
        how, signin_seen, assumed = signin_for(url, probe_version(url))
        if how == "password":
            server = ServerChoice(
                name=server.name,
                url=url,
                token_env=None,
                username_env=DEFAULT_USERNAME_ENV,
                password_env=DEFAULT_PASSWORD_ENV,
                assumed=assumed,
            )
        else:
            server = ServerChoice(name=server.name, url=url, assumed=assumed)
    layout = replace(layout, seen=layout.seen + signin_seen)
    if found is None:
        return server, layout
    entry, where = found
    if not ways and own_entry:
        # The player's own deploy tooling signs in with this entry: so does the manifest (init makes Git
        # ignore the file, below).
        server = ServerChoice(name=server.name, url=url, token_env=None, credentials=entry)
        layout = replace(layout, seen=(*layout.seen, f"{where.name} has an entry for {url}: credentials: {entry}"))
    if layout.build is not None and "{server}" in layout.build:
        layout = replace(
            layout,
            # The entry's name comes from a file of the repository (a starter's .example-screeps.yaml): quoted
            # for the shell that runs the build, so a name is only ever a name.
            build=layout.build.replace("{server}", shlex.quote(entry)),
            assumed=tuple(a for a in layout.assumed if "dry-run mode" not in a),
            seen=(*layout.seen, f"the build names entry {entry!r} of {where.name}, written for {url}"),
        )
    return server, layout


def _download_and_fit(
    options: Options, manifest: Path, folder: Path, layout: Layout, server: ServerChoice, branch: str, text: str
) -> tuple[dict[tuple[str, str], CodeSet | None], Layout, str]:
    """``--pull``'s first half: each branch downloaded before the manifest is written, and a single-branch layout
    widened until the manifest reads every module the server holds back as itself. The downloads, the layout and
    the manifest's text."""
    prefetched = download_branches(options, text, manifest)
    if not layout.branch_roots:
        code = prefetched.get((server.name, branch))
        if code is not None:
            listing = worktree_files(folder.resolve(), layout.root) or []

            def render(candidate: Layout) -> BranchConfig:
                return _check_text(manifest_text(candidate, server, branch)).branches[0]

            layout = fit_to_server(layout, code, listing, render)
            text = manifest_text(layout, server, branch)
    return prefetched, layout, text


def _write_manifest(manifest: Path, layout: Layout, server: ServerChoice, branch: str, text: str) -> None:
    """The manifest written, once its text validates and reads back as what the layout and server mean."""
    _check_text(text)
    meant = manifest_data(layout, server, branch)
    check_reads_back(text, meant, where=str(manifest))
    write_new_manifest(manifest, text, meant)


def _report_written(manifest: Path, layout: Layout, server: ServerChoice, branch: str) -> None:
    """What init detected, assumed and wrote."""
    _say(f"Detected layout: {layout.kind} (root {layout.root}, separator {layout.separator!r})")
    for line in layout.seen:
        _say(f"  - {line}")
    for line in dict.fromkeys((*layout.assumed, *server.assumed)):  # each guess once
        _say(f"  - assumed: {line}")
    branches = layout.branch_roots or (branch,)
    shown = ", ".join(repr(b) for b in branches)
    _say(
        f"Wrote {manifest}: branch{'es' if len(branches) > 1 else ''} {shown} on server {server.name!r} ({server.url})"
    )
    if layout.build is not None:
        _say(f"Build command: {layout.build.replace('{server}', server.name)} (run by validate, plan and apply)")
    if layout.optional_requires:
        listed = ", ".join(repr(n) for n in layout.optional_requires)
        _say(
            f"Requires that may never run (in try blocks, functions or blocks) and that no file holds: {listed}; "
            "validate warns about each; see requires in the manifest"
        )


def _print_next_steps(server: ServerChoice, layout: Layout) -> None:
    """What to do after init (without --pull): the variables to set, then pull, validate and plan."""
    click.echo("Next:")
    if server.username_env is not None and server.password_env is not None:
        click.echo(f"  export {server.username_env}=...      # the user name on that server")
        click.echo(f"  export {server.password_env}=...      # its password (screepsmod-auth); never in the manifest")
    elif server.token_env is not None:
        click.echo(f"  export {server.token_env}=...        # never in the manifest")
    if layout.kind == "compiled":
        # The sources are another language: a pull would write JavaScript into the compiler's output, or beside the
        # sources, neither of which is the bot. Build first; the root is the compiler's output.
        _say(f"  {layout.build}   # build the bot first: it writes {layout.root}/, which is what is deployed")
    else:
        click.echo("  gitops pull                 # bring the server's code into the repository (optional)")
    click.echo("  gitops validate             # check the manifest and the local code, no network")
    click.echo("  gitops plan                 # what apply would change")


def _say(line: str) -> None:
    """One line of init's report, which shows outside text (a server's version, file and entry names): inert."""
    click.echo(inert(line, one_line=True))


def _check_text(text: str) -> Manifest:
    """The manifest ``text`` validated, or :class:`UsageError` naming the option to fix."""
    try:
        return manifest_from_data(yaml.safe_load(text))
    except ManifestError as exc:
        raise UsageError(
            "the options make an invalid manifest:\n" + "\n".join(f"  - {p}" for p in exc.problems),
            hint="Fix the option named by the key (servers.*.url is --server, token_env is --token-env, ...).",
        ) from None
