"""Whether uploads go compressed (``gitops.core.compression``): the one rule the session and the head start ask."""

from __future__ import annotations

import pytest

from gitops.core.compression import may_compress, upload_compression


@pytest.mark.parametrize(
    ("mode", "known", "signs_in", "probe_free", "decided"),
    [
        ("always", False, False, None, "on"),  # the manifest decides: what is known does not
        ("never", True, True, True, "off"),
        ("auto", True, False, None, "on"),  # the ledger's record
        ("auto", False, True, True, "off"),  # ... over a sign-in and a free probe branch
        ("auto", None, True, None, "on"),  # a private server's sign-in inflates bodies
        ("auto", None, False, True, "probe"),  # nothing known: the probe, its branch being free
        ("auto", None, False, False, "off"),  # the probe's branch exists: never touched
        ("auto", None, False, None, "off"),  # no list known: no probe
    ],
)
def test_upload_compression(
    mode: str, known: bool | None, signs_in: bool, probe_free: bool | None, decided: str
) -> None:
    assert upload_compression(mode, known, signs_in=signs_in, probe_free=probe_free) == decided  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("mode", "known", "signs_in", "may"),
    [
        ("always", False, False, True),
        ("never", True, True, False),
        ("auto", True, False, True),
        ("auto", False, True, False),  # the record says no: no body deflated ahead
        ("auto", None, False, True),  # a probe may say so
        ("auto", None, True, True),
    ],
)
def test_may_compress_is_whatever_the_list_shows(mode: str, known: bool | None, signs_in: bool, may: bool) -> None:
    assert may_compress(mode, known, signs_in=signs_in) is may  # type: ignore[arg-type]
    outcomes = {upload_compression(mode, known, signs_in=signs_in, probe_free=f) for f in (True, False, None)}  # type: ignore[arg-type]
    assert (outcomes != {"off"}) is may
