"""Module names: which ones the server drops, and which ones it reads back as another name."""

from __future__ import annotations

import pytest

from gitops.core.codeset import dropped_name_reason, refused_name_reason


@pytest.mark.parametrize("name", ["main", "role.harvester", "lib/util", "win\\path", "a$b", "a$DOT", "a$dot$b"])
def test_names_the_server_keeps_as_they_are(name: str) -> None:
    assert refused_name_reason(name) is None


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "the name is empty"),
        ("$tmp", "the name starts with '$', and the server silently drops such modules"),
        (".hidden", "the name starts with '.', and the server silently drops such modules"),
    ],
)
def test_names_the_server_drops(name: str, reason: str) -> None:
    assert dropped_name_reason(name) == reason
    assert refused_name_reason(name) == reason


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        (
            "a$DOT$b",
            "the name contains '$DOT$', the server's stored form of '.', so the server would return it as 'a.b' and "
            "no plan would ever match",
        ),
        (
            "lib$SLASH$util",
            "the name contains '$SLASH$', the server's stored form of '/', so the server would return it as "
            "'lib/util' and no plan would ever match",
        ),
        (
            "x$BACKSLASH$y$DOT$z",
            "the name contains '$DOT$' and '$BACKSLASH$', the server's stored forms of '.' and '\\\\', so the "
            "server would return it as 'x\\\\y.z' and no plan would ever match",
        ),
    ],
)
def test_names_the_server_reads_back_as_another_name(name: str, reason: str) -> None:
    # The private server stores '.', '/' and '\' as these markers and turns every marker back on reading
    # (@screeps/backend utils.translateModulesFromDb), so a literal marker comes back changed.
    assert refused_name_reason(name) == reason
    assert dropped_name_reason(name) is None  # kept, so the stand-in stores it like the server does
