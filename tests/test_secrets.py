"""Secret and redact(): what is hidden, what is left alone, and that ``<hidden>`` is never itself rewritten.

The registry of secrets is process-wide (every Secret registers itself), so each test uses values no other test or
message contains.
"""

from __future__ import annotations

import base64
import json
import pickle
import re
import time
from urllib.parse import quote, quote_plus

import pytest

from gitops.secrets import HIDDEN, MIN_REDACTED_LENGTH, Secret, redact, register
from gitops.standin.testing import FULL_TOKEN


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


def encoded_forms(value: str, user: str = "alice") -> dict[str, str]:
    """How a server may quote a secret back: in base64 (alone, after a prefix, as a Basic header's
    ``user:password``, URL-safe), URL-encoded (upper- and lower-case escapes, ``+`` for spaces), JSON-escaped."""
    raw = value.encode("utf-8")
    lower = re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), quote(value, safe=""))
    return {
        "base64": base64.b64encode(raw).decode(),
        "base64 after one byte": base64.b64encode(b"x" + raw + b"y").decode(),
        "base64 after two bytes": base64.b64encode(b"xy" + raw).decode(),
        "basic": "Basic " + base64.b64encode(f"{user}:{value}".encode()).decode(),
        "base64url": base64.urlsafe_b64encode(b"\xfb" + raw).decode().rstrip("="),
        "percent": quote(value, safe=""),
        "percent lower": lower,
        "plus": quote_plus(value),
        "json": json.dumps(value),
        "json, non-ASCII kept": json.dumps(value, ensure_ascii=False),
        "json, slashes escaped": json.dumps(value).replace("/", "\\/"),
    }


@pytest.mark.parametrize("value", [FULL_TOKEN, 'p@ss wörd/+&="10'])
def test_encoded_forms_of_a_secret_are_hidden(value: str) -> None:
    Secret(value)
    for how, text in encoded_forms(value).items():
        quoted = f'{{"error": "bad credentials {text} here"}}'
        redacted = redact(quoted)
        assert HIDDEN in redacted, how
        assert text not in redacted, how
        assert redacted.startswith('{"error": "bad credentials '), how
        assert redacted.endswith(' here"}'), how
        # What is left of a base64 text is the bytes around the secret, and at most 2 characters mixing them in.
        assert len(redacted) <= len(quoted) - len(text) + len("Basic YWxpY2U6") + 2 + len(HIDDEN) + 2, how


def test_the_canary_token_base64_in_a_basic_header_is_hidden() -> None:
    Secret(FULL_TOKEN)
    header = "Authorization: Basic " + base64.b64encode(f"someone:{FULL_TOKEN}".encode()).decode()
    assert base64.b64encode(FULL_TOKEN.encode()).decode()[:12] not in redact(header)
    assert redact(header).startswith("Authorization: Basic c29tZW9uZTp")


def test_redaction_is_one_fast_pass_over_many_secrets() -> None:
    for n in range(200):
        Secret(f"sec-many-{n:03d}-{'x' * 24}")
    text = "GET /api/user/code?branch=main 200 ok; " * 25_000 + "sec-many-199-" + "x" * 24
    redact("warm up: compile once")
    started = time.perf_counter()
    redacted = redact(text)
    assert time.perf_counter() - started < 1.0
    assert redacted.endswith(HIDDEN)
