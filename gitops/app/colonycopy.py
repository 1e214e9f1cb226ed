"""``gitops rehearse --from-server NAME``: read a copy of the account's colony, within the token's budget.

The server's credentials are read as ``plan`` reads them (the session, :mod:`gitops.app.session`); the requests
(:func:`gitops.core.colony.colony_needs`, all read-only) are checked against what remains of the token's limits
before any is sent: exit 3 (:class:`BudgetError`) when they do not fit, as a plan that does not fit. The session
is closed (its ledger saved) before the throwaway world starts: the world and the bots never see a credential.
"""

from __future__ import annotations

from gitops.app.budgetgates import short_rows
from gitops.app.options import Options
from gitops.app.session import Session, open_session
from gitops.config.manifest import LoadedManifest
from gitops.core.budget import shortfall_message
from gitops.core.colony import MAX_ROOMS, Colony, colony_needs
from gitops.edges.service.colonyread import read_colony
from gitops.errors import BudgetError, UsageError


def copy_colony(options: Options, loaded: LoadedManifest, server: str) -> Colony:
    """The colony of ``server``'s account (a server of the manifest), read with read-only requests that fit the
    budget; :class:`BudgetError` before any request when they do not."""
    if server not in loaded.manifest.servers:
        known = ", ".join(sorted(loaded.manifest.servers)) or "none"
        raise UsageError(
            f"--from-server {server}: the manifest {loaded.display} has no server of that name (it has: {known})",
            hint="Name a server of the manifest's 'servers:' whose account's colony should be copied.",
        )
    with open_session(options, loaded) as session:
        check_colony_budget(session, server)
        colony = read_colony(session.client(server))
        session.save(server)
    return colony


def check_colony_budget(session: Session, server: str) -> None:
    """Refuse (exit 3, nothing sent) when the copy's requests do not fit what remains of the token's limits."""
    needs = colony_needs(MAX_ROOMS)
    short = _short(session, server, needs)
    if short and session.learn_unlimited(server):
        short = _short(session, server, needs)
    if short:
        raise BudgetError(
            "the copy of the colony needs more requests than remain; nothing was sent:\n"
            + "\n".join(f"  - {line}" for line in short),
            hint=f"Wait for the reset, rehearse without --from-server (a fresh start), or lift the limits for two "
            f"hours: 'gitops unlock --server {server}' prints the no-rate-limit link.",
        )


def _short(session: Session, server: str, needs: dict[str, int]) -> list[str]:
    rows = short_rows(session, server, needs)
    return [shortfall_message(r).replace("the plan needs", "the copy needs") for r in rows]


__all__ = ["check_colony_budget", "copy_colony"]
