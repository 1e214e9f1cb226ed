"""The ledger's seal: an HMAC that only a run holding the server's credential can make or check (issue 45).

The ledger travels between CI jobs through the Actions cache, which any job of the default branch can write (a build
job's code too, through the runner's cache token). What the ledger says decides uploads: a branch it records as
holding the repository's code is not uploaded again (``--refresh=auto``), and the code an undo restores is the kept
code of the digest it names. So a run that holds a server's credential believes only a ledger file sealed with a key
derived from that credential: HKDF-SHA256 (RFC 5869) of the credential's secret texts, salted and labelled for this
use and this server (another use of the token, or another server, gives an unrelated key), and the seal is
HMAC-SHA256 of the file's data. A file without the seal, or with one that does not verify, is not believed at all
(the store sets it aside: rate-limit figures start from zero, branches are downloaded): "unknown", never "no
changes". A run without the credential (a pull request's plan) cannot check the seal, reads the file as before, and
never writes over a sealed one. The key lives in this process's memory only: never in a file, a log, an exception or
the environment, and the build job, which holds no credential, cannot make it.

In the file the seal is the member ``"seal":"hmac-sha256:<64 hex digits>"`` just before ``check``
(:data:`gitops.edges.ledger.format.CHECK_HEAD`): the MAC covers the compact JSON of the data without ``seal`` and
``check``, exactly as written (as the check, no canonical form needed).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from typing import Final

from gitops.edges.ledger.format import trailing_digest

__all__ = ["SEAL_HEAD", "SealKey", "seal_body", "seal_of", "unsealed_body"]

SEAL_HEAD: Final = b',"seal":"hmac-sha256:'
_SEAL_TAIL = b'"}'

#: HKDF's salt and the label of this use: the same credential keys nothing else with it.
_SALT = b"screeps-gitops ledger seal"
_INFO = b"screeps-gitops/ledger-seal/v1\0"


class SealKey:
    """A ledger's seal key, derived from a credential; it prints as nothing and cannot be pickled."""

    __slots__ = ("_key",)

    def __init__(self, secret_texts: Iterable[str], server_url: str) -> None:
        material = b"\0".join(text.encode("utf-8") for text in secret_texts)
        prk = hmac.new(_SALT, material, hashlib.sha256).digest()  # HKDF-Extract
        info = _INFO + server_url.encode("utf-8")
        self._key = hmac.new(prk, info + b"\x01", hashlib.sha256).digest()  # HKDF-Expand, one block

    def mac(self, body: bytes) -> bytes:
        """The seal of ``body``: 64 lower-case hex digits."""
        return hmac.new(self._key, body, hashlib.sha256).hexdigest().encode("ascii")

    def verifies(self, body: bytes, seal: bytes) -> bool:
        return hmac.compare_digest(self.mac(body), seal)

    def __repr__(self) -> str:
        return "SealKey(***)"

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("a SealKey cannot be pickled")


def seal_body(body: bytes, key: SealKey) -> bytes:
    """``body`` (a compact JSON object) with its ``seal`` member appended."""
    return body[:-1] + SEAL_HEAD + key.mac(body) + _SEAL_TAIL


def seal_of(sealed: bytes) -> tuple[bytes, bytes] | None:
    """The data's bytes and the seal of a body that ends with a ``seal`` member (``None`` when it has none)."""
    head = trailing_digest(sealed, SEAL_HEAD, _SEAL_TAIL)
    if head is None:
        return None
    return sealed[:head] + b"}", sealed[head + len(SEAL_HEAD) : -len(_SEAL_TAIL)]


def unsealed_body(sealed: bytes, key: SealKey) -> bytes | None:
    """The data's bytes of ``sealed`` when its seal verifies with ``key``, else ``None``."""
    found = seal_of(sealed)
    if found is None or not key.verifies(*found):
        return None
    return found[0]
