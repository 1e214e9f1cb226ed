"""The bodies of the game client's requests: their JSON, deflated when asked, sent in pieces when large, and what a
written branch will hold. No httpx here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gitops.core.codeset import CodeSet, WireModule, request_body
from gitops.core.remote import RemoteBranch
from gitops.edges.bodies import COMPRESS_MIN_BYTES, deflated

#: A request body from this size on is sent in pieces that report how much is sent (signs of life).
PROGRESS_BYTES = 1024 * 1024
_PIECE = 64 * 1024


def encoded_body(body: Any, encoding: str | None, headers: dict[str, str]) -> bytes | None:
    """Encoding the body: its JSON, deflated when asked (``force``, or ``deflate`` from a size on); the headers that
    describe it are added to ``headers``."""
    if body is None:
        return None
    content = body.content if isinstance(body, Encoded) else json_body(body)
    headers["Content-Type"] = "application/json; charset=utf-8"
    if encoding == "force" or (encoding == "deflate" and len(content) >= COMPRESS_MIN_BYTES):
        # The server applies its limits (5 MB of code, 8 MiB of body) to the inflated body, as before.
        content = deflated(content)
        headers["Content-Encoding"] = "deflate"
    return content


def pieces(content: bytes, sent: Callable[[int], None]) -> Iterator[bytes]:
    view = memoryview(content)
    for start in range(0, len(content), _PIECE):
        yield bytes(view[start : start + _PIECE])
        sent(min(len(content), start + _PIECE))


def size_text(count: int) -> str:
    return f"{count / 1_000_000:.1f} MB" if count >= 1_000_000 else f"{count / 1000:.0f} kB"


@dataclass(frozen=True)
class Encoded:
    """A request body already encoded: its JSON bytes, as :func:`json_body` would make them."""

    content: bytes


def branch_written(branch: str, modules: Mapping[str, WireModule]) -> RemoteBranch:
    """What ``branch`` holds once ``modules`` are written to it (stamped by the caller when the server said so), made
    in a background thread while the request is on its way. Raises ``ValueError`` for what is not a module."""
    return RemoteBranch.from_code(branch, CodeSet.from_wire(dict(modules)), 0.0, "own-upload")


def upload_body(branch: str, modules: Mapping[str, WireModule]) -> dict[str, Any]:
    # Its JSON is gitops.core.codeset.upload_body's, which the local read's child process makes ahead (a test
    # holds the two equal).
    return {"branch": branch, "modules": dict(modules)}


def clone_body(new_name: str, source: str | None, modules: Mapping[str, WireModule] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"branch": source or "", "newName": new_name}
    if modules is not None and source is None:
        body["defaultModules"] = dict(modules)
    return body


def json_body(body: Any) -> bytes:
    """Compact UTF-8 JSON of a request body (:func:`gitops.core.codeset.request_body`)."""
    return request_body(body)


def write_json(branch: str, modules: Mapping[str, WireModule], *, clone: bool) -> bytes:
    """The JSON of the body that writes ``modules`` to ``branch``: an upload's, or with ``clone`` the creation's that
    carries them (``defaultModules``)."""
    return json_body(clone_body(branch, None, modules) if clone else upload_body(branch, modules))
