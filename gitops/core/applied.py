"""The last applied record: what this tool last made one branch hold, as digests and sizes, never text.

The ledger keeps one per branch (and one for an upload not yet known to have landed), and drift is measured
against it (``gitops.core.drift``). The value lives apart from the drift rules so that the ledger, read before a
plan's first request, can build it without loading the drift rules and the plan models, which the local read's
worker imports while the servers answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from gitops.core.remote import ModuleFacts

__all__ = ["AppliedHow", "AppliedRecord"]

#: How a last-applied record came about: the tool uploaded it, or found the server already equal to the repository.
AppliedHow = Literal["upload", "verified"]


@dataclass(frozen=True, slots=True)
class AppliedRecord:
    """What this tool last made one branch hold: module digests and sizes (never text), with when and from what."""

    branch: str
    modules: Mapping[str, ModuleFacts]
    digest: str
    applied_at: float
    how: AppliedHow
    commit: str | None = None
    source: str | None = None
