"""What a credential string says (gitops.config.logins): pure, no server."""

from __future__ import annotations

import hashlib

import pytest

from gitops.config.logins import account_fingerprint, header_safe, value_problem


def test_a_header_value_is_printable_ascii_without_spaces() -> None:
    assert header_safe("abc-DEF_0123~!")
    assert not header_safe("")
    assert not header_safe("with space")
    assert not header_safe("tab\there")
    assert not header_safe("é")


@pytest.mark.parametrize(
    ("value", "header", "problem"),
    [
        ("0123abcd", True, None),
        ("line\nbreak", True, "contains a line break (carriage return or newline)"),
        ("windows\r", False, "contains a line break (carriage return or newline)"),
        ("bell\x07", False, "contains a control character"),
        ("broken\udcff", False, "contains bytes that are not valid UTF-8"),
        ("two words", True, "contains whitespace"),
        ("two words", False, None),
        ("naïve", True, "contains a non-ASCII character (only letters, digits and ASCII punctuation can be sent)"),
        ("naïve", False, None),
    ],
)
def test_what_is_wrong_with_a_credential_value(value: str, header: bool, problem: str | None) -> None:
    assert value_problem(value, header=header) == problem


def test_an_account_fingerprint_is_of_the_lowercased_url_and_the_user_name() -> None:
    expected = hashlib.sha256(b"screeps-gitops\0http://127.0.0.1:21025\0alice").hexdigest()[:16]
    assert account_fingerprint("HTTP://127.0.0.1:21025/", "alice") == expected
    assert account_fingerprint("http://127.0.0.1:21025", "Alice") != expected
