"""The local ledger: what this tool has learnt of one server account, kept between runs.

Four concerns, one module each: ``format`` (the JSON file and its version), ``store`` (where the file lives, the
run's lock, writes a crash cannot tear), ``seal`` (the HMAC only a run holding the credential can make or check)
and ``knowledge`` (:class:`Ledger`, what the ledger knows: the client's
observer). Importers take the names from here, so that the file's form can change without them.
"""

from __future__ import annotations

from gitops.config.folders import STATE_DIR_ENV, default_state_dir
from gitops.config.manifest import ActiveName
from gitops.edges.ledger.format import FORMAT_VERSION
from gitops.edges.ledger.knowledge import Ledger
from gitops.edges.ledger.seal import SealKey
from gitops.edges.ledger.store import LOCK_WAIT_ENV, LOCK_WAIT_SECONDS, lock_wait

__all__ = [
    "FORMAT_VERSION",
    "LOCK_WAIT_ENV",
    "LOCK_WAIT_SECONDS",
    "STATE_DIR_ENV",
    "ActiveName",
    "Ledger",
    "SealKey",
    "default_state_dir",
    "lock_wait",
]
