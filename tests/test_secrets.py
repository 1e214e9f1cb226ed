"""Secret and redact(): what is hidden, what is left alone, and that ``<hidden>`` is never itself rewritten.

The registry of secrets is process-wide (every Secret registers itself), so each test uses values no other test or
message contains.
"""

from __future__ import annotations

import json
import pickle

import pytest

from gitops.secrets import HIDDEN, MIN_REDACTED_LENGTH, Secret, redact, register


def test_a_secret_never_shows_itself() -> None:
    secret = Secret("sec-shows-nothing-01")
    assert (str(secret), repr(secret), f"{secret}", f"{secret:>30}") == (HIDDEN, "Secret(<hidden>)", HIDDEN, HIDDEN)
    assert secret.reveal() == "sec-shows-nothing-01"
    with pytest.raises(TypeError):
        pickle.dumps(secret)


def test_every_occurrence_is_hidden() -> None:
    Secret("sec-every-occurrence-02")
    assert redact("a sec-every-occurrence-02 b sec-every-occurrence-02") == "a <hidden> b <hidden>"


@pytest.mark.parametrize("short", ["e", "r", "se", "errors!"])
def test_a_secret_shorter_than_eight_characters_is_not_scrubbed_from_text(short: str) -> None:
    # A one-letter password would otherwise turn every message into "s<hidden>rv<hidden>r" and point at itself.
    assert len(short) < MIN_REDACTED_LENGTH
    Secret(short)
    message = "Error: server 'local' refused the sign-in; errors: none. See <hidden> for the token."
    assert redact(message) == message


def test_an_eight_character_secret_is_scrubbed() -> None:
    Secret("q8chars!")
    assert redact("password q8chars! in text") == "password <hidden> in text"


def test_hidden_is_never_rewritten_by_another_secret() -> None:
    # One pass: the second secret appears only once the first is replaced, and must not be found there.
    Secret("sec-replaced-first-03")
    Secret("n> after-04")
    Secret(HIDDEN)
    assert redact("sec-replaced-first-03 after-04") == "<hidden> after-04"
    assert redact(f"{HIDDEN} stays {HIDDEN}") == f"{HIDDEN} stays {HIDDEN}"


def test_the_longest_secret_wins_where_they_overlap() -> None:
    Secret("sec-overlap-05")
    Secret("sec-overlap-05-and-more")
    assert redact("x sec-overlap-05-and-more y sec-overlap-05 z") == "x <hidden> y <hidden> z"


def test_a_secret_registered_after_a_redaction_is_hidden_too() -> None:
    assert redact("sec-registered-late-06") == "sec-registered-late-06"
    register("sec-registered-late-06")
    assert redact("sec-registered-late-06") == HIDDEN


def test_the_prefix_of_a_token_is_hidden_but_not_the_prefix_of_a_phrase() -> None:
    Secret("tok07abcdef0123456789abcdef01234")
    assert redact("retry after 5ms (token tok07abc...)") == "retry after 5ms (token <hidden>...)"
    Secret("https://sec-link.example/path?x=1-08")
    assert redact("see https://other.example/") == "see https://other.example/"


def test_token_query_values_are_hidden() -> None:
    assert redact("GET /api/auth/query-token?token=unregistered123") == "GET /api/auth/query-token?token=<hidden>"
    assert redact("GET /api/user/code?_token=abc&branch=x") == "GET /api/user/code?_token=<hidden>&branch=x"
    assert redact("?token=<hidden>") == "?token=<hidden>"


def test_escaped_forms_of_a_secret_are_hidden() -> None:
    # How an exception's repr or a JSON body would show a password with a backslash, a quote or non-ASCII text.
    value = 'pw\\with"quote-ü-09'
    Secret(value)
    for shown in (repr(value), json.dumps(value), repr(value.encode("utf-8"))):
        assert "pw" not in redact(f"error: {shown}").replace(HIDDEN, "")
