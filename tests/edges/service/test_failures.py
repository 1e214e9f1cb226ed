"""``gitops/edges/service/failures.py``: every failure of a request worded once, naming its server, never quoting
a secret or request data. Answers are real ``httpx.Response`` values; transport failures real httpx errors."""

from __future__ import annotations

import logging
import ssl

import httpx
import pytest

from gitops.edges.service.failures import (
    Failures,
    ServerAnswerError,
    error_words,
    lost,
    proxy_variable,
    sanitize_url,
    tls_reason,
    transport_detail,
)
from gitops.errors import NetworkError, ServiceError
from gitops.secrets import register
from gitops.standin.testing import FULL_TOKEN
from tests.loopback import closed_port

#: A credential this test module registers, as a session registers each one it reads.
SECRET = "failures-test-secret-6f1d2c"

FAIL = Failures(server_name="local", base_url="http://127.0.0.1:21025", timeout=30, login=None)


def _answer(status: int, body: bytes = b"", content_type: str = "application/json", **headers: str) -> httpx.Response:
    return httpx.Response(status, content=body, headers={"Content-Type": content_type, **headers})


def test_no_credentials_names_where_to_put_them() -> None:
    error = FAIL.refused("GET /api/auth/me")
    assert error.message == "server 'local' needs credentials for GET /api/auth/me, and none were given."
    assert "servers.local of the manifest" in (error.hint or "")


def test_a_redirect_is_not_followed_and_its_location_is_shown_without_user_info() -> None:
    answer = _answer(302, Location="https://user:pw@elsewhere.example/api")
    error = FAIL.unexpected_status("GET /api/user/branches", answer, None)
    assert error.message == "server 'local' redirected GET /api/user/branches to https://elsewhere.example/api."


def test_a_404_points_at_the_url_and_a_413_at_the_size() -> None:
    not_found = FAIL.unexpected_status("GET /api/x", _answer(404, b'{"error":"no such"}'), {"error": "no such"})
    assert not_found.message == "server 'local' answered 404 Not Found to GET /api/x: no such."
    assert "http://127.0.0.1:21025" in (not_found.hint or "")
    too_large = FAIL.unexpected_status("POST /api/user/code", _answer(413, b""), None)
    assert "under 5 MB" in (too_large.hint or "")


def test_a_5xx_is_a_network_error_worth_another_attempt() -> None:
    error = FAIL.server_failed(
        "GET /api/x", _answer(503, b"<html><title>Down for maintenance</title></html>", "text/html")
    )
    assert isinstance(error, NetworkError)
    assert (
        error.message
        == "server 'local' answered 503 Service Unavailable to GET /api/x (an HTML page titled 'Down for maintenance')."
    )


def test_an_answer_that_is_not_json_is_described_not_quoted_whole() -> None:
    error = FAIL.not_json("GET /api/x", _answer(200, b"x" * 100_000, "text/plain"))
    assert error.message.startswith("server 'local' answered GET /api/x with text/plain text starting 'xxx")
    assert len(error.message) < 300
    deep = FAIL.not_json("GET /api/x", _answer(200, b"[" * 100 + b"]" * 100))
    assert "the tool can read (it is nested more than 64 levels deep)" in deep.message
    assert "an empty answer" in FAIL.not_json("GET /api/x", _answer(200, b"")).message


def test_a_refusal_in_the_servers_words_redacted() -> None:
    register(SECRET)  # as the session does with every credential it reads
    error = FAIL.answer_error("POST /api/user/code", {"error": f"bad token {SECRET}\n again"})
    assert isinstance(error, ServerAnswerError)
    assert SECRET not in error.message
    assert error.message.startswith("server 'local' refused POST /api/user/code: bad token ")
    assert error.server_message == error_words({"error": f"bad token {SECRET}\n again"})
    assert "\n" not in error.server_message
    silent = FAIL.answer_error("POST /api/user/code", {"ok": 0})
    assert silent.message == "server 'local' answered POST /api/user/code without 'ok: 1' and without an error message."


def test_network_failures_never_quote_the_exception_text() -> None:
    timeout = FAIL.network_error("GET /api/x", httpx.ReadTimeout(f"X-Token: {FULL_TOKEN}"))
    assert timeout.message == "server 'local' did not answer GET /api/x within 30 s (http://127.0.0.1:21025)."
    refused = httpx.ConnectError(f"X-Token: {FULL_TOKEN}")
    refused.__cause__ = ConnectionRefusedError(111, "Connection refused")
    error = FAIL.network_error("GET /api/x", refused)
    assert error.message == (
        "cannot connect to server 'local' at http://127.0.0.1:21025 for GET /api/x: ConnectError (Connection refused)."
    )
    assert FULL_TOKEN not in str(error)
    broke = FAIL.network_error("GET /api/x", httpx.RemoteProtocolError("peer closed"))
    assert broke.message.startswith("the connection to server 'local' at http://127.0.0.1:21025 broke during")


def test_a_tls_failure_gets_its_reasons_hint() -> None:
    cause = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    cause.reason = "WRONG_VERSION_NUMBER"
    failed = httpx.ConnectError("handshake")
    failed.__cause__ = cause
    assert tls_reason(failed) == "WRONG_VERSION_NUMBER"
    assert transport_detail(failed) == "ConnectError (TLS: WRONG_VERSION_NUMBER)"
    assert "write the url with http://" in (FAIL.network_error("GET /api/x", failed).hint or "")


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"HTTP_PROXY": "http://p:3128"}, "HTTP_PROXY"),
        ({"all_proxy": "http://p:3128"}, "all_proxy"),
        ({"HTTP_PROXY": "http://p:3128", "NO_PROXY": "localhost,127.0.0.1"}, None),
        ({"HTTP_PROXY": "http://p:3128", "no_proxy": "*"}, None),
        ({"HTTPS_PROXY": "http://p:3128"}, None),  # the url is http://
        ({"HTTP_PROXY": ""}, None),
    ],
)
def test_the_proxy_variable_is_named_never_its_value(environ: dict[str, str], named: str | None) -> None:
    assert proxy_variable("http://127.0.0.1:21025", environ) == named


def test_a_url_for_a_log_line_has_no_user_info_and_no_token() -> None:
    assert sanitize_url("https://me:pw@screeps.com/api") == "https://screeps.com/api"
    assert FULL_TOKEN not in sanitize_url(f"http://x/api/user/code?token={FULL_TOKEN}")


def test_httpxs_log_lines_are_redacted(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="httpx"):
        logging.getLogger("httpx").info("HTTP Request: GET %s", f"http://x/?token={FULL_TOKEN}")
    assert caplog.records
    assert FULL_TOKEN not in caplog.text


def test_a_lost_write_says_it_was_not_sent_again() -> None:
    error = lost(ServiceError("the upload timed out"))
    assert (error.hint or "").startswith("The server may or may not have taken it; it was not sent again")


def test_a_real_refused_connection_is_worded_from_its_cause() -> None:
    with httpx.Client() as client, pytest.raises(httpx.ConnectError) as caught:
        client.get(f"http://127.0.0.1:{closed_port()}/")
    assert transport_detail(caught.value) == "ConnectError (Connection refused)"
