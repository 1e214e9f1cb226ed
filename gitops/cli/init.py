"""``gitops init``: a commented manifest for the repository it runs in (and, with ``--pull``, the server's code)."""

from __future__ import annotations

from pathlib import Path

import click

from gitops.cli.common import manifest_option, max_wait_option, state_dir_option
from gitops.config.scaffold import DEFAULT_BRANCH, DEFAULT_URL


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

    Refuses to overwrite an existing manifest (exit 4). With --pull, then brings the server's code into the
    branch's root (see 'gitops pull --help').
    """
    from gitops.app.adopting import refuse_existing, snapshot_of, write_new_manifest
    from gitops.config.manifest import load_manifest
    from gitops.config.scaffold import DEFAULT_TOKEN_ENV, ServerChoice, manifest_text, server_name_for
    from gitops.core.layout import detect_layout
    from gitops.errors import ManifestError, UsageError

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
    text = manifest_text(layout, server, branch)
    # Check the text before it exists on disk: a bad --server URL or variable name is the person's to fix.
    import yaml

    from gitops.config.manifest import manifest_from_data

    try:
        manifest_from_data(yaml.safe_load(text))
    except ManifestError as exc:
        raise UsageError(
            "the options make an invalid manifest:\n" + "\n".join(f"  - {p}" for p in exc.problems),
            hint="Fix the option named by the key (servers.*.url is --server, token_env is --token-env, ...).",
        ) from None
    write_new_manifest(manifest, text)
    click.echo(f"Detected layout: {layout.kind} (root {layout.root}, separator {layout.separator!r})")
    for line in layout.seen:
        click.echo(f"  - {line}")
    click.echo(f"Wrote {manifest}: branch {branch!r} on server {server.name!r} ({url})")
    if layout.build is not None:
        click.echo(f"Build command: {layout.build} (run by validate, plan and apply)")
    load_manifest(manifest)  # what was written validates as a manifest
    if credentials is not None:
        from gitops.app.adopting import ignore_credentials_file

        ignored = ignore_credentials_file(folder)
        if ignored is not None:
            click.echo(f"Added {ignored.name} to {ignored}: the credentials file holds a token, Git must not commit it")
    secret = server.token_env or server.password_env
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
        )
    click.echo("Next:")
    if secret is not None:
        click.echo(f"  export {secret}=...        # never in the manifest")
    click.echo("  gitops pull                 # bring the server's code into the repository (optional)")
    click.echo("  gitops validate             # check the manifest and the local code, no network")
    click.echo("  gitops plan                 # what apply would change")
    return 0
