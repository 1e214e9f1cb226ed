"""The endpoint catalogue's two spellings: a key (``METHOD /path``) and the path a request is sent to."""

from __future__ import annotations

from gitops.core.endpoints import ACTIVATE, LIST, SIGNIN, endpoint_key, path_of


def test_the_path_of_an_endpoint_is_what_follows_its_method() -> None:
    assert path_of(SIGNIN) == "/api/auth/signin"
    assert path_of(LIST) == "/api/user/branches"
    for endpoint in (SIGNIN, LIST, ACTIVATE):
        method = endpoint.split(" ", 1)[0]
        assert endpoint_key(method, path_of(endpoint)) == endpoint  # the two spellings agree
