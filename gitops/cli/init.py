"""``gitops init``: a commented manifest for the repository it runs in (and, with ``--pull``, the server's code)."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

import click

from gitops.cli.common import manifest_option, max_wait_option, state_dir_option
from gitops.config.manifest import BranchConfig, Manifest
from gitops.config.scaffold import DEFAULT_BRANCH, DEFAULT_URL, check_reads_back
from gitops.core.layout import Layout
from gitops.errors import ManifestError, UsageError
from gitops.inert import inert


@click.command("init")
@manifest_option
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
    from gitops.app.adopting import probe_version, refuse_existing, snapshot_of, write_new_manifest
    from gitops.config.credentials import entry_for
    from gitops.config.manifest import load_manifest
    from gitops.config.scaffold import (
        DEFAULT_PASSWORD_ENV,
        DEFAULT_TOKEN_ENV,
        DEFAULT_USERNAME_ENV,
        ServerChoice,
        manifest_data,
        manifest_text,
        server_name_for,
        signin_for,
    )
    from gitops.core.endpoints import is_official
    from gitops.core.layout import detect_layout

    ways = [w for w in (token_env, credentials, username_env or password_env) if w is not None]
    if len(ways) > 1:
        raise UsageError(
            "--token-env, --credentials and --username-env/--password-env name credentials in different ways; "
            "give one of them"
        )
    if (username_env is None) != (password_env is None):
        raise UsageError("--username-env and --password-env go together; give both (private servers)")
    refuse_existing(manifest)
    folder = manifest.parent if str(manifest.parent) else Path(".")
    layout = detect_layout(snapshot_of(folder))
    server = ServerChoice(
        name=name or server_name_for(url),
        url=url,
        token_env=None if (credentials or username_env) else (token_env or DEFAULT_TOKEN_ENV),
        credentials=credentials,
        username_env=username_env,
        password_env=password_env,
    )
    _check_text(manifest_text(layout, server, branch))  # a bad --server URL or variable name is the person's to fix
    signin_seen: tuple[str, ...] = ()
    found = entry_for(folder, url)
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
    if found is not None:
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
    text = manifest_text(layout, server, branch)
    prefetched = None
    if then_pull:
        from gitops.app.adopting import download_branches, fit_to_server
        from gitops.cli.common import options_from
        from gitops.edges.sources import worktree_files

        options = options_from(
            ctx, manifest=manifest, ref=None, refresh="always", max_wait=max_wait, state_dir=state_dir
        )
        prefetched = download_branches(options, text, manifest)
        if not layout.branch_roots:
            code = prefetched.get((server.name, branch))
            if code is not None:
                listing = worktree_files(folder.resolve(), layout.root) or []

                def render(candidate: Layout) -> BranchConfig:
                    return _check_text(manifest_text(candidate, server, branch)).branches[0]

                layout = fit_to_server(layout, code, listing, render)
                text = manifest_text(layout, server, branch)
    _check_text(text)
    meant = manifest_data(layout, server, branch)
    check_reads_back(text, meant, where=str(manifest))
    write_new_manifest(manifest, text, meant)
    _say(f"Detected layout: {layout.kind} (root {layout.root}, separator {layout.separator!r})")
    for line in layout.seen:
        _say(f"  - {line}")
    for line in dict.fromkeys((*layout.assumed, *server.assumed)):  # each guess once
        _say(f"  - assumed: {line}")
    branches = layout.branch_roots or (branch,)
    shown = ", ".join(repr(b) for b in branches)
    _say(f"Wrote {manifest}: branch{'es' if len(branches) > 1 else ''} {shown} on server {server.name!r} ({url})")
    if layout.build is not None:
        _say(f"Build command: {layout.build.replace('{server}', server.name)} (run by validate, plan and apply)")
    if layout.optional_requires:
        listed = ", ".join(repr(n) for n in layout.optional_requires)
        _say(
            f"Requires that may never run (in try blocks, functions or blocks) and that no file holds: {listed}; "
            "validate warns about each; see requires in the manifest"
        )
    load_manifest(manifest)  # what was written validates as a manifest
    if server.credentials is not None:
        from gitops.app.adopting import ignore_credentials_file

        ignored = ignore_credentials_file(folder)
        if ignored is not None:
            _say(f"Added .screeps.yaml to {ignored}: the credentials file holds a token, Git must not commit it")
    if then_pull:
        from gitops.cli.pull import run_pull

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
    return 0


def _say(line: str) -> None:
    """One line of init's report, which shows outside text (a server's version, file and entry names): inert."""
    click.echo(inert(line, one_line=True))


def _check_text(text: str) -> Manifest:
    """The manifest ``text`` validated, or :class:`UsageError` naming the option to fix."""
    import yaml

    from gitops.config.manifest import manifest_from_data

    try:
        return manifest_from_data(yaml.safe_load(text))
    except ManifestError as exc:
        raise UsageError(
            "the options make an invalid manifest:\n" + "\n".join(f"  - {p}" for p in exc.problems),
            hint="Fix the option named by the key (servers.*.url is --server, token_env is --token-env, ...).",
        ) from None
