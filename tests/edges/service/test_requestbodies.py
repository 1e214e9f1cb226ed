"""The bodies of the client's requests (``gitops.edges.service.requestbodies``)."""

from __future__ import annotations

import zlib

from gitops.core.codeset import WireModule
from gitops.core.codeset import upload_body as core_upload_body
from gitops.edges.bodies import COMPRESS_MIN_BYTES
from gitops.edges.service.requestbodies import Encoded, encoded_body, pieces, size_text, upload_body, write_json


def test_a_small_body_goes_as_json_and_a_large_one_deflated_when_asked() -> None:
    headers: dict[str, str] = {}
    small = encoded_body({"branch": "b"}, "deflate", headers)
    assert small == b'{"branch":"b"}'
    assert headers == {"Content-Type": "application/json; charset=utf-8"}
    big = {"branch": "b", "modules": {"main": "x" * COMPRESS_MIN_BYTES}}
    headers = {}
    sent = encoded_body(big, "deflate", headers)
    assert sent is not None
    assert headers["Content-Encoding"] == "deflate"
    assert zlib.decompress(sent) == write_json("b", big["modules"], clone=False)  # type: ignore[arg-type]
    headers = {}
    assert encoded_body({"branch": "b"}, "force", headers) is not None
    assert headers["Content-Encoding"] == "deflate"  # the probe: any size
    assert encoded_body(None, "force", {}) is None


def test_an_encoded_body_is_sent_as_it_is() -> None:
    assert encoded_body(Encoded(b"{}"), None, {}) == b"{}"


def test_the_upload_body_is_the_one_the_local_read_makes_ahead() -> None:
    modules: dict[str, WireModule] = {"main": "loop();", "lib": {"binary": "AAEC"}}
    assert write_json("b", modules, clone=False) == core_upload_body("b", modules)
    assert upload_body("b", modules) == {"branch": "b", "modules": modules}
    assert b'"defaultModules"' in write_json("b", modules, clone=True)


def test_a_large_body_goes_in_pieces_that_say_how_much_is_sent() -> None:
    told: list[int] = []
    content = b"x" * (150 * 1024)
    assert b"".join(pieces(content, told.append)) == content
    assert told[-1] == len(content)
    assert told == sorted(told)
    assert size_text(1_500_000) == "1.5 MB"
    assert size_text(15_000) == "15 kB"
