"""Compressed uploads (issue 23): the stand-in reads them as the private server does, and the tool sends them only
where the server is known to read them (the manifest's ``compress``; ``auto`` learns it once, without changing
anything, and keeps the answer in the ledger)."""

from __future__ import annotations

import gzip
import itertools
import json
import os
import random
import zlib
from pathlib import Path

import httpx
import pytest

from gitops.core.endpoints import PROBE_BRANCH
from gitops.edges.bodies import COMPRESS_MIN_BYTES
from gitops.standin.bounds import MAX_BODY
from gitops.standin.testing import ALICE, FULL_TOKEN, StandIn
from tests.factories import record_calls
from tests.project import Project

UPLOAD = "POST /api/user/code"
ACTIVATE = "POST /api/user/set-active-branch"
JSON = {"Content-Type": "application/json; charset=utf-8"}


def _bot(size: int, seed: int = 1) -> dict[str, str]:
    """A bot of varied JavaScript, about ``size`` bytes (compresses a few times, as real code does)."""
    rng = random.Random(seed)
    words = ["creep", "room", "spawn", "energy", "target", "harvest", "upgrade", "build", "repair", "memory"]
    files: dict[str, str] = {"src/main.js": "module.exports.loop = () => require('role0').run();\n"}
    per = 8000
    for i in range(max(1, size // per)):
        lines = [
            f"const {rng.choice(words)}{rng.randrange(10**6)} = {rng.randrange(10**9)}; // {rng.choice(words)}"
            for _ in range(per // 50)
        ]
        files[f"src/role{i}.js"] = "module.exports.run = () => 0;\n" + "\n".join(lines) + "\n"
    return files


def _modules(files: dict[str, str]) -> dict[str, str]:
    return {name.removeprefix("src/").removesuffix(".js"): text for name, text in files.items()}


@pytest.fixture
def project(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write(_bot(200_000))
    p.manifest([{"branch": "default", "root": "src"}])
    p.commit("bot")
    return p


# -- the stand-in reads compressed bodies as body-parser does --------------------------------------------------


def _post(standin: StandIn, body: bytes, encoding: str) -> httpx.Response:
    with httpx.Client(base_url=standin.url, headers={"X-Token": FULL_TOKEN}) as http:
        return http.post("/api/user/code", content=body, headers={**JSON, "Content-Encoding": encoding})


@pytest.mark.parametrize(("encoding", "pack"), [("deflate", zlib.compress), ("gzip", gzip.compress)])
def test_the_standin_reads_deflate_and_gzip_bodies(standin: StandIn, encoding: str, pack: object) -> None:
    modules = {"main": "loop();\n" * 1000}
    body = json.dumps({"branch": "default", "modules": modules}).encode()
    assert callable(pack)
    answer = _post(standin, pack(body), encoding)
    assert answer.json()["ok"] == 1
    assert standin.branch_modules(ALICE, "default") == modules
    assert standin.app.encodings[(UPLOAD, encoding)] == 1


def test_the_body_limit_applies_to_the_inflated_size(standin: StandIn) -> None:
    # 9 MB of JSON that deflates to a few kilobytes: refused with the 413 of an uncompressed 9 MB body.
    body = b'{"branch":"default","modules":{"main":"' + b" " * (9 * 1024 * 1024) + b'"}}'
    packed = zlib.compress(body)
    assert len(packed) < MAX_BODY // 100
    answer = _post(standin, packed, "deflate")
    assert answer.status_code == 413
    assert "PayloadTooLargeError" in answer.text
    assert standin.branch_modules(ALICE, "default") == {"main": ""}


def test_the_five_megabyte_rule_applies_to_the_inflated_modules(standin: StandIn) -> None:
    body = json.dumps({"branch": "default", "modules": {"main": "x" * (5 * 1024 * 1024)}}).encode()
    assert _post(standin, zlib.compress(body), "deflate").json() == {"error": "code length exceeds 5 MB limit"}


@pytest.mark.parametrize(
    ("body", "encoding", "status"),
    [(b"{}", "br", 415), (b"not deflate at all", "deflate", 400), (zlib.compress(b'{"a":1}')[:-4], "deflate", 400)],
)
def test_bodies_that_do_not_inflate_are_refused(standin: StandIn, body: bytes, encoding: str, status: int) -> None:
    answer = _post(standin, body, encoding)
    assert answer.status_code == status
    assert standin.branch_modules(ALICE, "default") == {"main": ""}


# -- the tool ---------------------------------------------------------------------------------------------------


def test_a_server_that_says_it_reads_deflate_gets_compressed_uploads(project: Project, standin: StandIn) -> None:
    # The stand-in's answers carry Accept-Encoding: deflate, gzip (RFC 7694): no probe is needed.
    result = project.apply("--yes")
    assert result.code == 0, result.err
    assert standin.branch_modules(ALICE, "default") == _modules(_bot(200_000))
    assert standin.app.encodings[(UPLOAD, "deflate")] == 1
    assert standin.app.encodings[(UPLOAD, "identity")] == 0
    assert standin.count(ACTIVATE) == 0
    assert "set-active-branch of a branch that does not exist" not in result.out


def test_auto_probes_once_without_changing_anything_then_remembers(project: Project, standin: StandIn) -> None:
    standin.app.advertise_encodings = False  # as the official server: nothing says whether it reads them
    code, doc = project.plan_json()
    assert code == 2
    budget = {row["endpoint"]: row["needed"] for row in doc["budget"]}
    assert budget[ACTIVATE] == 1  # the probe is planned and budgeted
    assert budget[UPLOAD] == 1
    assert any("whether the server reads compressed uploads" in w for w in doc["warnings"])
    assert standin.count(ACTIVATE) == 0  # a plan never sends it
    result = project.apply("--yes")
    assert result.code == 0, result.err
    # apply --yes asks it while it reads the server (nothing to confirm), and says so.
    assert "whether the server reads compressed uploads: it does; kept in the ledger" in result.out
    assert standin.count(ACTIVATE) == 1
    assert standin.app.encodings[(ACTIVATE, "deflate")] == 1
    assert standin.app.encodings[(UPLOAD, "deflate")] == 1
    assert [b["branch"] for b in standin.branches(ALICE)] == ["default"]  # no branch made by the probe
    assert PROBE_BRANCH not in json.dumps(standin.branches(ALICE))
    # Remembered: the next change is uploaded compressed without asking again.
    project.write({"src/role0.js": "module.exports.run = () => 1;\n" + "// more\n" * 20_000})
    project.commit("more")
    assert project.apply("--yes").code == 0
    assert standin.count(ACTIVATE) == 1
    assert standin.app.encodings[(UPLOAD, "deflate")] == 2


def test_a_server_that_does_not_read_them_gets_plain_uploads(project: Project, standin: StandIn) -> None:
    standin.app.advertise_encodings = False
    standin.app.inflate = False  # answers 415 to a compressed body, as a server without an inflating parser
    result = project.apply("--yes")
    assert result.code == 0, result.err
    assert standin.count(ACTIVATE) == 1
    assert standin.app.encodings[(UPLOAD, "identity")] == 1
    assert standin.app.encodings[(UPLOAD, "deflate")] == 0
    assert standin.branch_modules(ALICE, "default") == _modules(_bot(200_000))
    ledger = next(project.state_dir.rglob("*.json")).read_text(encoding="utf-8")
    assert '"compression":"refused"' in ledger.replace(" ", "")
    code, doc = project.plan_json()
    assert code == 0
    assert not any("compressed uploads" in w for w in doc["warnings"])


def test_never_sends_plain_uploads_and_no_probe(project: Project, standin: StandIn) -> None:
    standin.app.advertise_encodings = False
    project.manifest([{"branch": "default", "root": "src"}])
    path = project.root / "gitops.yaml"
    path.write_text(
        path.read_text().replace("token_env: SCREEPS_TOKEN", "token_env: SCREEPS_TOKEN\n    compress: never")
    )
    assert project.apply("--yes").code == 0
    assert standin.count(ACTIVATE) == 0
    assert standin.app.encodings[(UPLOAD, "identity")] == 1


def test_always_on_a_server_that_does_not_read_them_stops_with_nothing_changed(
    project: Project, standin: StandIn
) -> None:
    standin.app.advertise_encodings = False
    standin.app.inflate = False
    path = project.root / "gitops.yaml"
    path.write_text(
        path.read_text().replace("token_env: SCREEPS_TOKEN", "token_env: SCREEPS_TOKEN\n    compress: always")
    )
    result = project.apply("--yes")
    assert result.code != 0
    assert "415" in result.err
    assert "did not read the compressed request body, so nothing was changed" in result.err
    assert "compress to 'never'" in result.err
    assert "Traceback" not in result.err
    assert standin.count(ACTIVATE) == 0  # always: no probe
    assert standin.branch_modules(ALICE, "default") == {"main": ""}


def test_small_uploads_are_not_compressed(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = Project(tmp_path / "small", standin, capsys, monkeypatch)
    p.write({"src/main.js": "module.exports.loop = () => {};\n"})
    p.manifest([{"branch": "default", "root": "src"}])
    p.commit()
    assert p.apply("--yes").code == 0
    assert standin.app.encodings[(UPLOAD, "identity")] == 1
    assert len(json.dumps({"branch": "default", "modules": {"main": "x" * 100}})) < COMPRESS_MIN_BYTES


def test_a_body_is_deflated_once_and_ahead_of_time_for_every_server_that_gets_it() -> None:
    from gitops.edges import bodies

    content = json.dumps({"branch": "main", "modules": _bot(200_000, seed=7)}).encode()
    ahead = bodies.BackgroundDeflates()
    ahead.start(content)
    ahead.start(content)  # under way: no second thread
    first = bodies.deflated(content)  # waits for the background thread's result
    ahead.join()
    assert zlib.decompress(first) == content
    assert bodies.deflated(content) is first  # the same bytes object: not computed again
    other = content.replace(b"main", b"mian", 1)
    assert bodies.deflated(other) is not first
    assert zlib.decompress(bodies.deflated(other)) == other
    for n in range(bodies.KEPT + 1):  # bounded: the oldest body is forgotten
        bodies.deflated(content + b" " * (n + 1))
    assert bodies.deflated(content) is not first
    assert bodies.deflated(content) == first


def test_the_deflate_is_zlib_ngs_where_pyproject_installs_it() -> None:
    import platform

    from gitops.edges import bodies

    # pyproject.toml installs zlib-ng on these machines; an import that broke would quietly cost a quarter more CPU.
    if platform.machine() in ("x86_64", "AMD64", "aarch64", "arm64"):
        assert bodies.library().__name__ == "zlib_ng.zlib_ng"
    else:
        assert bodies.library() is zlib


@pytest.mark.parametrize("library", ["installed", "standard"])
def test_a_large_body_is_deflated_in_parts_at_once_into_one_zlib_stream(
    monkeypatch: pytest.MonkeyPatch, library: str
) -> None:
    import threading

    from gitops.edges import bodies

    if library == "standard":  # what a machine without zlib-ng's wheel deflates with
        monkeypatch.setattr(bodies, "library", lambda: zlib)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)  # as on a larger machine: at most MOST_PARTS parts
    content = json.dumps({"branch": "main", "modules": _bot(4_700_000, seed=3)}).encode()
    done: list[tuple[str, int, int]] = []
    real_part = bodies._part

    def part(body: bytes, start: int, end: int) -> bytes:
        done.append((threading.current_thread().name, start, end))
        return real_part(body, start, end)

    monkeypatch.setattr(bodies, "_part", part)
    packed = bodies._deflate(content)
    inflater = zlib.decompressobj()
    assert inflater.decompress(packed) + inflater.flush() == content
    assert inflater.eof  # one stream, ending where the body ends
    assert not inflater.unused_data
    parts = min(bodies.MOST_PARTS, len(content) // bodies.PART_BYTES)
    assert len(done) == parts >= 3
    cuts = sorted((start, end) for _, start, end in done)
    assert cuts[0][0] == 0
    assert cuts[-1][1] == len(content)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(cuts))  # contiguous, no gap, no overlap
    assert sorted(name for name, _, _ in done) == ["MainThread"] + ["gitops-deflate-part"] * (parts - 1)
    # Each part continues from the window before it: hardly larger than one stream of the whole.
    assert len(packed) <= len(bodies.library().compress(content, bodies.COMPRESS_LEVEL)) * 1.005
    # A body below two parts is one zlib stream, exactly what one compress call gives.
    small = content[: bodies.PART_BYTES * 2 - 1]
    assert bodies._deflate(small) == bodies.library().compress(small, bodies.COMPRESS_LEVEL)


def test_the_standin_reads_a_body_deflated_in_parts(standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    from gitops.edges import bodies

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    modules = _modules(_bot(3_000_000, seed=5))
    body = json.dumps({"branch": "default", "modules": modules}).encode()
    assert len(body) >= 2 * bodies.PART_BYTES
    assert _post(standin, bodies._deflate(body), "deflate").json()["ok"] == 1
    assert standin.branch_modules(ALICE, "default") == modules


def test_apply_yes_deflates_the_upload_beside_the_wait_for_the_server(
    project: Project, standin: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local read's worker hands the code to the session, which deflates each upload body in a background
    thread; the upload then finds the bytes ready (one deflate of the body in all, not in the main thread)."""
    import threading

    from gitops.edges import bodies

    real = bodies.library().compress
    big: list[str] = []
    starters: list[str] = []

    def counting(data: bytes, level: int = -1) -> bytes:
        if len(data) >= COMPRESS_MIN_BYTES:
            big.append(threading.current_thread().name)
        packed: bytes = real(data, level)
        return packed

    real_start = bodies.BackgroundDeflates.start

    def start(self: bodies.BackgroundDeflates, content: bytes) -> None:
        starters.append(threading.current_thread().name)
        real_start(self, content)

    monkeypatch.setattr(bodies, "_memo", type(bodies._memo)())  # nothing deflated by an earlier test
    monkeypatch.setattr(bodies.library(), "compress", counting)  # the module bodies.py deflates with
    monkeypatch.setattr(bodies.BackgroundDeflates, "start", start)
    result = project.apply("--yes")
    assert result.code == 0, result.err
    assert big == ["gitops-deflate"]  # once, in the background; the upload used it
    # Asked by the local read's worker (in this process there is no child), before the plan was made.
    assert starters[0] == "gitops-local-read"
    assert standin.app.encodings[(UPLOAD, "deflate")] == 1
    assert standin.branch_modules(ALICE, "default") == _modules(_bot(200_000))
    # A plan deflates nothing (it uploads nothing).
    big.clear()
    project.write({"src/role0.js": "module.exports.run = () => 2;\n"})
    project.commit("small change")
    assert project.plan().code == 2
    assert big == []


def test_apply_yes_deflates_nothing_ahead_when_the_server_holds_the_code_already(
    project: Project, standin: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deploy that changes nothing (the ledger knows the server holds this code) has no body deflated in the
    background: the run would wait for that work at its end."""
    import threading

    from gitops.edges import bodies

    assert project.apply("--yes").code == 0
    deflated: list[str] = []
    real_deflate = bodies._deflate

    def deflate(content: bytes) -> bytes:
        deflated.append(threading.current_thread().name)
        return real_deflate(content)

    monkeypatch.setattr(bodies, "_deflate", deflate)
    monkeypatch.setattr(bodies, "_memo", type(bodies._memo)())  # as in a new run: nothing deflated yet
    again = project.apply("--yes")
    assert again.code == 0, again.err
    assert "No changes" in again.out
    assert deflated == []
    project.write({"src/role0.js": "module.exports.run = () => 3;\n"})
    project.commit("a change")
    changed = project.apply("--yes")
    assert changed.code == 0, changed.err
    assert deflated == ["gitops-deflate"]  # a body that differs from what the server holds: deflated ahead again
    assert standin.app.encodings[(UPLOAD, "deflate")] == 2


def test_a_body_prepared_for_a_write_is_sent_as_encoded_for_those_very_modules(
    standin: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``prepare_write`` encodes the body's JSON (or is given it: the body the local read made) once, and the write
    of that very modules object sends those bytes; a write of another object, even an equal one, encodes its own."""
    from types import MappingProxyType

    from gitops.config.credentials import TokenAuth
    from gitops.core.codeset import upload_body
    from gitops.edges.service import client as client_module
    from gitops.edges.service import requestbodies
    from gitops.secrets import Secret

    encoded = record_calls(monkeypatch, requestbodies, "json_body")
    c = client_module.ServiceClient(
        server_name="s", url=standin.url, auth=TokenAuth(Secret(FULL_TOKEN), "the variable T")
    )
    try:
        modules = MappingProxyType(_modules(_bot(20_000)))
        c.prepare_write("default", modules)
        c.upload_code("default", modules)
        assert sum(1 for b in encoded if isinstance(b, dict) and "modules" in b) == 1  # once, not twice
        assert standin.branch_modules(ALICE, "default") == dict(modules)
        # Given the body, it is sent as it is (here another set's, to show where the bytes come from).
        given = upload_body("default", {"main": "given();"})
        c.prepare_write("default", modules, content=given)
        c.upload_code("default", modules)
        assert standin.branch_modules(ALICE, "default") == {"main": "given();"}
        # Another object with the same modules: encoded here, from the modules it was given.
        c.prepare_write("default", modules, content=given)
        c.upload_code("default", dict(modules))
        assert standin.branch_modules(ALICE, "default") == dict(modules)
    finally:
        c.close()
