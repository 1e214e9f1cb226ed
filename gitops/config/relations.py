"""The manifest's rules that relate values: one way of credentials per server, branches naming known servers, each
branch listed once, one active branch per server and kind, reserve keys from the limits table.

They run once per validation (:func:`gitops.config.validation.validate`), on the data as loaded rather than on the
models, so they are reported even where a type error elsewhere means there is no model; so each rule must accept
data of any shape. Each problem is a key path and its text: what is wrong and how to fix it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gitops.config import model
from gitops.config.reading import Loc
from gitops.core.endpoints import ENDPOINT_LIMITS, MAX_BRANCHES

__all__ = ["LITERAL_USER_KEYS", "SECRET_KEYS", "close_matches", "relation_problems"]

_SERVER_NAME = re.compile(model.SERVER_NAME)
#: Keys that would hold a literal secret, by the kind of secret: refused (an unknown key) with a word on where the
#: secret goes instead.
SECRET_KEYS = {
    "token": "token",
    "token_value": "token",
    "auth_token": "token",
    "api_token": "token",
    "access_token": "token",
    "api_key": "token",
    "apikey": "token",
    "secret": "token",
    "password": "password",
    "passwd": "password",
    "pass": "password",
}
#: Keys that would hold a literal user name.
LITERAL_USER_KEYS = {"username", "user", "email"}


def close_matches(key: str, candidates: list[str]) -> list[str]:
    return difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)


def _given(raw: Mapping[str, Any], key: str) -> bool:
    return raw.get(key) is not None


def _server_rules(raw: Mapping[str, Any]) -> list[tuple[Loc, str]]:
    problems: list[tuple[Loc, str]] = []
    token, user, password, entry = (
        _given(raw, k) for k in ("token_env", "username_env", "password_env", "credentials")
    )
    if user and not password:
        problems.append(
            (("username_env",), "needs password_env too (private servers sign in with both); add password_env")
        )
    if password and not user:
        problems.append(
            (("password_env",), "needs username_env too (private servers sign in with both); add username_env")
        )
    ways = [name for name, on in (("token_env", token), ("username_env/password_env", user or password)) if on]
    if entry:
        ways.append("credentials")
    if len(ways) > 1:
        problems.append(((), f"names credentials in more than one way ({', '.join(ways)}); keep exactly one"))
    elif not ways and not any(k in SECRET_KEYS or k in LITERAL_USER_KEYS for k in raw):
        problems.append(
            (
                (),
                "names no credentials; add token_env (a token, official servers), username_env and password_env "
                "(private servers), or credentials (an entry of the unified credentials file .screeps.yaml)",
            )
        )
    return problems


def _budget_rules(raw: Mapping[str, Any]) -> list[tuple[Loc, str]]:
    problems: list[tuple[Loc, str]] = []
    reserve = raw.get("reserve")
    if not isinstance(reserve, dict):
        return problems
    # The global limit is paced by the client, not reserved: a reserve names an endpoint of the table.
    known = dict(ENDPOINT_LIMITS)
    for key, value in reserve.items():
        if not isinstance(key, str):
            continue
        limit = known.get(key)
        if limit is None:
            close = close_matches(key, list(known))
            fix = f"did you mean '{close[0]}'?" if close else "use an endpoint of the limits table"
            problems.append(
                (("reserve", key), f"is not a rate-limited endpoint; {fix} (see the limits: gitops help manifest)")
            )
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            continue  # pydantic reports the type
        if value < 0:
            problems.append((("reserve", key), f"{value} is negative; keep back 0 requests or more"))
        elif value >= limit.count:
            problems.append(
                (
                    ("reserve", key),
                    f"{value} is not below the limit ({limit.describe()}); keep back fewer requests than that",
                )
            )
    return problems


def _manifest_rules(raw: Mapping[str, Any]) -> list[tuple[Loc, str]]:
    """Rules across servers and branches (not the per-server and budget rules, which their models check)."""
    servers = raw.get("servers")
    problems = _server_name_rules(servers)
    branches = raw.get("branches")
    if not isinstance(branches, list):
        return problems
    if not branches:
        problems.append((("branches",), "lists no branches; add one, e.g. - {server: local, branch: main}"))
    listing = _BranchListing()
    for i, entry in enumerate(branches):
        if isinstance(entry, dict):
            problems += _branch_entry_rules(i, entry, servers, listing)
    return problems + _listing_rules(listing)


def _server_name_rules(servers: Any) -> list[tuple[Loc, str]]:
    """The ``servers`` mapping: at least one server, each with a usable name."""
    problems: list[tuple[Loc, str]] = []
    if not isinstance(servers, dict):
        return problems
    if not servers:
        problems.append(
            (("servers",), "lists no servers; add one, e.g. local: {url: http://127.0.0.1:21025, token_env: ...}")
        )
    for name in servers:
        if isinstance(name, str) and not _SERVER_NAME.fullmatch(name):
            problems.append(
                (
                    ("servers", name),
                    "is not a usable server name; use letters, digits, '-', '_' and '.', starting with a "
                    "letter or digit",
                )
            )
    return problems


@dataclass
class _BranchListing:
    """What the branch entries say together, gathered entry by entry for the rules that compare them."""

    #: The index of each (server, branch) where it is first listed.
    seen: dict[tuple[str, str], int] = field(default_factory=dict)
    #: Per server, each standby branch and the index of the entry that names it.
    standbys: dict[str, dict[str, int]] = field(default_factory=dict)
    #: The indexes of the entries that activate (server, 'world' or 'sim').
    active: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    #: The branch names deployed to each server.
    per_server: dict[str, set[str]] = field(default_factory=dict)


def _branch_entry_rules(
    i: int, entry: Mapping[str, Any], servers: Any, listing: _BranchListing
) -> list[tuple[Loc, str]]:
    """One entry of ``branches``: a known server, listed once, a consistent ``verify``; noted in ``listing``."""
    problems: list[tuple[Loc, str]] = []
    server, name = entry.get("server"), entry.get("branch")
    if isinstance(server, str) and isinstance(servers, dict) and servers and server not in servers:
        known = ", ".join(str(s) for s in servers)
        problems.append(
            (("branches", i, "server"), f"'{server}' is not a server of this manifest; use one of: {known}")
        )
    if not (isinstance(server, str) and isinstance(name, str)):
        return problems
    listing.per_server.setdefault(server, set()).add(name)
    first = listing.seen.setdefault((server, name), i)
    if first != i:
        problems.append(
            (
                ("branches", i),
                f"branch '{name}' of server '{server}' is already listed at branches[{first}]; list each branch once",
            )
        )
        return problems
    activate = entry.get("activate")
    verify = entry.get("verify")
    if isinstance(verify, dict):
        problems += _verify_rules(i, verify, server, name, listing)
        if not (isinstance(activate, list) and activate):
            problems.append(
                (
                    ("branches", i, "verify"),
                    "needs the branch to be activated (the console shows the active code); add activate: [world]",
                )
            )
    if isinstance(activate, list):
        for which in dict.fromkeys(a for a in activate if a in ("world", "sim")):
            listing.active.setdefault((server, which), []).append(i)
    return problems


def _verify_rules(
    i: int, verify: Mapping[str, Any], server: str, name: str, listing: _BranchListing
) -> list[tuple[Loc, str]]:
    """A branch's ``verify``: ``standby`` exactly with ``rollback: standby``, and not the branch itself."""
    problems: list[tuple[Loc, str]] = []
    standby = verify.get("standby")
    if verify.get("rollback") == "standby" and not isinstance(standby, str):
        problems.append(
            (
                ("branches", i, "verify"),
                "rollback: standby needs standby: BRANCH, the second branch that takes turns with this one",
            )
        )
    if isinstance(standby, str):
        if verify.get("rollback") != "standby":
            problems.append((("branches", i, "verify", "standby"), "is only for rollback: standby; add it"))
        if standby == name:
            problems.append((("branches", i, "verify", "standby"), "must differ from the branch itself"))
        listing.standbys.setdefault(server, {})[standby] = i
    return problems


def _listing_rules(listing: _BranchListing) -> list[tuple[Loc, str]]:
    """Across entries: no standby also listed, one active branch per server and kind, the server's branch limit."""
    problems: list[tuple[Loc, str]] = []
    for server, standby_of in listing.standbys.items():
        for standby, i in standby_of.items():
            if (server, standby) in listing.seen:
                problems.append(
                    (
                        ("branches", i, "verify", "standby"),
                        f"'{standby}' is also listed under branches; a standby branch is this tool's to switch, "
                        "list it only here",
                    )
                )
    for (server, which), indexes in listing.active.items():
        for i in indexes[1:]:
            problems.append(
                (
                    ("branches", i, "activate"),
                    f"branches[{indexes[0]}] already activates '{which}' on server '{server}', and a server has "
                    f"one active {which} branch; keep activate: [{which}] on one of them",
                )
            )
    for server_name, names in listing.per_server.items():
        if len(names) > MAX_BRANCHES:
            problems.append(
                (
                    ("branches",),
                    f"server '{server_name}' gets {len(names)} branches, but a user has at most {MAX_BRANCHES}; "
                    "deploy fewer branches",
                )
            )
    return problems


def relation_problems(raw: Any) -> list[tuple[Loc, str]]:
    """Every cross-field rule, on raw YAML data of any shape."""
    if not isinstance(raw, dict):
        return []
    problems = list(_manifest_rules(raw))
    servers = raw.get("servers")
    if isinstance(servers, dict):
        for name, server in servers.items():
            if isinstance(server, dict):
                problems += [(("servers", name, *loc), msg) for loc, msg in _server_rules(server)]
    budget = raw.get("budget")
    if isinstance(budget, dict):
        problems += [(("budget", *loc), msg) for loc, msg in _budget_rules(budget)]
    return problems
