"""``gitops pull`` and ``gitops init --pull`` end to end: a real Git repository, the real CLI, the real stand-in."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import httpx
import pytest

from gitops.cli import run
from gitops.errors import SourceError
from gitops.standin.testing import FULL_TOKEN, StandIn
from tests.project import Project, spend

DOWNLOAD = "GET /api/user/code"
WASM = b"\x00asm\x01\x00\x00\x00" + bytes(range(256))

MAIN = {
    "main": "const harvester = require('role/harvester');\nmodule.exports.loop = () => harvester.run();\n",
    "role/harvester": "module.exports.run = () => {\n  // harvest\n};\n",
    "lib/add.wasm": {"binary": base64.b64encode(WASM).decode("ascii")},
}
FLAT = {
    "main": "module.exports.loop = () => require('role.harvester').run();\n",
    "role.harvester": "module.exports.run = () => 'flat';\n",
}


def seed(standin: StandIn, branch: str, modules: dict[str, Any]) -> None:
    """Put code on the server behind the tool's back (the player's code before adopting the tool)."""
    with httpx.Client(base_url=standin.url, headers={"X-Token": FULL_TOKEN}) as http:
        if branch != "default":
            created = http.post("/api/user/clone-branch", json={"branch": "", "newName": branch})
            assert created.json().get("ok") == 1, created.text
        answer = http.post("/api/user/code", json={"branch": branch, "modules": modules})
        assert answer.json().get("ok") == 1, answer.text


@pytest.fixture
def project(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    seed(standin, "main", MAIN)
    seed(standin, "flat", FLAT)
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.manifest(
        [
            {"branch": "main", "root": "src", "include": ["**/*.js", "**/*.wasm"]},
            {"branch": "flat", "root": "flat", "naming": {"separator": "."}},
        ]
    )
    p.commit("manifest")
    return p


def test_pull_writes_every_module_and_the_plan_after_it_has_no_changes(project: Project, standin: StandIn) -> None:
    result = project.gitops("pull")
    assert result.code == 0, result.err
    assert result.out.splitlines()[:5] == [
        "local/main -> src/: 3 created, 0 updated, 0 unchanged",
        "  + src/lib/add.wasm",
        "  + src/main.js",
        "  + src/role/harvester.js",
        "local/flat -> flat/: 2 created, 0 updated, 0 unchanged",
    ]
    assert result.err == ""
    assert (project.root / "src/main.js").read_text(encoding="utf-8") == MAIN["main"]
    assert (project.root / "src/role/harvester.js").read_text(encoding="utf-8") == MAIN["role/harvester"]
    assert (project.root / "src/lib/add.wasm").read_bytes() == WASM
    assert (project.root / "flat/role.harvester.js").read_text(encoding="utf-8") == FLAT["role.harvester"]
    assert (project.root / "flat/main.js").read_text(encoding="utf-8") == FLAT["main"]

    plan = project.plan("--refresh=always")
    assert plan.code == 0, plan.out + plan.err
    assert "No changes: the servers hold what the repository holds." in plan.out

    again = project.gitops("pull")
    assert again.code == 0
    assert "local/main -> src/: 0 created, 0 updated, 3 unchanged" in again.out


def test_pull_does_not_overwrite_uncommitted_changes_unless_forced(project: Project, standin: StandIn) -> None:
    assert project.gitops("pull").code == 0
    project.commit("pulled")
    mine = "module.exports.loop = () => 'my work in progress';\n"
    project.write({"src/main.js": mine})
    with httpx.Client(base_url=standin.url, headers={"X-Token": FULL_TOKEN}) as http:
        http.post("/api/user/code", json={"branch": "main", "modules": {**MAIN, "main": "// newer on the server\n"}})

    refused = project.gitops("pull")
    assert refused.code == 6
    assert refused.err.startswith(
        "Error: the pull would overwrite files it must not; nothing was written:\n"
        "  - src/main.js has uncommitted changes\n"
        "Commit or stash your changes first (git stash), or pass --force to overwrite them.\n"
    )
    assert (project.root / "src/main.js").read_text(encoding="utf-8") == mine

    forced = project.gitops("pull", "--force")
    assert forced.code == 0, forced.err
    assert "  ~ src/main.js" in forced.out
    assert (project.root / "src/main.js").read_text(encoding="utf-8") == "// newer on the server\n"


def test_an_untracked_file_in_the_way_is_protected_too(project: Project) -> None:
    project.write({"flat/main.js": "// mine, never committed\n"})
    refused = project.gitops("pull")
    assert refused.code == 6
    assert "  - flat/main.js has uncommitted changes\n" in refused.err
    assert not (project.root / "src").exists()  # nothing at all was written


def test_dry_run_lists_and_writes_nothing(project: Project) -> None:
    result = project.gitops("pull", "--dry-run", "--branch", "main")
    assert result.code == 0, result.err
    assert result.out == (
        "local/main -> src/: 3 would create, 0 would update, 0 unchanged\n"
        "  + src/lib/add.wasm\n  + src/main.js\n  + src/role/harvester.js\n"
        "Dry run: nothing was written.\n"
    )
    assert not (project.root / "src").exists()


@pytest.mark.parametrize("name", ["a/../../../escaped", "x/.git/hooks/post-checkout", "C:/Windows/evil"])
def test_hostile_module_names_are_refused_and_nothing_is_written(
    project: Project, standin: StandIn, tmp_path: Path, name: str
) -> None:
    with httpx.Client(base_url=standin.url, headers={"X-Token": FULL_TOKEN}) as http:
        http.post("/api/user/code", json={"branch": "main", "modules": {**MAIN, name: "// evil\n"}})
    before = sorted(p for p in tmp_path.rglob("*") if "-state" not in str(p) and "standin" not in str(p))
    result = project.gitops("pull")
    assert result.code == 1
    assert result.err.startswith(
        "Error: the server's code holds module names that cannot be files under the root; nothing was written:\n"
        f"  - local/main: module {name!r} "
    )
    after = sorted(p for p in tmp_path.rglob("*") if "-state" not in str(p) and "standin" not in str(p))
    assert after == before


def test_pull_refuses_downloads_that_do_not_fit_before_sending_any(project: Project, standin: StandIn) -> None:
    spend(standin, DOWNLOAD, 58)
    assert project.gitops("pull", "--branch", "main").code == 0  # the headers now say 1 download remains
    downloads = standin.count(DOWNLOAD)
    refused = project.gitops("pull")  # two branches: two downloads
    assert refused.code == 3
    assert refused.err.startswith("Error: the pull needs more downloads than remain; no download was sent:\n")
    assert "Pull fewer branches (--branch NAME), wait for the reset" in refused.err
    assert "the plan needs 2 x GET /api/user/code but 1 of 60 per hour remain" in refused.err
    assert standin.count(DOWNLOAD) == downloads


def test_server_and_branch_restrict_the_pull_and_nothing_else_is_contacted(project: Project) -> None:
    project.manifest(
        [
            {"branch": "main", "root": "src", "include": ["**/*.js", "**/*.wasm"]},
            {"server": "gone", "branch": "main", "root": "gone"},
        ],
        servers={
            "local": {"url": project.service.url, "token_env": "SCREEPS_TOKEN"},
            "gone": {"url": "http://127.0.0.1:9", "token_env": "SCREEPS_TOKEN"},
        },
    )
    result = project.gitops("pull", "--server", "local")
    assert result.code == 0, result.err
    assert (project.root / "src/main.js").exists()
    unknown = project.gitops("pull", "--branch", "nope")
    assert unknown.code == 4
    assert "--branch nope: the manifest" in unknown.err
    assert "Valid branches: gone/main, local/main, main" in unknown.err


def test_a_branch_the_server_lacks_is_a_warning(project: Project) -> None:
    project.manifest([{"branch": "missing", "root": "src"}])
    result = project.gitops("pull")
    assert result.code == 0
    assert "warning: local/missing: the server has no such branch; nothing was pulled for it" in result.err


def test_init_pull_adopts_the_servers_code_into_a_new_repository(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(standin, "main", {"main": MAIN["main"], "role/harvester": MAIN["role/harvester"]})
    p = Project(tmp_path / "new-bot", standin, capsys, monkeypatch)
    result = p.gitops("init", "--server", standin.url, "--branch", "main", "--pull")
    assert result.code == 0, result.err
    assert "Detected layout: empty (root src" in result.out
    assert "local/main -> src/: 2 created" in result.out
    assert (p.root / "src/role/harvester.js").read_text(encoding="utf-8") == MAIN["role/harvester"]
    capsys.readouterr()  # validate takes no --state-dir: it runs directly
    assert run(["validate", "-m", str(p.root / "gitops.yaml")]) == 0
    plan = p.plan("--refresh=always")
    assert plan.code == 0, plan.out + plan.err


def test_a_symbolic_link_under_the_root_cannot_carry_a_write_outside(project: Project, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (project.root / "src").mkdir()
    (project.root / "src/role").symlink_to(outside, target_is_directory=True)
    result = project.gitops("pull", "--branch", "main")
    assert result.code == 6
    assert (
        "  - src/role/harvester.js: its folder leads outside the repository (through a symbolic link); pull writes "
        "only under the root\n"
    ) in result.err
    assert list(outside.iterdir()) == []
    assert not (project.root / "src/main.js").exists()


def test_a_bundled_bot_round_trips_its_source_map_and_its_wasm_named_by_stem(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    the_map = '{"version":3,"sources":["../src/main.ts"],"mappings":"AAAA"}'
    seed(
        standin,
        "bundle",
        {
            "main": "module.exports.loop = () => require('bot_bg');\n",
            # rollup-plugin-screeps' form, byte for byte (no newline at the end).
            "main.js.map": f"module.exports = {the_map};",
            "bot_bg": {"binary": base64.b64encode(WASM).decode("ascii")},
        },
    )
    p = Project(tmp_path / "bundle", standin, capsys, monkeypatch)
    p.manifest(
        [
            {
                "branch": "bundle",
                "root": "dist",
                "include": ["*.js", "*.js.map", "*.wasm"],
                "binary": ["*.wasm"],
                "naming": {"strip_suffixes": [".js", ".wasm"]},
            }
        ]
    )
    result = p.gitops("pull")
    assert result.code == 0, result.err
    assert result.err == ""
    assert (p.root / "dist/main.js.map").read_text(encoding="utf-8") == the_map
    assert (p.root / "dist/bot_bg.wasm").read_bytes() == WASM
    plan = p.plan("--refresh=always")
    assert plan.code == 0, plan.out + plan.err


@pytest.mark.parametrize(
    ("deep", "why"),
    [
        ("/".join(["d" * 200] * 25) + "/x", "that path is longer than 1024 bytes"),  # over PATH_MAX in all
        ("/".join(["d"] * 1500), "that is 1500 folders deep (at most 32)"),  # 1,500 levels: once exit 70
    ],
)
def test_a_path_the_system_will_not_take_is_refused_before_any_write(
    project: Project, standin: StandIn, deep: str, why: str
) -> None:
    with httpx.Client(base_url=standin.url, headers={"X-Token": FULL_TOKEN}) as http:
        http.post("/api/user/code", json={"branch": "main", "modules": {"main": "// m\n", f"zz/{deep}": "// deep\n"}})
    result = project.gitops("pull", "--branch", "main")
    assert result.code == 1
    assert "Traceback" not in result.err
    assert f"  - local/main: module 'zz/{deep}' would be written to zz/{deep}.js, but {why}\n" in result.err
    assert "nothing was written" in result.err
    assert not (project.root / "src").exists()


def test_a_write_that_fails_part_way_says_what_was_written(tmp_path: Path) -> None:
    from gitops.app.pulling import write_files
    from gitops.config.manifest import load_manifest
    from gitops.core.pull import BranchPull, FileWrite
    from tests.factories import write_manifest

    loaded = load_manifest(write_manifest(tmp_path / "bot"))
    config = loaded.manifest.branches[0]
    deep = "d" * 300 + ".js"  # longer than a file name may be
    writes = [
        FileWrite("main.js", "main", b"// m\n", "create"),
        FileWrite(deep, "deep", b"// deep\n", "create"),
        FileWrite("z.js", "z", b"// z\n", "create"),
    ]
    with pytest.raises(SourceError) as caught:
        write_files(loaded, {"local/main": config}, [BranchPull("local", "main", "src", writes)])
    assert str(caught.value).startswith(
        f"writing src/{deep} failed (File name too long); the pull stopped part-way:\n"
        f"  written: src/main.js\n  not written: src/{deep}, src/z.js\n"
        "Fix the cause (space, permissions), then pull again: it writes only what still differs."
    )
    assert (tmp_path / "bot/src/main.js").read_bytes() == b"// m\n"
    assert not (tmp_path / "bot/src/z.js").exists()
    assert [p.name for p in (tmp_path / "bot/src").iterdir()] == ["main.js"]  # no temporary file left behind


def test_pull_and_validate_speak_json(project: Project) -> None:
    import json

    pulled = project.gitops("pull", "--json")
    assert pulled.code == 0, pulled.err
    document = json.loads(pulled.out)
    assert document["format_version"] == 1
    main = next(b for b in document["branches"] if b["branch"] == "main")
    assert {f["path"] for f in main["files"]} == {"main.js", "role/harvester.js", "lib/add.wasm"}
    project.capsys.readouterr()
    code = run(["validate", "--list", "--json", "-m", str(project.root / "gitops.yaml")])
    checked = project.capsys.readouterr()
    assert code == 0, checked.err
    listing = json.loads(checked.out)
    names = {m["name"] for b in listing["branches"] for m in b["module_list"]}
    assert {"main", "role/harvester", "lib/add.wasm", "role.harvester"} <= names


PLANNER = {
    "main": "module.exports.loop = () => require('build').run();\n",
    "build": "module.exports.run = () => 'plans the base';\n",  # a module named like a build script
}


def test_a_module_named_build_is_adopted_where_nothing_runs_a_build_script(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(standin, "planner", PLANNER)
    p = Project(tmp_path / "new-bot", standin, capsys, monkeypatch)
    result = p.gitops("init", "--server", standin.url, "--branch", "planner", "--pull")
    assert result.code == 0, result.err
    assert (p.root / "src" / "build.js").read_text(encoding="utf-8") == PLANNER["build"]
    plan = p.plan("--refresh=always")
    assert plan.code == 0, plan.out + plan.err
    # Where a package.json could run it ('node build.js'), the server's code is still never written there.
    q = Project(tmp_path / "npm-bot", standin, capsys, monkeypatch)
    q.manifest([{"branch": "planner", "root": "src"}])
    q.write({"package.json": '{"scripts": {"build": "node src/build.js"}}'})
    q.commit("manifest")
    result = q.gitops("pull")
    assert result.code != 0
    assert "module 'build' would be written to build.js, but 'build.js' configures or runs the project's build" in (
        result.err
    )
    assert not (q.root / "src" / "build.js").exists()
