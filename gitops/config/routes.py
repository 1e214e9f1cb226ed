"""Where a manifest sends credentials, and what a change of manifest changes of it (pure: no I/O).

A server's ``url`` is where its token or password goes; ``token_env``, ``username_env``, ``password_env`` and
``credentials`` say which secret goes there (the fields the manifest's model marks as credential fields:
:func:`gitops.config.model.route_fields`); a ``build`` command is code that runs before anything is sent. A pull
request that edits any of them must not be planned with the deploy token (the token would go where the pull request
says), so the Action compares the pull request's manifest with the base branch's (:func:`route_changes`) and shows
each server's url, and any change to it, in the plan comment.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitops.config.model import Manifest, ServerConfig, route_fields

#: The fields of a server that decide where a credential goes and which one (marked in the model).
ROUTE_FIELDS = route_fields(ServerConfig)


@dataclass(frozen=True)
class RouteChange:
    """One difference between the base manifest and the pull request's: ``what`` is ``server 'x' url`` or
    ``branch x/y build``; ``before``/``after`` are the values (``None``: not set, or not there)."""

    what: str
    before: str | None
    after: str | None

    def text(self) -> str:
        return f"{self.what}: {_shown(self.before)} → {_shown(self.after)}"


def _shown(value: str | None) -> str:
    return "(none)" if value is None else repr(value)


def route_changes(base: Manifest, head: Manifest) -> list[RouteChange]:
    """What ``head`` changes of ``base``'s credential routes and build commands, in a stable order."""
    changes: list[RouteChange] = []
    for name in sorted(set(base.servers) | set(head.servers)):
        before, after = base.servers.get(name), head.servers.get(name)
        if before is None or after is None:
            changes.append(
                RouteChange(
                    f"server '{name}'", None if before is None else before.url, None if after is None else after.url
                )
            )
            continue
        # The fields of both: a server of a login kind that adds a field of its own is compared on it too.
        for field in dict.fromkeys((*route_fields(before), *route_fields(after))):
            old, new = getattr(before, field, None), getattr(after, field, None)
            if old != new:
                changes.append(RouteChange(f"server '{name}' {field}", old, new))
    if base.build != head.build:
        changes.append(RouteChange("build", _command(base.build), _command(head.build)))
    base_builds = {(b.server, b.branch): b.build for b in base.branches}
    for branch in head.branches:
        key = (branch.server, branch.branch)
        old = base_builds.get(key)
        if branch.build != old:
            changes.append(
                RouteChange(f"branch {branch.server}/{branch.branch} build", _command(old), _command(branch.build))
            )
    return changes


def _command(command: str | list[str] | None) -> str | None:
    if command is None or isinstance(command, str):
        return command
    return " ".join(command)
