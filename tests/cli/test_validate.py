"""``gitops validate`` and ``gitops schema`` through the real CLI: output, exit codes, environment variables."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gitops.cli import run
from gitops.config.validation import manifest_json_schema
from tests.factories import commit_all, git, make_repo, manifest_data, write_files, write_manifest

BOT: dict[str, str | bytes] = {
    "src/main.js": "module.exports.loop = () => {};\n",
    "src/role/harvester.js": "// é\n",
    "src/lib/a.wasm": b"\0asm",
}


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITOPS_MANIFEST", raising=False)
    monkeypatch.delenv("GITOPS_REF", raising=False)
    return tmp_path


def test_validate_prints_a_summary_per_branch(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_files(here, BOT)
    write_manifest(
        here,
        branches=[
            {"branch": "main", "root": "src", "include": ["**/*.js", "**/*.wasm"], "activate": ["world", "sim"]},
            {"branch": "lib", "root": "src/role"},
        ],
    )
    assert run(["validate"]) == 0
    out, err = capsys.readouterr()
    assert out == (
        "manifest gitops.yaml is valid: 1 server, 2 branches; code from the working tree\n"
        "  local/main: 3 modules (1 binary), 42 B; 105 of 5,242,880 characters (0.0% of the 5 MB limit); "
        "activates world, sim\n"
        "  local/lib: 1 module, 6 B; 22 of 5,242,880 characters (0.0% of the 5 MB limit)\n"
    )
    assert err == (
        "warning: local/lib: no module 'main'; the server adds an empty one, so the code will not run; add "
        "src/role/main.js\n"
    )


def test_validate_reads_a_ref_and_the_environment(
    here: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    make_repo(here, {"bot/src/main.js": "committed"})
    write_manifest(here / "bot")
    commit = commit_all(here, "manifest")
    write_files(here, {"bot/src/main.js": b"\xff not committed"})
    monkeypatch.setenv("GITOPS_MANIFEST", "bot/gitops.yaml")

    assert run(["validate", "--ref", "HEAD"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"manifest bot/gitops.yaml is valid: 1 server, 1 branch; code from the ref HEAD (commit {commit[:12]})"
    )
    monkeypatch.setenv("GITOPS_REF", "main")
    assert run(["validate"]) == 0
    monkeypatch.delenv("GITOPS_REF")
    assert run(["validate"]) == 6  # the working tree holds the non-UTF-8 edit
    assert capsys.readouterr().err == (
        f"Error: the local code from the working tree (commit {commit[:12]}, uncommitted changes) cannot be "
        "deployed (1 problem):\n"
        "  - local/main: src/main.js is not UTF-8 (byte 0xff at offset 0, line 1); save it as UTF-8, or list "
        "it under binary if it is not text\n"
    )


def test_invalid_manifest_exits_5(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_manifest(here, manifest_data(servers={"local": {"url": "http://127.0.0.1:21025", "token": "t0k3n"}}))
    assert run(["validate", "-m", "gitops.yaml"]) == 5
    assert capsys.readouterr().err == (
        "Error: manifest gitops.yaml is invalid (1 problem):\n"
        "  - gitops.yaml:5: servers.local.token: literal secrets are refused; put the token in an environment "
        "variable and name it with token_env\n"
        "The manifest reference: gitops help manifest; 'gitops schema' prints its JSON Schema.\n"
    )


def test_missing_manifest_exits_5(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["validate", "--manifest", "deploy.yaml"]) == 5
    assert capsys.readouterr().err == (
        "Error: manifest deploy.yaml not found\n"
        "Without -m, gitops looks for gitops.yaml or gitops.yml here and in the folders above, up to the top of the "
        "Git repository. Create one with 'gitops init' (it writes a commented one for the layout it finds), or name "
        "another file with -m/--manifest or GITOPS_MANIFEST.\n"
    )


def test_invalid_code_exits_6(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_files(here, {"src/main.js": ""})
    write_manifest(here, branches=[{"branch": "main", "root": "src", "include": ["**/*.ts"]}])
    assert run(["validate"]) == 6
    assert capsys.readouterr().err == (
        "Error: the local code from the working tree cannot be deployed (1 problem):\n"
        "  - gitops.yaml:11: branches[0].include[0]: '**/*.ts' matches no file under src/; fix the glob or remove "
        "it\n"
    )


def test_unknown_ref_exits_6(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_repo(here, {"src/main.js": ""})
    write_manifest(here)
    assert run(["validate", "--ref", "v9"]) == 6
    assert capsys.readouterr().err.startswith(f"Error: --ref v9: no such commit, branch or tag in {here}\n")
    assert git(here, "status", "--porcelain") == "?? gitops.yaml\n"  # validate changed nothing


def test_schema_prints_the_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == manifest_json_schema()


def test_file_names_that_are_not_utf8_exit_6_and_print_safely(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Such a name passed validate and plan before, and apply failed on it with exit 70.
    write_files(here, {"src/main.js": "", os.fsdecode(b"src/caf\xe9.js"): ""})
    write_manifest(here)
    assert run(["validate"]) == 6
    assert capsys.readouterr().err == (
        "Error: the local code from the working tree cannot be deployed (1 problem):\n"
        "  - local/main: src/caf\\xe9.js has a name that is not UTF-8 (its undecodable bytes are shown as \\xNN), and "
        "module names are UTF-8 text; rename the file\n"
    )


def test_manifests_that_crashed_validate_exit_5(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_files(here, {"src/main.js": ""})
    write_manifest(here, 'version: 1\nservers: &a {x: *a}\nbranches: [{server: local, branch: main, root: "src\\0"}]\n')
    assert run(["validate"]) == 5  # was a RecursionError (exit 70)
    assert capsys.readouterr().err == (
        "Error: manifest gitops.yaml is invalid (2 problems):\n"
        "  - gitops.yaml:2:10: YAML anchors are not supported in gitops.yaml; remove '&a' and write the value out "
        "where it is needed\n"
        "  - gitops.yaml:2:17: YAML aliases are not supported in gitops.yaml; write the value out\n"
        "The manifest reference: gitops help manifest; 'gitops schema' prints its JSON Schema.\n"
    )
    write_manifest(here, manifest_data(branches=[{"branch": "main", "root": "src\0"}]))
    assert run(["validate"]) == 5  # was 'ValueError: embedded null byte' (exit 70)
    assert capsys.readouterr().err == (
        "Error: manifest gitops.yaml is invalid (1 problem):\n"
        "  - gitops.yaml:9: branches[0].root: 'src\\x00' contains the control character '\\x00'; write the folder's "
        "name without it, e.g. src\n"
        "The manifest reference: gitops help manifest; 'gitops schema' prints its JSON Schema.\n"
    )


def test_an_8_mb_manifest_is_refused_unread_with_exit_5(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 200,000 servers took 35 s and 1 GB of memory before exit 5; over 1 MB, the file is not parsed at all.
    line = "  s{:06d}: {{url: 'http://127.0.0.1:21025', token_env: SCREEPS_TOKEN}}\n"
    text = "version: 1\nservers:\n" + "".join(line.format(i) for i in range(125_000)) + "branches: []\n"
    write_manifest(here, text)
    size = len(text.encode())
    assert size > 8 * 1024 * 1024
    assert run(["validate"]) == 5
    assert capsys.readouterr().err == (
        "Error: manifest gitops.yaml is invalid (1 problem):\n"
        f"  - gitops.yaml:1: the file is {size:,} bytes ({size / 1024 / 1024:.1f} MB), and a manifest may have at "
        "most 1,048,576 bytes (1.0 MB); it was not read: check that this is the right file\n"
        "The manifest reference: gitops help manifest; 'gitops schema' prints its JSON Schema.\n"
    )


def test_odd_yaml_tags_exit_5_not_70(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_files(here, {"src/main.js": ""})
    write_manifest(here, "version: 1\nservers:\n  local: {url: !!timestamp x, token_env: !!python/name:os.system }\n")
    assert run(["validate"]) == 5  # each was an exception inside pyyaml (exit 70)
    assert capsys.readouterr().err == (
        "Error: manifest gitops.yaml is invalid (3 problems):\n"
        "  - gitops.yaml:1: branches: is required but missing; add a 'branches:' list, e.g. - {server: local, "
        "branch: main}\n"
        "  - gitops.yaml:3: servers.local.url: the value is not a date or timestamp, as its tag !!timestamp says; "
        "write a date or timestamp, or remove the tag (and quote the value if it is text)\n"
        "  - gitops.yaml:3: servers.local.token_env: the YAML tag !!python/name:os.system on a value is not "
        "supported; remove the tag (and quote the value if it is text)\n"
        "The manifest reference: gitops help manifest; 'gitops schema' prints its JSON Schema.\n"
    )
