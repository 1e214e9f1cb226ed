"""Where the stand-in answers as the real private server does (``@screeps/backend``'s ``lib/game/api/user.js`` and
``lib/game/server.js``; ``docs/private-server-facts.md``), found by running real clients against both."""

from __future__ import annotations

import base64
import gzip
import json
import math
import socket
from pathlib import Path

import httpx
import pytest

from gitops.core.codeset import code_length
from gitops.core.endpoints import ENDPOINT_LIMITS, GLOBAL_LIMIT, MAX_CODE_LENGTH
from gitops.edges.clock import ManualClock
from gitops.standin.bounds import MAX_BODY
from gitops.standin.testing import ALICE, DEMO_ACCOUNTS, FULL_TOKEN, StandIn, running_standin
from tests.standin.helpers import client, window

JSON_HEADERS = {"Content-Type": "application/json; charset=utf-8"}
BRANCH_KEYS = {"_id", "user", "branch", "modules", "activeWorld", "activeSim", "timestamp"}


@pytest.fixture
def http(standin: StandIn) -> httpx.Client:
    standin.grant_unlimited(FULL_TOKEN)
    return client(standin, FULL_TOKEN)


def _sized_body(size: int) -> bytes:
    """A JSON upload of exactly ``size`` bytes."""
    head, tail = b'{"branch":"default","modules":{"main":"', b'"}}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


# -- the body limit -----------------------------------------------------------------------------------------------


def test_the_body_limit_is_the_private_servers_8_mib(http: httpx.Client) -> None:
    assert MAX_BODY == 8 * 1024 * 1024  # body-parser's limit: '8mb'
    with http:
        at_limit = http.post("/api/user/code", content=_sized_body(MAX_BODY), headers=JSON_HEADERS)
        assert at_limit.status_code == 200  # read and parsed; over 5 MB of code, so the logical error
        assert at_limit.json() == {"error": "code length exceeds 5 MB limit"}
        over = http.post("/api/user/code", content=_sized_body(MAX_BODY + 1), headers=JSON_HEADERS)
        assert over.status_code == 413
        assert over.headers["content-type"] == "text/html; charset=utf-8"
        assert "PayloadTooLargeError: request entity too large" in over.text


def test_nine_megabytes_of_escapes_are_refused_as_on_the_private_server(http: httpx.Client, standin: StandIn) -> None:
    # The case: under 5 MB of code, but 9 MB on the wire as \u00e9 escapes.
    modules = {"main": "\u00e9" * 1_500_000}
    body = json.dumps({"branch": "default", "modules": modules}).encode("ascii")
    assert 8 * 1024 * 1024 < len(body) < 16 * 1024 * 1024
    with http:
        assert http.post("/api/user/code", content=body, headers=JSON_HEADERS).status_code == 413
        assert standin.branch_modules(ALICE, "default") == {"main": ""}
        # The same code as UTF-8 fits.
        utf8 = json.dumps({"branch": "default", "modules": modules}, ensure_ascii=False).encode("utf-8")
        assert http.post("/api/user/code", content=utf8, headers=JSON_HEADERS).json()["ok"] == 1


# -- money history ------------------------------------------------------------------------------------------------


def test_money_history_answers_on_both_paths_with_one_limit(standin: StandIn) -> None:
    limit = ENDPOINT_LIMITS["GET /api/game/user/money-history"]
    assert limit.count <= GLOBAL_LIMIT.count  # so the global window does not interfere
    with client(standin, FULL_TOKEN) as http:
        for i in range(limit.count):
            path = "/api/user/money-history" if i % 2 else "/api/game/user/money-history"
            answer = http.get(path, params={"page": "0"})
            assert answer.json() == {"ok": 1, "page": 0, "list": [], "hasMore": False}
            assert window(answer)[:2] == (limit.count, limit.count - i - 1)
        for path in ("/api/user/money-history", "/api/game/user/money-history"):
            assert http.get(path).status_code == 429
    # One endpoint: counted together, under either name.
    total = limit.count + 2
    assert standin.count("GET /api/user/money-history") == total
    assert standin.count("GET /api/game/user/money-history") == total


def test_a_token_scoped_to_money_history_reaches_both_paths(tmp_path: Path) -> None:
    accounts = {
        "users": [
            {"username": "carol", "tokens": [{"value": "carol-token-1234", "endpoints": ["GET /api/user/code"]}]},
            {
                "username": "dave",
                "tokens": [{"value": "dave-token-12345", "endpoints": ["GET /api/game/user/money-history"]}],
            },
        ]
    }
    with running_standin(accounts, tmp_path / "s.sqlite3") as standin:
        with client(standin, "dave-token-12345") as dave:
            assert dave.get("/api/user/money-history").json()["ok"] == 1
        with client(standin, "carol-token-1234") as carol:
            denied = carol.get("/api/user/money-history")
            assert denied.status_code == 403
            assert denied.json()["endpoint"] == "GET /api/game/user/money-history"


# -- retry after --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ["GET /api/user/code", "global"])
def test_retry_after_never_exceeds_the_window(tmp_path: Path, endpoint: str) -> None:
    # A start between two whole seconds: windows used to end at the next whole second after the period.
    clock = ManualClock(1_800_000_000.7)
    limit = ENDPOINT_LIMITS[endpoint] if endpoint != "global" else GLOBAL_LIMIT
    path = "/api/user/code" if endpoint != "global" else "/api/user/branches"
    with running_standin(DEMO_ACCOUNTS, tmp_path / "s.sqlite3", clock) as standin, client(standin, FULL_TOKEN) as http:
        for _ in range(limit.count):
            assert http.get(path).status_code == 200
        refused = http.get(path)
        assert refused.status_code == 429
        wait_ms = int(refused.text.removeprefix("Rate limit exceeded, retry after ").removesuffix("ms"))
        assert wait_ms == limit.period * 1000  # the clock stood still: exactly the window
        # X-RateLimit-Reset is a whole second, at or after the window's end.
        assert window(refused)[2] == math.ceil(clock.now() + limit.period)
        clock.advance(0.3)
        later = http.get(path)
        assert later.text == f"Rate limit exceeded, retry after {limit.period * 1000 - 300}ms"
        clock.advance((limit.period * 1000 - 300) / 1000)
        assert http.get(path).status_code == 200


# -- branches -----------------------------------------------------------------------------------------------------


def test_branches_list_each_branch_with_its_modules_and_a_timestamp(http: httpx.Client, standin: StandIn) -> None:
    with http:
        me = http.get("/api/auth/me").json()
        uploaded = http.post("/api/user/code", json={"branch": "default", "modules": {"main": "m", "role.x": "r"}})
        listing = http.get("/api/user/branches").json()
    assert listing["ok"] == 1
    (entry,) = listing["list"]
    assert set(entry) == BRANCH_KEYS
    assert entry["user"] == me["_id"]
    assert entry["branch"] == "default"
    assert entry["modules"] == {"main": "m", "role.x": "r"}
    assert entry["activeWorld"] is True
    assert entry["activeSim"] is True
    # Epoch milliseconds: the upload's time, one later than the branch's creation at the same (manual) instant.
    assert entry["timestamp"] == uploaded.json()["timestamp"] == int(standin.clock.now() * 1000) + 1
    assert standin.listed_branches(ALICE) == listing["list"]


def test_the_timestamp_changes_on_every_upload_and_clone_even_when_the_clock_stands_still(
    http: httpx.Client, standin: StandIn
) -> None:
    def stamp(branch: str) -> int:
        (entry,) = [b for b in standin.listed_branches(ALICE) if b["branch"] == branch]
        value = entry["timestamp"]
        assert isinstance(value, int)
        return value

    with http:
        before = stamp("default")
        http.post("/api/user/code", json={"branch": "default", "modules": {"main": "1"}})
        first = stamp("default")
        http.post("/api/user/code", json={"branch": "default", "modules": {"main": "1"}})  # same code again
        second = stamp("default")
        assert before < first < second
        http.post("/api/user/clone-branch", json={"branch": "default", "newName": "copy"})
        cloned = stamp("copy")
        assert cloned > second
        http.post("/api/user/clone-branch", json={"branch": "default", "newName": "copy"})  # overwritten
        assert stamp("copy") > cloned
        # Reading and activating are no changes of the code.
        last = stamp("copy")
        http.get("/api/user/code", params={"branch": "copy"})
        http.post("/api/user/set-active-branch", json={"branch": "copy", "activeName": "activeSim"})
        assert stamp("copy") == last
        standin.clock.advance(60)
        http.post("/api/user/code", json={"branch": "copy", "modules": {"main": "2"}})
        assert stamp("copy") == int(standin.clock.now() * 1000)


def test_branches_recreates_a_deleted_default(http: httpx.Client) -> None:
    with http:
        http.post("/api/user/clone-branch", json={"newName": "other"})
        http.post("/api/user/set-active-branch", json={"branch": "other", "activeName": "activeWorld"})
        http.post("/api/user/set-active-branch", json={"branch": "other", "activeName": "activeSim"})
        http.post("/api/user/code", json={"branch": "default", "modules": {"main": "gone"}})
        http.post("/api/user/delete-branch", json={"branch": "default"})
        listing = {b["branch"]: b for b in http.get("/api/user/branches").json()["list"]}
    assert set(listing) == {"default", "other"}
    assert listing["default"]["modules"] == {"main": ""}
    assert listing["default"]["activeWorld"] is False


# -- clone-branch with defaultModules -----------------------------------------------------------------------------


@pytest.mark.parametrize("source", [None, "", "no-such-branch"])
def test_clone_branch_creates_a_branch_with_its_code_in_one_request(
    http: httpx.Client, standin: StandIn, source: str | None
) -> None:
    body: dict[str, object] = {"newName": "feature", "defaultModules": {"main": "loop()", "lib/a.b": "x", "$no": "y"}}
    if source is not None:
        body["branch"] = source
    with http:
        answer = http.post("/api/user/clone-branch", json=body)
    (entry,) = [b for b in standin.listed_branches(ALICE) if b["branch"] == "feature"]
    assert answer.json() == {"ok": 1, "timestamp": entry["timestamp"]}
    # The names an upload drops are dropped here too; main is kept.
    assert standin.branch_modules(ALICE, "feature") == {"main": "loop()", "lib/a.b": "x"}
    assert standin.count("POST /api/user/clone-branch", ALICE) == 1
    assert standin.count("POST /api/user/code", ALICE) == 0
    assert entry["activeWorld"] is False
    assert entry["activeSim"] is False


def test_clone_branch_adds_main_and_ignores_default_modules_when_the_source_exists(
    http: httpx.Client, standin: StandIn
) -> None:
    with http:
        http.post("/api/user/clone-branch", json={"newName": "lib-only", "defaultModules": {"lib": "l"}})
        http.post("/api/user/code", json={"branch": "default", "modules": {"main": "source"}})
        http.post(
            "/api/user/clone-branch",
            json={"branch": "default", "newName": "copy", "defaultModules": {"main": "ignored"}},
        )
    assert standin.branch_modules(ALICE, "lib-only") == {"lib": "l", "main": ""}
    assert standin.branch_modules(ALICE, "copy") == {"main": "source"}


def test_clone_branch_applies_no_5_mb_rule_to_default_modules(http: httpx.Client, standin: StandIn) -> None:
    # As the private server: only the 8 MiB body limit bounds them (a later upload of the same code is refused).
    big = {"main": "x" * (6 * 1024 * 1024)}
    with http:
        assert http.post("/api/user/clone-branch", json={"newName": "big", "defaultModules": big}).json()["ok"] == 1
        assert http.post("/api/user/code", json={"branch": "big", "modules": big}).json() == {
            "error": "code length exceeds 5 MB limit"
        }
    assert standin.branch_modules(ALICE, "big") == big


def test_clone_branch_refuses_bad_default_modules(http: httpx.Client, standin: StandIn) -> None:
    with http:
        answer = http.post("/api/user/clone-branch", json={"newName": "bad", "defaultModules": {"main": 5}})
        assert answer.json()["error"].startswith("invalid module:")
        answer = http.post("/api/user/clone-branch", json={"newName": "bad", "defaultModules": "main"})
        assert answer.json()["error"].startswith("invalid params: 'defaultModules'")
    assert standin.branch_modules(ALICE, "bad") is None


def test_tutorial_branches_do_not_count_against_the_branch_limit(http: httpx.Client, standin: StandIn) -> None:
    with http:
        for i in range(29):
            assert http.post("/api/user/clone-branch", json={"newName": f"b{i}"}).json()["ok"] == 1
        assert http.post("/api/user/clone-branch", json={"newName": "one-more"}).json() == {
            "error": "too many branches"
        }
        assert http.post("/api/user/clone-branch", json={"newName": "tutorial-1"}).json()["ok"] == 1
        assert http.post("/api/user/clone-branch", json={"newName": "tutorial-12"}).json() == {
            "error": "too many branches"
        }
    assert len(standin.branches(ALICE)) == 31


def test_post_code_answers_ok_and_a_timestamp(http: httpx.Client, standin: StandIn) -> None:
    with http:
        answer = http.post("/api/user/code", json={"branch": "default", "modules": {"main": "x"}})
    (entry,) = standin.listed_branches(ALICE)
    assert answer.json() == {"ok": 1, "timestamp": entry["timestamp"]}
    assert standin.count("POST /api/user/code", ALICE) == 1
    assert standin.count("POST /api/user/clone-branch", ALICE) == 0


# -- issue 18's differential: what the real private server does, the stand-in now does (or refuses on purpose) ------


def test_a_module_named_empty_is_kept_as_the_private_server_keeps_it(http: httpx.Client, standin: StandIn) -> None:
    with http:
        assert http.post("/api/user/code", json={"branch": "default", "modules": {"": "x", "main": "m"}}).json()["ok"]
        assert http.get("/api/user/code").json()["modules"] == {"": "x", "main": "m"}
    assert standin.branch_modules(ALICE, "default") == {"": "x", "main": "m"}


@pytest.mark.parametrize("encoded", ["AGFz\nbQ==", "AG Fz bQ", "-_8", "QUJD\r\nREVG"])
def test_binary_modules_in_any_base64_node_reads_are_stored_as_sent(http: httpx.Client, encoded: str) -> None:
    # The private server checks nothing under "binary" and the game decodes it with Buffer.from(text, 'base64').
    modules = {"main": "", "w": {"binary": encoded}}
    with http:
        assert http.post("/api/user/code", json={"branch": "default", "modules": modules}).json()["ok"] == 1
        assert http.get("/api/user/code").json()["modules"] == modules


@pytest.mark.parametrize("prefix", ["/ptr", "/season"])
def test_the_official_servers_world_prefixes_are_answered(standin: StandIn, prefix: str) -> None:
    with client(standin, FULL_TOKEN) as http:
        sent = http.post(prefix + "/api/user/code", json={"branch": "default", "modules": {"main": "p"}})
        assert sent.json()["ok"] == 1
        assert http.get(prefix + "/api/user/code", params={"branch": "default"}).json()["modules"] == {"main": "p"}
        assert [b["branch"] for b in http.get(prefix + "/api/user/branches").json()["list"]] == ["default"]
        assert http.get(prefix + "/api/version").json()["ok"] == 1
        # Counted and limited as the same endpoint.
        assert standin.count("POST /api/user/code", ALICE) == 1
        assert http.get("/elsewhere/api/user/code").status_code == 404


def test_the_branch_dollar_is_refused_where_the_real_server_would_write_every_branch(
    http: httpx.Client, standin: StandIn
) -> None:
    with http:
        assert http.post("/api/user/clone-branch", json={"newName": "other"}).json()["ok"] == 1
        for answer in (
            http.post("/api/user/code", json={"branch": "$", "modules": {"main": "overwrite"}}),
            http.get("/api/user/code", params={"branch": "$"}),
            http.post("/api/user/set-active-branch", json={"branch": "$", "activeName": "activeWorld"}),
        ):
            assert answer.status_code == 200
            assert answer.json()["error"].startswith("invalid params: branch '$' is neither a branch name")
        # The selectors the real server reads keep working.
        assert http.post("/api/user/code", json={"branch": "$activeWorld", "modules": {"main": "a"}}).json()["ok"]
        assert http.get("/api/user/code", params={"branch": "$nope"}).json() == {"error": "no code"}
    assert standin.branch_modules(ALICE, "default") == {"main": "a"}
    assert standin.branch_modules(ALICE, "other") == {"main": ""}


def test_a_tutorial_name_with_a_non_ascii_digit_counts_against_the_branch_limit(
    http: httpx.Client, standin: StandIn
) -> None:
    # JavaScript's /^tutorial-\d$/ matches ASCII digits only.
    with http:
        for i in range(29):
            assert http.post("/api/user/clone-branch", json={"newName": f"b{i}"}).json()["ok"] == 1
        assert http.post("/api/user/clone-branch", json={"newName": "tutorial-\u0663"}).json() == {
            "error": "too many branches"
        }
    assert len(standin.branches(ALICE)) == 30


def test_basic_wins_over_a_token_on_post_code_as_on_the_private_server(standin: StandIn) -> None:
    from gitops.standin.testing import ALICE_EMAIL, ALICE_PASSWORD, BOB, BOB_TOKEN

    body = {"branch": "default", "modules": {"main": "from basic"}}
    with httpx.Client(base_url=standin.url, auth=(ALICE_EMAIL, ALICE_PASSWORD), headers={"X-Token": BOB_TOKEN}) as http:
        assert http.post("/api/user/code", json=body).json()["ok"] == 1
        # GET keeps the token (screepsmod-auth signs Basic in on POST /api/user/code only).
        assert http.get("/api/user/code").json()["modules"] == {"main": ""}
    assert standin.branch_modules(ALICE, "default") == {"main": "from basic"}
    assert standin.branch_modules(BOB, "default") == {"main": ""}
    with httpx.Client(base_url=standin.url, auth=(ALICE_EMAIL, "wrong"), headers={"X-Token": BOB_TOKEN}) as http:
        assert http.post("/api/user/code", json=body).status_code == 401


@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        ("application/vnd.api+json", 415),
        ("application/json; charset=iso-8859-1", 415),
        ("application/json; charset=latin1", 415),
        ("text/plain", 415),
        # body-parser reads only utf-8 and utf-16le; Node refuses utf-16 and utf-16be (403, "Unknown encoding").
        ("application/json; charset=utf8", 415),
        ("application/json; charset=utf-32", 415),
        ("application/json; charset=utf-16", 403),
        ("application/json; charset=utf-16be", 403),
        # A Content-Type that npm content-type cannot parse: the real server leaves the body unread.
        ("application/json; charset", 415),
        ("application/json;", 415),
        ("application/json; charset=utf-8", 200),
        ("application/json; charset=UTF-8", 200),
        ("application/json", 200),
        ('Application/JSON; charset="utf-8"', 200),
    ],
)
def test_content_types_as_the_private_servers_body_parser_reads_them(
    http: httpx.Client, content_type: str, status: int
) -> None:
    body = json.dumps({"branch": "default", "modules": {"main": "t"}}).encode()
    with http:
        answer = http.post("/api/user/code", content=body, headers={"Content-Type": content_type})
    assert answer.status_code == status
    assert (answer.json().get("ok") == 1) == (status == 200)


def test_a_byte_order_mark_and_utf16le_bodies_are_read(http: httpx.Client, standin: StandIn) -> None:
    body = json.dumps({"branch": "default", "modules": {"main": "bom ✓"}}, ensure_ascii=False)
    with http:
        bom = http.post("/api/user/code", content=b"\xef\xbb\xbf" + body.encode(), headers=JSON_HEADERS)
        assert bom.json()["ok"] == 1
        assert standin.branch_modules(ALICE, "default") == {"main": "bom ✓"}
        utf16 = body.replace("bom", "utf16").encode("utf-16-le")
        answer = http.post(
            "/api/user/code", content=utf16, headers={"Content-Type": "application/json; charset=utf-16le"}
        )
        assert answer.json()["ok"] == 1
    assert standin.branch_modules(ALICE, "default") == {"main": "utf16 ✓"}


def test_a_lone_surrogate_counts_six_units_towards_the_five_megabytes(http: httpx.Client) -> None:
    # Node's JSON.stringify writes a lone surrogate as a six-character escape: 5 MiB of them are far over the limit.
    overhead = code_length({"main": ""})
    fits = {"main": "x" * (MAX_CODE_LENGTH - overhead - 6) + "\udc00"}
    assert code_length(fits) == MAX_CODE_LENGTH
    over = {"main": "x" * (MAX_CODE_LENGTH - overhead - 5) + "\udc00"}
    with http:
        body = json.dumps({"branch": "default", "modules": fits})
        assert http.post("/api/user/code", content=body, headers=JSON_HEADERS).json()["ok"] == 1
        body = json.dumps({"branch": "default", "modules": over})
        answer = http.post("/api/user/code", content=body, headers=JSON_HEADERS)
    assert answer.json() == {"error": "code length exceeds 5 MB limit"}


def test_node_screeps_apis_me_works_with_a_restricted_token(standin: StandIn) -> None:
    from gitops.standin.testing import RESTRICTED_TOKEN

    # me() asks /api/user/name, then /api/user/find, when its token is not full; /api/auth/me is out of its scope.
    with client(standin, RESTRICTED_TOKEN) as http:
        assert http.get("/api/auth/me").status_code == 403
        assert http.get("/api/user/name").json() == {"ok": 1, "username": ALICE}
        found = http.get("/api/user/find", params={"username": ALICE}).json()
        assert found["ok"] == 1
        assert found["user"]["username"] == ALICE
        assert http.get("/api/user/find", params={"username": "nobody"}).json() == {"error": "user not found"}
    with httpx.Client(base_url=standin.url) as anonymous:
        assert anonymous.get("/api/user/name").status_code == 401


def test_binary_base64_is_read_exactly_as_node_reads_it() -> None:
    # A differential against Node itself (the README's machine has node): the bytes the game would load.
    import random
    import subprocess

    from gitops.core.codeset import node_base64

    rng = random.Random(18)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_= \n\r\t!.\u00e9"
    samples = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40))) for _ in range(300)]
    script = (
        "let d='';process.stdin.on('data',c=>d+=c).on('end',()=>{"
        "console.log(JSON.stringify(JSON.parse(d).map(s=>Buffer.from(s,'base64').toString('hex'))))})"
    )
    done = subprocess.run(
        ["node", "-e", script], input=json.dumps(samples), capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout) == [node_base64(s).hex() for s in samples]


# -- issue 40: the rest of the differential's findings (the same requests against the real server:
# -- tests/private/test_differential.py) -----------------------------------------------------------------------


def test_bad_utf8_is_stored_as_replacement_characters(http: httpx.Client, standin: StandIn) -> None:
    with http:
        body = b'{"branch":"default","modules":{"main":"a\xff\xfeb"}}'
        assert http.post("/api/user/code", content=body, headers=JSON_HEADERS).json()["ok"] == 1
    assert standin.branch_modules(ALICE, "default") == {"main": "a\ufffd\ufffdb"}


def test_an_empty_body_is_an_empty_object_and_1e400_is_null(http: httpx.Client) -> None:
    with http:
        empty = http.post("/api/user/code", content=b"", headers=JSON_HEADERS).json()
        assert empty == {"error": "invalid params: 'modules' must be an object that maps module names to source text"}
        assert http.post("/api/user/memory", content=b'{"path":"x","value":1e400}', headers=JSON_HEADERS).json()["ok"]
        packed = http.get("/api/user/memory", params={"path": "x"}).json()["data"]
    assert packed.startswith("gz:")
    assert gzip.decompress(base64.b64decode(packed[3:])) == b"null"  # JSON.stringify(Infinity), never "Infinity"


def test_nesting_beyond_the_parser_is_nodes_stack_error(http: httpx.Client) -> None:
    body = b'{"path":"deep","value":' + b"[" * 5000 + b"]" * 5000 + b"}"
    with http:
        answer = http.post("/api/user/memory", content=body, headers=JSON_HEADERS)
    assert answer.status_code == 200
    assert answer.json() == {"error": "RangeError: Maximum call stack size exceeded"}


def test_branch_names_are_measured_in_utf16_units(http: httpx.Client) -> None:
    emoji = "\U0001f600" * 16  # 16 characters, 32 UTF-16 units: over the 30 the real server allows
    with http:
        assert http.post("/api/user/clone-branch", json={"newName": emoji}).json() == {"error": "invalid branch name"}
        assert http.post("/api/user/clone-branch", json={"newName": emoji[:15]}).json()["ok"] == 1
        answer = http.post("/api/user/clone-branch", json={"branch": emoji, "newName": "copy"}).json()
    assert answer == {"error": "invalid branch name"}


def test_sizes_are_measured_on_json_as_node_writes_it(http: httpx.Client) -> None:
    # 600 'é' are 602 units of JSON.stringify, under the console's 1,024; escaped as \u00e9 they would be 3,602.
    with http:
        assert http.post("/api/user/console", json={"expression": "\u00e9" * 600}).json()["ok"] == 1
        assert http.post("/api/user/console", json={"expression": "\u00e9" * 1023}).json() == {
            "error": "expression size is too large"
        }
        memory = {"path": "text", "value": "\u00e9" * 600_000}
        assert http.post("/api/user/memory", json=memory).json()["ok"] == 1


def test_head_options_path_case_and_slashes_route_as_express_routes_them(http: httpx.Client) -> None:
    with http:
        head = http.head("/api/user/code")
        assert head.status_code == 200
        assert head.content == b""
        options = http.options("/api/user/code")
        assert options.status_code == 200
        assert set(options.text.split(",")) == {"GET", "HEAD", "POST"}
        assert http.options("/api/nope").status_code == 404
        for path in ("/API/User/Code", "/api//user/code", "/api//user//code", "/api/user/code/"):
            assert http.get(path).json()["ok"] == 1, path
        # As the private server's Express app (measured): one extra slash per mount, one trailing slash, and the
        # path as sent: an escaped letter names no route.
        for path in ("/api/user/code//", "/api///user/code", "//api/user/code", "/api/user/%63ode", "/API/USER/CODE//"):
            assert http.get(path).status_code == 404, path


def test_branch_given_as_a_list_or_an_object_is_refused(http: httpx.Client) -> None:
    with http:
        for query in ("branch=default&branch=x", "branch[]=default", "branch[$ne]=x"):
            answer = http.get("/api/user/code?" + query).json()
            assert answer["error"].startswith("invalid params: give 'branch' once"), query
        # Other parameters are read with parseInt on the real server, which reads a list's first value.
        assert http.get("/api/user/money-history?page=3&page=4").json()["page"] == 3


@pytest.mark.parametrize(
    ("path", "effect"),
    [
        ("/api/user/set-active-branch", "set activeWorld on every branch it matches"),
        ("/api/user/code", "overwrite the code of every branch it matches"),
        ("/api/user/delete-branch", "delete every inactive branch it matches"),
    ],
)
def test_operator_objects_as_branch_names_are_refused_saying_what_the_real_server_would_do(
    http: httpx.Client, standin: StandIn, path: str, effect: str
) -> None:
    body = {"branch": {"$ne": "nothing"}, "activeName": "activeWorld", "modules": {"main": "overwritten"}}
    with http:
        http.post("/api/user/clone-branch", json={"newName": "other"})
        answer = http.post(path, json=body).json()
    assert answer["error"].startswith("invalid params: 'branch' must be a branch name, not an object or array")
    assert effect in answer["error"]
    assert standin.branch_modules(ALICE, "other") == {"main": ""}
    assert [b["branch"] for b in standin.branches(ALICE) if b["activeWorld"]] == ["default"]


@pytest.mark.parametrize(("page", "read"), [("2x", 2), ("-1", -1), ("0x10", 16), ("1e3", 1), ("abc", 0), (" 3", 3)])
def test_page_numbers_are_read_with_parse_int(http: httpx.Client, page: str, read: int) -> None:
    with http:
        assert http.get("/api/user/money-history", params={"page": page}).json()["page"] == read


def test_two_x_token_headers_are_one_unknown_token_as_node_joins_them(standin: StandIn) -> None:
    with httpx.Client(base_url=standin.url) as c:
        headers = httpx.Headers([("X-Token", FULL_TOKEN), ("X-Token", FULL_TOKEN)])
        assert c.get("/api/auth/me", headers=headers).status_code == 401
        assert c.get("/api/auth/me", headers={"X-Token": FULL_TOKEN}).status_code == 200


def test_a_lower_case_method_is_a_bad_request(standin: StandIn) -> None:
    host, port = standin.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        raw.sendall(b"get /api/version HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = raw.recv(4096)
    assert answer.startswith(b"HTTP/1.1 400 ")
