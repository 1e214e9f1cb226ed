"""``gitops/edges/headers.py``: the headers every request carries, and the inflaters of the codings the tool
decodes (real zlib streams)."""

from __future__ import annotations

import gzip
import zlib

import pytest

from gitops import __version__
from gitops.edges.headers import ACCEPT_ENCODINGS, CLIENT_HEADERS, INFLATED_CODINGS, inflater

TEXT = b'{"ok":1,"list":[' + b'"branch",' * 200 + b'"end"]}'


def test_the_client_names_itself_and_asks_for_json() -> None:
    assert {"User-Agent": f"screeps-gitops/{__version__}", "Accept": "application/json"} == CLIENT_HEADERS
    assert set(ACCEPT_ENCODINGS) <= INFLATED_CODINGS


@pytest.mark.parametrize("coding", ["gzip", "x-gzip"])
def test_gzip_is_inflated(coding: str) -> None:
    assert inflater(coding).decompress(gzip.compress(TEXT)) == TEXT


def test_deflate_is_zlib_wrapped_or_raw_when_asked() -> None:
    assert inflater("deflate").decompress(zlib.compress(TEXT)) == TEXT
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    body = raw.compress(TEXT) + raw.flush()
    with pytest.raises(zlib.error):
        inflater("deflate").decompress(body)  # the caller asks again with raw=True
    assert inflater("deflate", raw=True).decompress(body) == TEXT


def test_an_unknown_coding_has_no_inflater() -> None:
    with pytest.raises(KeyError):
        inflater("br")
