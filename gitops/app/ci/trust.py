"""What a CI run may be given: which credentials it masks, whether a change request may use them, and what a run
without them says.

A change request's code and manifest are not yet reviewed: planned with a deploy credential, a changed server url
or build could take the credential elsewhere, so such a plan is refused (:func:`refuse_changed_routes`), on every
CI system alike. When credentials are missing the plan is made from the ledger alone (:func:`lacks_credentials`
decides it before the session opens) and the notices say why.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from gitops.app.ci.host import BaseManifest, ChangeRequest, Host, HostWords
from gitops.app.ci.report import Report
from gitops.app.session import Session, servers_of
from gitops.config.credentials import CredentialsFileError, auth_available
from gitops.config.manifest import LoadedManifest, load_manifest
from gitops.config.routes import route_changes
from gitops.edges.gitout import git_output, git_text
from gitops.errors import GitopsError, TrustError

#: Reads the manifest at a path of the repository in a commit from the CI system's API, when the checkout lacks it:
#: its bytes, ``None`` when the commit has no such file, or a :class:`BaseManifest` saying why it could not be read.
Fetch = Callable[[str, str], "bytes | BaseManifest | None"]


class Mask(Protocol):
    def __call__(self, value: str, *, prefix: bool = False, register: bool = True) -> None: ...


def mask_credentials(mask: Mask, session: Session, server: str) -> None:
    """Mask the server's credentials (also those the job's own environment supplies) and the no-rate-limit link."""
    for text, token in session.auth(server).secret_texts():
        mask(text, prefix=token)
    link = session.unlock_link(server)
    if link is not None:
        mask(link.reveal(), register=False)


def lacks_credentials(loaded: LoadedManifest, env: Mapping[str, str]) -> bool:
    """Whether some server of the run has no credentials (:meth:`Session.has_credentials`, asked before the session
    opens, so that its options are made once with the refresh they need; a broken credentials file is left for the
    session's own check to report, where it always was)."""
    for name in servers_of(loaded):
        try:
            if not auth_available(loaded.manifest.servers[name], env, cwd=loaded.base_dir):
                return True
        except CredentialsFileError:
            continue
    return False


def no_credentials_notice(missing: list[str], change: ChangeRequest | None, words: HostWords) -> str:
    """Why the plan was made from the ledger alone, for the summary and the comment."""
    names = ", ".join(f"'{m}'" for m in missing)
    if change is not None and change.from_fork:
        why = (
            f"This {words.change} comes from a fork, and {words.fork}, so there are no credentials for server {names}."
        )
    elif change is not None:
        why = (
            f"A {words.change}'s plan runs without the deploy token for server {names}, as it should: the "
            f"{words.change}'s code and manifest could otherwise take it or send it elsewhere."
        )
    else:
        why = f"There are no credentials for server {names} in this run (the inputs and the environment are empty)."
    return (
        f"{why} The plan was made from the ledger alone (refresh: never): no request was sent to the game server, "
        "and what it shows of the server is what this tool last learnt there, not a fresh download. "
        "The deploy after merging plans again with the credentials."
    )


def compare_with_base(loaded: LoadedManifest, change: ChangeRequest, host: Host, report: Report) -> None:
    """Fill the report's servers and route changes: this change request's manifest against the base commit's."""
    report.servers = {name: config.url for name, config in loaded.manifest.servers.items()}
    base = host.base_manifest(loaded, change.base_sha)
    if base.manifest is None:
        report.routes_unknown = base.why
        return
    report.route_changes = route_changes(base.manifest, loaded.manifest)


def refuse_changed_routes(report: Report, words: HostWords) -> None:
    """:class:`TrustError` when a change request planned with a credential changes where credentials go, or a
    build, or when that cannot be known: the credential would follow the change request's manifest."""
    if report.routes_unknown:
        raise TrustError(
            f"this {words.change}'s plan holds a deploy credential, and its manifest could not be compared with the "
            f"base branch's ({report.routes_unknown}); nothing was sent",
            hint=words.routes_unknown_hint,
        )
    if report.route_changes:
        changes = "; ".join(change.text() for change in report.route_changes)
        raise TrustError(
            f"this {words.change} changes where credentials go or what a build runs, and its plan holds a deploy "
            f"credential, so nothing was sent: {changes}",
            hint=words.routes_hint,
        )


def read_base_manifest(
    loaded: LoadedManifest, base_sha: str, *, unreachable: str, fetch: Fetch | None = None
) -> BaseManifest:
    """The manifest file at ``loaded``'s path in commit ``base_sha``, validated as any manifest: from the checkout's
    own Git objects when the commit is there, else through ``fetch`` (``unreachable`` says why not, without one).
    Nothing here runs the repository's code: ``git show``, and the host's one read."""
    if not base_sha:
        return BaseManifest(None, "the event names no base commit")
    prefix = git_text(["rev-parse", "--show-prefix"], loaded.path.parent)
    in_repo = (prefix or "") + loaded.path.name
    raw: bytes | BaseManifest | None = git_output(["show", f"{base_sha}:{in_repo}"], loaded.path.parent)
    if raw is None and fetch is not None:
        raw = fetch(in_repo, base_sha)
        if raw is None:
            return BaseManifest(None, f"the base commit {base_sha[:12]} has no {in_repo}")
    if isinstance(raw, BaseManifest):
        return raw
    if raw is None:
        return BaseManifest(None, f"commit {base_sha[:12]} {unreachable}")
    with tempfile.TemporaryDirectory(prefix="gitops-base-") as folder:
        path = Path(folder) / loaded.path.name
        path.write_bytes(raw)
        try:
            return BaseManifest(load_manifest(path).manifest)
        except GitopsError:
            return BaseManifest(None, f"the base commit's {in_repo} is not a valid manifest")
