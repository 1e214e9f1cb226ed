"""Local code from the working tree and from Git refs: names, binary modules, and every refusal's exact text."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gitops.config.manifest import LoadedManifest, Naming, load_manifest
from gitops.core.codeset import Module
from gitops.core.endpoints import MAX_CODE_LENGTH
from gitops.edges import worktree
from gitops.edges.sources import LocalCode, UnreadableFile, build_branch, module_name, read_local_code
from gitops.errors import SourceError
from gitops.standin.testing import StandIn
from tests.conftest import _children
from tests.factories import commit_all, git, make_repo, manifest_data, record_calls, write_files, write_manifest

WASM = b"\0asm\x01\0\0\0"
BOT: dict[str, str | bytes] = {
    "src/main.js": "module.exports.loop = function () {};\n",
    "src/role/harvester.js": "module.exports.run = function (creep) {};\n",
    "src/util/spawn.js": "// é and 🙂 count as the server counts them\n",
    "src/lib/pathfinder.wasm": WASM,
    "README.md": "not a module\n",
}
BINARY_BRANCH = {"branch": "main", "root": "src", "include": ["**/*.js", "**/*.wasm"]}


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def load(folder: Path, **manifest: object) -> LoadedManifest:
    write_manifest(folder, manifest_data(**manifest))  # type: ignore[arg-type]
    return load_manifest(Path(os.path.relpath(folder / "gitops.yaml")))


def refusal(loaded: LoadedManifest, ref: str | None = None) -> str:
    with pytest.raises(SourceError) as caught:
        read_local_code(loaded, ref)
    assert caught.value.exit_code == 6
    return str(caught.value)


def names_and_values(local: LocalCode) -> dict[str, str | bytes]:
    return {m.name: m.binary if m.binary is not None else m.text or "" for b in local.branches for m in b.code}


def test_working_tree_modules_names_and_binary(here: Path) -> None:
    make_repo(here, BOT)
    loaded = load(here, branches=[BINARY_BRANCH])
    commit_all(here, "manifest")
    local = read_local_code(loaded)
    (branch,) = local.branches
    assert (branch.server, branch.branch, branch.label) == ("local", "main", "local/main")
    assert names_and_values(local) == {
        "main": BOT["src/main.js"],
        "role/harvester": BOT["src/role/harvester.js"],
        "util/spawn": BOT["src/util/spawn.js"],
        "lib/pathfinder.wasm": WASM,
    }
    assert branch.files == {
        "main": "src/main.js",
        "role/harvester": "src/role/harvester.js",
        "util/spawn": "src/util/spawn.js",
        "lib/pathfinder.wasm": "src/lib/pathfinder.wasm",
    }
    assert branch.code.wire()["lib/pathfinder.wasm"] == {"binary": "AGFzbQEAAAA="}
    assert branch.server_length == branch.code.server_length()
    assert local.warnings == []
    head = git(here, "rev-parse", "HEAD").strip()
    assert (local.source.kind, local.source.ref, local.source.commit, local.source.dirty) == (
        "worktree",
        None,
        head,
        False,
    )
    assert local.source.describe() == f"working tree (commit {head[:12]})"


def test_dot_separator_strip_suffixes_and_exclude(here: Path) -> None:
    write_files(
        here,
        {
            "bot/main.js": "1",
            "bot/role/harvester.js": "2",
            "bot/role/harvester.test.js": "3",
            "bot/lib/util.mjs": "4",
            "bot/lib/calc.wasm": WASM,
        },
    )
    branch = {
        "branch": "main",
        "root": "bot/",
        "include": ["**/*.{js,mjs,wasm}"],
        "exclude": ["**/*.test.js"],
        "naming": {"separator": ".", "strip_suffixes": [".js", ".mjs"]},
    }
    local = read_local_code(load(here, branches=[branch]))
    assert sorted(local.branches[0].files.items()) == [
        ("lib.calc.wasm", "bot/lib/calc.wasm"),
        ("lib.util", "bot/lib/util.mjs"),
        ("main", "bot/main.js"),
        ("role.harvester", "bot/role/harvester.js"),
    ]
    assert (local.source.commit, local.source.dirty) == (None, None)  # not a Git repository


def test_module_name_rules() -> None:
    slash, dot = Naming(), Naming(separator=".", strip_suffixes=[".js", ".min.js"])
    assert module_name("role/harvester.js", binary=False, naming=slash) == "role/harvester"
    assert module_name("role/harvester.js", binary=False, naming=dot) == "role.harvester"
    assert module_name("vendor/lodash.min.js", binary=False, naming=dot) == "vendor.lodash"
    assert module_name("lib/pathfinder.wasm", binary=True, naming=dot) == "lib.pathfinder.wasm"
    assert module_name("data/rooms.json", binary=False, naming=slash) == "data/rooms.json"


def test_ref_reads_the_committed_blobs_while_the_working_tree_is_dirty(here: Path) -> None:
    make_repo(here, {**BOT, "src/old.js": "old"})
    load(here, branches=[BINARY_BRANCH])
    first = commit_all(here, "manifest")
    write_files(here, {"src/main.js": "// edited, not committed\n", "src/new.js": "untracked"})
    (here / "src/old.js").unlink()

    local = read_local_code(load_manifest(Path("gitops.yaml")), "HEAD")
    assert names_and_values(local)["main"] == BOT["src/main.js"]
    assert sorted(names_and_values(local)) == ["lib/pathfinder.wasm", "main", "old", "role/harvester", "util/spawn"]
    source = local.source
    assert (source.kind, source.ref, source.commit, source.dirty) == ("ref", "HEAD", first, None)
    assert local.source.describe() == f"ref HEAD (commit {first[:12]})"
    assert local.warnings == []

    worktree = read_local_code(load_manifest(Path("gitops.yaml")))
    assert names_and_values(worktree)["main"] == "// edited, not committed\n"
    assert sorted(names_and_values(worktree)) == ["lib/pathfinder.wasm", "main", "new", "role/harvester", "util/spawn"]
    assert worktree.source.dirty is True


def test_worktree_source_before_the_first_commit_and_after_a_change_outside_the_roots(here: Path) -> None:
    make_repo(here, BOT, commit=False)
    loaded = load(here)
    # No commit yet: nothing to name, and everything is uncommitted.
    assert (read_local_code(loaded).source.commit, read_local_code(loaded).source.dirty) == (None, True)
    head = commit_all(here, "first")
    assert (read_local_code(loaded).source.commit, read_local_code(loaded).source.dirty) == (head, False)
    # Changes outside the roots and the manifest do not make the deployed code dirty.
    write_files(here, {"notes.txt": "untracked"})
    assert (read_local_code(loaded).source.commit, read_local_code(loaded).source.dirty) == (head, False)
    write_files(here, {"src/role/harvester.js": "// edited\n"})
    assert (read_local_code(loaded).source.commit, read_local_code(loaded).source.dirty) == (head, True)


def test_git_status_runs_beside_the_read_of_the_files(here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The working tree's commit and dirtiness come from a ``git status`` started before the files are read and
    asked once they are: it walks the same files, so it does not add its time to the read's (issue 23)."""
    make_repo(here, BOT)
    loaded = load(here)
    head = commit_all(here, "manifest")
    before = set(_children())
    seen: list[set[int]] = []
    read_whole = worktree.read_whole

    def noting(path: str, told: Callable[[int], None] | None = None) -> bytes:
        seen.append(set(_children()) - before)
        return read_whole(path, told)

    monkeypatch.setattr(worktree, "read_whole", noting)
    local = read_local_code(loaded)
    assert (local.source.commit, local.source.dirty) == (head, False)
    assert seen
    assert seen[0]  # git status started, and not yet collected, when the first file was read
    assert not set(_children()) - before  # collected once asked


def test_a_read_that_fails_midway_stops_and_collects_its_git_status(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_repo(here, BOT)
    loaded = load(here)
    commit_all(here, "manifest")
    before = set(_children())

    def interrupted(path: str, told: Callable[[int], None] | None = None) -> bytes:
        raise KeyboardInterrupt

    monkeypatch.setattr(worktree, "read_whole", interrupted)
    with pytest.raises(KeyboardInterrupt):
        read_local_code(loaded)
    assert not set(_children()) - before


def test_ref_finds_the_repository_above_the_manifest_and_older_commits(here: Path) -> None:
    make_repo(here, {"deploy/src/main.js": "v1"})
    load(here / "deploy")
    v1 = commit_all(here, "v1")
    write_files(here, {"deploy/src/main.js": "v2"})
    commit_all(here, "v2")
    git(here, "tag", "release", v1)
    loaded = load_manifest(Path("deploy/gitops.yaml"))
    assert names_and_values(read_local_code(loaded, "release")) == {"main": "v1"}
    assert names_and_values(read_local_code(loaded, "HEAD~1")) == {"main": "v1"}
    assert names_and_values(read_local_code(loaded, "main")) == {"main": "v2"}


def test_ref_warns_when_the_manifest_on_disk_is_not_the_committed_one(here: Path) -> None:
    make_repo(here, {"src/main.js": "x"})
    loaded = load(here)
    commit_all(here)
    load(here, branches=[{"branch": "main", "root": "src", "activate": ["world"]}])
    short = git(here, "rev-parse", "HEAD").strip()[:12]
    local = read_local_code(load_manifest(Path("gitops.yaml")), "HEAD")
    assert local.warnings == [
        f"the manifest gitops.yaml differs from the one in commit {short}; the manifest is always read from disk, "
        "the code from the commit"
    ]
    assert loaded.digest != load_manifest(Path("gitops.yaml")).digest


def test_ref_that_does_not_exist(here: Path) -> None:
    make_repo(here, {"src/main.js": "x"})
    assert refusal(load(here), "no-such-branch") == (
        f"--ref no-such-branch: no such commit, branch or tag in {here}\n"
        "Check the name with 'git log' or 'git branch -a'; in a shallow CI checkout, fetch it first "
        "(actions/checkout with fetch-depth: 0)."
    )


def test_ref_outside_a_git_repository(here: Path) -> None:
    write_files(here, {"src/main.js": "x"})
    assert refusal(load(here), "HEAD") == (
        f"--ref HEAD: {here} (the manifest's folder) is not in a Git repository\n"
        "Drop --ref to read the working tree, or run gitops inside a clone of the repository."
    )


def test_naming_collision_names_both_files(here: Path) -> None:
    write_files(here, {"src/main.js": "", "src/role/harvester.js": "a", "src/role.harvester.js": "b"})
    assert refusal(load(here, branches=[{"branch": "main", "root": "src", "naming": {"separator": "."}}])) == (
        "the local code from the working tree cannot be deployed (1 problem):\n"
        "  - local/main: src/role.harvester.js and src/role/harvester.js both become module 'role.harvester'; "
        "rename or exclude one of them"
    )


def test_text_module_that_is_not_utf8(here: Path) -> None:
    write_files(here, {"src/main.js": b"// ok\nconst s = '\xff';\n"})
    assert refusal(load(here)) == (
        "the local code from the working tree cannot be deployed (1 problem):\n"
        "  - local/main: src/main.js is not UTF-8 (byte 0xff at offset 17, line 2); save it as UTF-8, or list it "
        "under binary if it is not text"
    )


def test_module_names_the_server_would_drop(here: Path) -> None:
    write_files(here, {"src/main.js": "", "src/$tmp.js": "", "src/.hidden/x.js": ""})
    branch = {"branch": "main", "root": "src", "include": ["**/*.js", ".hidden/*.js"]}
    assert refusal(load(here, branches=[branch])) == (
        "the local code from the working tree cannot be deployed (2 problems):\n"
        "  - local/main: src/$tmp.js becomes module '$tmp', but the name starts with '$', and the server silently "
        "drops such modules; rename it, or exclude it\n"
        "  - local/main: src/.hidden/x.js becomes module '.hidden/x', but the name starts with '.', and the server "
        "silently drops such modules; rename it, or exclude it"
    )


def test_module_names_the_server_would_read_back_as_other_names(here: Path) -> None:
    # The private server stores '.' as '$DOT$' (and '/', '\\' as '$SLASH$', '$BACKSLASH$') and turns every marker
    # back on reading: a module named 'a$DOT$b' comes back as 'a.b', so a plan would upload it again forever.
    write_files(here, {"src/main.js": "", "src/a$DOT$b.js": "", "src/lib/x$SLASH$y.js": ""})
    assert refusal(load(here)) == (
        "the local code from the working tree cannot be deployed (2 problems):\n"
        "  - local/main: src/a$DOT$b.js becomes module 'a$DOT$b', but the name contains '$DOT$', the server's "
        "stored form of '.', so the server would return it as 'a.b' and no plan would ever match; rename it, or "
        "exclude it\n"
        "  - local/main: src/lib/x$SLASH$y.js becomes module 'lib/x$SLASH$y', but the name contains '$SLASH$', the "
        "server's stored form of '/', so the server would return it as 'lib/x/y' and no plan would ever match; "
        "rename it, or exclude it"
    )


def test_branch_over_5mb_as_the_server_counts(here: Path) -> None:
    # 'é' is one UTF-16 unit, '🙂' two: the server counts JSON.stringify(modules).length, not bytes. (Mostly ASCII:
    # 5 MB of emoji would be 10 MB of UTF-8, over the server's 8 MiB body limit, which is refused on its own.)
    text = "x" * (MAX_CODE_LENGTH - 2011) + "🙂" * 1000
    write_files(here, {"src/main.js": text})
    length = len('{"main":""}') + len(text) + 1000
    assert length == MAX_CODE_LENGTH  # exactly the limit fits
    assert read_local_code(load(here)).branches[0].server_length == length
    write_files(here, {"src/main.js": text + "🙂🙂🙂"})
    assert refusal(load(here)) == (
        "the local code from the working tree cannot be deployed (1 problem):\n"
        f"  - local/main: the code is {length + 6:,} characters as the server counts them (JSON.stringify of the "
        f"modules), over the 5 MB limit of {MAX_CODE_LENGTH:,}; exclude files or minify the code"
    )


def test_glob_matching_nothing_and_exclude_leaving_nothing(here: Path) -> None:
    write_files(here, {"src/main.js": "", "lib/a.js": ""})
    branches = [
        {"branch": "main", "root": "src", "include": ["**/*.js", "**/*.ts"]},
        {"branch": "lib", "root": "lib", "exclude": ["*.js"]},
    ]
    assert refusal(load(here, branches=branches)) == (
        "the local code from the working tree cannot be deployed (2 problems):\n"
        "  - gitops.yaml:12: branches[0].include[1]: '**/*.ts' matches no file under src/; fix the glob or remove it\n"
        "  - gitops.yaml:16: branches[1].exclude: excludes every file that include matches (1), so the branch would "
        "have no modules; fix include or exclude"
    )


def test_root_that_does_not_exist(here: Path) -> None:
    make_repo(here, {"src/main.js": ""})
    loaded = load(here, branches=[{"branch": "main", "root": "bot"}])
    assert refusal(loaded) == (
        "the local code from the working tree (commit "
        + git(here, "rev-parse", "HEAD").strip()[:12]
        + ", uncommitted changes) cannot be deployed (1 problem):\n"
        f"  - gitops.yaml:9: branches[0].root: 'bot' does not exist in {here}; create the folder, or fix root"
    )
    short = git(here, "rev-parse", "HEAD").strip()[:12]
    assert refusal(loaded, "HEAD") == (
        f"the local code from the ref HEAD (commit {short}) cannot be deployed (1 problem):\n"
        f"  - gitops.yaml:9: branches[0].root: 'bot' does not exist in commit {short} (--ref HEAD); commit the "
        "folder, or fix root"
    )


def test_every_problem_of_every_branch_at_once(here: Path) -> None:
    write_files(here, {"a/main.js": b"\xc3(", "b/x.js": "", "b/x.mjs": ""})
    branches = [
        {"branch": "one", "root": "a"},
        {
            "branch": "two",
            "root": "b",
            "include": ["**/*.js", "**/*.mjs"],
            "naming": {"strip_suffixes": [".js", ".mjs"]},
        },
        {"branch": "three", "root": "c"},
    ]
    assert refusal(load(here, branches=branches)) == (
        "the local code from the working tree cannot be deployed (3 problems):\n"
        "  - local/one: a/main.js is not UTF-8 (byte 0xc3 at offset 0, line 1); save it as UTF-8, or list it under "
        "binary if it is not text\n"
        "  - local/two: b/x.js and b/x.mjs both become module 'x'; rename or exclude one of them\n"
        f"  - gitops.yaml:22: branches[2].root: 'c' does not exist in {here}; create the folder, or fix root"
    )


def test_a_branch_without_main_gets_a_warning(here: Path) -> None:
    write_files(here, {"src/loop.js": ""})
    local = read_local_code(load(here))
    assert local.warnings == [
        "local/main: no module 'main'; the server adds an empty one, so the code will not run; add src/main.js"
    ]


SERVERS = {
    name: {"url": f"http://127.0.0.1:{port}", "token_env": "SCREEPS_TOKEN"}
    for name, port in (("mmo", 9), ("season", 10), ("home", 11))
}


def test_one_bot_on_several_servers_is_read_once(here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same files under the same rules on three servers: each file read once, one code set shared; a branch
    whose rules differ is read again."""
    from gitops.edges import worktree

    make_repo(here, BOT)

    def same(server: str) -> dict[str, object]:
        return {"branch": "main", "root": "src", "include": ["**/*.js"], "server": server}

    branches = [
        same("mmo"),
        {**same("season"), "activate": ["world"]},  # what is not read from the files may differ
        same("home"),
        {**BINARY_BRANCH, "server": "home", "branch": "wasm"},
    ]
    loaded = load(here, servers=SERVERS, branches=branches)
    reads = record_calls(monkeypatch, worktree, "read_whole")
    local = read_local_code(loaded)
    assert [b.label for b in local.branches] == ["mmo/main", "season/main", "home/main", "home/wasm"]
    mmo, season, home, wasm = local.branches
    assert mmo.code is season.code is home.code  # built once
    assert wasm.code is not mmo.code
    assert sorted(wasm.code.modules) == sorted([*mmo.code.modules, "lib/pathfinder.wasm"])
    # Three .js files read for the three main branches together, then the four module files of the wasm branch.
    assert len(reads) == 3 + 4


def test_a_shared_bot_with_a_warning_names_each_server(here: Path) -> None:
    write_files(here, {"src/loop.js": ""})
    branches = [{"branch": "main", "root": "src", "server": name} for name in SERVERS]
    local = read_local_code(load(here, servers=SERVERS, branches=branches))
    assert local.warnings == [
        f"{name}/main: no module 'main'; the server adds an empty one, so the code will not run; add src/main.js"
        for name in SERVERS
    ]


def test_working_tree_leaves_out_ignored_files_and_skips_dot_git(here: Path) -> None:
    make_repo(here, {".gitignore": "src/dist/\n*.log.js\n", "src/main.js": ""})
    write_files(here, {"src/dist/bundle.js": "built", "src/.git/hooks/x.js": "", "src/.cache/y.js": ""})
    write_files(here, {"src/debug.log.js": "", "src/node_modules/lodash/index.js": ""})
    assert sorted(names_and_values(read_local_code(load(here)))) == ["main"]
    # A root that Git ignores itself (a build output folder) is read whole.
    dist = load(here, branches=[{"branch": "main", "root": "src/dist", "include": ["**/*.js"]}])
    assert sorted(names_and_values(read_local_code(dist))) == ["bundle"]


@pytest.mark.skipif(os.name == "nt", reason="symbolic links")
def test_symbolic_links_inside_the_root_are_followed_outside_refused(here: Path) -> None:
    make_repo(here, {"src/main.js": "", "src/common/util.js": "u", "shared/outside.js": "o"})
    (here / "src/alias").symlink_to("common")
    (here / "src/util.js").symlink_to("common/util.js")
    loaded = load(here)
    commit_all(here)
    expected = {"main": "", "common/util": "u", "alias/util": "u", "util": "u"}
    assert names_and_values(read_local_code(loaded)) == expected
    assert names_and_values(read_local_code(loaded, "HEAD")) == expected

    (here / "src/ext").symlink_to("../shared")
    (here / "src/gone.js").symlink_to("nowhere.js")
    (here / "src/out.js").symlink_to("../shared/outside.js")
    expected_refusal = (
        "cannot be deployed (3 problems):\n"
        "  - local/main: src/ext/outside.js is reached through src/ext, a symbolic link that leads outside the root; "
        "copy the files into the root, or exclude them\n"
        "  - local/main: src/gone.js is a broken symbolic link; fix or remove it, or exclude it\n"
        "  - local/main: src/out.js is a symbolic link that leads outside the root; copy the file into the root, or "
        "exclude it"
    )
    assert refusal(loaded).endswith(expected_refusal)
    commit_all(here)
    assert refusal(loaded, "HEAD").endswith(expected_refusal)


def test_build_branch_is_pure() -> None:
    """The core takes a listing and a reader; nothing touches the disk."""
    from gitops.config.manifest import BranchConfig

    files = {"main.js": b"loop", "lib/x.wasm": WASM, "locked.js": b""}

    def read(path: str) -> bytes:
        if path == "locked.js":
            raise UnreadableFile("cannot be read (Permission denied); check its permissions")
        return files[path]

    config = BranchConfig(server="s", branch="b", include=["**/*.js", "**/*.wasm"])
    build = build_branch(config, files, read, prefix="src")
    assert list(build.code) == [Module("lib/x.wasm", binary=WASM), Module("main", text="loop")]
    assert build.files == {"main": "src/main.js", "lib/x.wasm": "src/lib/x.wasm"}
    assert build.problems == [
        "s/b: src/locked.js cannot be read (Permission denied); check its permissions",
    ]
    assert build.server_length == build.code.server_length()


# --- nothing under a root is left out silently: a module left out would be removed from the server --------------

LONG_NAME = "d" * 250


@pytest.fixture
def deep_folder(here: Path) -> Iterator[str]:
    """A folder under ``src/`` whose path is longer than the system takes (PATH_MAX), holding a module: listing it
    fails with a real ``OSError`` (ENAMETOOLONG), as a folder without read permission would for a user who is not
    root (tests run as root here, and root reads every folder). Returns the first folder that cannot be listed,
    relative to ``src``."""
    (here / "src").mkdir()
    names: list[str] = []
    fd = os.open(here / "src", os.O_RDONLY)
    try:
        # Created relative to open folders: no path this long can be named from the top.
        while len(str(here / "src" / "/".join(names))) < 4096:
            os.mkdir(LONG_NAME, dir_fd=fd)
            inner = os.open(LONG_NAME, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
            names.append(LONG_NAME)
        module = os.open("deep.js", os.O_WRONLY | os.O_CREAT, dir_fd=fd)
        os.close(module)
    finally:
        os.close(fd)
    yield "/".join(names)
    shutil.rmtree(here / "src")  # before the session's check reads every file left under the temporary folder


def test_a_folder_that_cannot_be_listed_is_refused_not_left_out(here: Path, deep_folder: str) -> None:
    write_files(here, {"src/main.js": "", "src/lib/util.js": ""})
    shown = f"src/{deep_folder}"
    assert len(shown) > 4000
    assert refusal(load(here)) == (
        "the local code from the working tree cannot be deployed (1 problem):\n"
        f"  - local/main: {shown}/ cannot be read (File name too long), so the modules in it would be left out, and "
        "an upload would remove them from the server; make the folder readable, or exclude it with "
        f"'{deep_folder}/**'"
    )
    # Left out of the branch on purpose, it is no problem.
    parent = deep_folder.rsplit("/", 1)[0]
    for branch in ({"exclude": [f"{parent}/**"]}, {"include": ["*.js", "lib/**/*.js"]}):
        local = read_local_code(load(here, branches=[{"branch": "main", "root": "src", **branch}]))
        assert sorted(names_and_values(local)) == ["lib/util", "main"]


def test_a_root_that_cannot_be_read(here: Path) -> None:
    write_files(here, {"src/main.js": ""})
    assert refusal(load(here, branches=[{"branch": "main", "root": "x" * 300}])) == (
        "the local code from the working tree cannot be deployed (1 problem):\n"
        f"  - gitops.yaml:9: branches[0].root: '{'x' * 300}' cannot be read (File name too long); make the folder "
        "readable, or fix root"
    )


@pytest.mark.skipif(os.name == "nt", reason="symbolic links and named pipes")
def test_endless_links_and_named_pipes_are_refused_not_left_out(here: Path) -> None:
    write_files(here, {"src/main.js": ""})
    (here / "src/self.js").symlink_to("self.js")
    (here / "src/a.js").symlink_to("b.js")
    (here / "src/b.js").symlink_to("a.js")
    os.mkfifo(here / "src/pipe.js")
    assert refusal(load(here)) == (
        "the local code from the working tree cannot be deployed (4 problems):\n"
        "  - local/main: src/a.js is a chain of symbolic links that does not end; fix it, or exclude it\n"
        "  - local/main: src/b.js is a chain of symbolic links that does not end; fix it, or exclude it\n"
        "  - local/main: src/pipe.js is not a regular file (a named pipe, socket or device); remove it, or exclude it\n"
        "  - local/main: src/self.js is a chain of symbolic links that does not end; fix it, or exclude it"
    )


def test_unlisted_folders_matter_only_where_include_reaches() -> None:
    """The pure core, told which folders could not be listed: a folder matters when include could reach into it."""
    from gitops.config.manifest import BranchConfig

    files = {"main.js": b"", "lib/a.js": b""}
    unlisted = {
        "lib/locked": "cannot be read (Permission denied); make it readable",
        ".cache": "cannot be read (Permission denied); make it readable",
        "data": "cannot be read (Permission denied); make it readable",
    }

    def problems(include: list[str] | None = None, exclude: list[str] | None = None) -> list[str]:
        branch = BranchConfig(server="s", branch="b", include=include or ["**/*.js"], exclude=exclude or [])
        return build_branch(branch, files, files.__getitem__, prefix="src", unlisted=unlisted).problems

    # '**' reaches into every folder whose name does not start with a dot.
    assert problems() == [
        "s/b: src/data/ cannot be read (Permission denied); make it readable",
        "s/b: src/lib/locked/ cannot be read (Permission denied); make it readable",
    ]
    assert problems(include=["*.js", "lib/*.js"]) == []
    assert problems(include=["*.js", "{lib,data}/**/*.js"]) == [
        "s/b: src/data/ cannot be read (Permission denied); make it readable",
        "s/b: src/lib/locked/ cannot be read (Permission denied); make it readable",
    ]
    assert problems(include=["**/*.js", ".cache/*.js"]) == [
        "s/b: src/.cache/ cannot be read (Permission denied); make it readable",
        "s/b: src/data/ cannot be read (Permission denied); make it readable",
        "s/b: src/lib/locked/ cannot be read (Permission denied); make it readable",
    ]
    # An exclude leaves a folder out only when it leaves out all of it.
    assert problems(exclude=["data/**", "lib/**"]) == []
    assert problems(exclude=["**/locked/**", "data/*.js"]) == [
        "s/b: src/data/ cannot be read (Permission denied); make it readable",
    ]
    # ... and only when include names no hidden file, which an exclude's '**' would not cover.
    assert problems(include=["**/*.js", "**/.x/*.js"], exclude=["data/**", "lib/**"]) == [
        "s/b: src/data/ cannot be read (Permission denied); make it readable",
        "s/b: src/lib/locked/ cannot be read (Permission denied); make it readable",
    ]


def test_file_names_that_are_not_utf8_are_refused(here: Path) -> None:
    # A name made of bytes that are not UTF-8 passed validate and plan, and apply failed on it (exit 70).
    make_repo(here, {"src/main.js": ""})
    write_files(here, {os.fsdecode(b"src/caf\xe9.js"): "", os.fsdecode(b"src/d\xe9j\xe0/x.js"): ""})
    loaded = load(here)
    commit_all(here)
    expected = (
        "cannot be deployed (2 problems):\n"
        "  - local/main: src/caf\\xe9.js has a name that is not UTF-8 (its undecodable bytes are shown as \\xNN), and "
        "module names are UTF-8 text; rename the file\n"
        "  - local/main: src/d\\xe9j\\xe0/x.js has a name that is not UTF-8 (its undecodable bytes are shown as "
        "\\xNN), and module names are UTF-8 text; rename the folder src/d\\xe9j\\xe0/"
    )
    assert refusal(loaded).endswith(expected)
    assert refusal(loaded, "HEAD").endswith(expected)
    # Left out, they are no problem.
    excluded = load(here, branches=[{"branch": "main", "root": "src", "include": ["main.js"]}])
    assert names_and_values(read_local_code(excluded)) == {"main": ""}


def test_a_submodule_is_refused_with_ref_not_left_out(here: Path) -> None:
    # The working tree holds the submodule's files; a commit holds only its commit id, so --ref would leave its
    # modules out and an upload would remove them from the server.
    make_repo(here / "lib", {"util.js": "u"})
    make_repo(here / "bot", {"src/main.js": ""})
    git(here / "bot", "-c", "protocol.file.allow=always", "submodule", "add", "-q", "../lib", "src/vendor")
    loaded = load(here / "bot")
    commit_all(here / "bot")
    assert names_and_values(read_local_code(loaded)) == {"main": "", "vendor/util": "u"}
    short = git(here / "bot", "rev-parse", "HEAD").strip()[:12]
    assert refusal(loaded, "HEAD") == (
        f"the local code from the ref HEAD (commit {short}) cannot be deployed (1 problem):\n"
        f"  - local/main: src/vendor/ is a Git submodule, and --ref reads only the files of commit {short}, so "
        "the modules in it would be left out, and an upload would remove them from the server; deploy from the "
        "working tree (without --ref), or exclude it with 'vendor/**'"
    )
    excluded = load(here / "bot", branches=[{"branch": "main", "root": "src", "exclude": ["vendor/**"]}])
    assert names_and_values(read_local_code(excluded, "HEAD")) == {"main": ""}


def test_node_modules_is_never_a_module_also_in_a_commit(here: Path) -> None:
    make_repo(here, {"main.js": "", "node_modules/lodash/index.js": "", "lib/node_modules/x.js": "", "lib/a.js": ""})
    loaded = load(here, branches=[{"branch": "main", "root": "."}])
    commit_all(here)
    expected = ["lib/a", "main"]
    assert sorted(names_and_values(read_local_code(loaded))) == expected
    assert sorted(names_and_values(read_local_code(loaded, "HEAD"))) == expected


NOT_FOUND_HINT = (
    "Check the name with 'git log' or 'git branch -a'; in a shallow CI checkout, fetch it first "
    "(actions/checkout with fetch-depth: 0)."
)


@pytest.fixture
def shallow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clone of depth 1 of a repository of two commits: HEAD's parent is named but not fetched."""
    origin = make_repo(tmp_path / "origin", {"src/main.js": "one"})
    write_manifest(origin, manifest_data())
    commit_all(origin, "manifest")
    write_files(origin, {"src/main.js": "two"})
    commit_all(origin, "second")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(clone))
    assert git(clone, "rev-parse", "--is-shallow-repository").strip() == "true"
    monkeypatch.chdir(clone)
    return clone


@pytest.mark.parametrize("ref", ["HEAD~1", "HEAD^", "main~1", "HEAD~1^{commit}"])
def test_a_ref_beyond_a_shallow_clone_asks_to_fetch_it_first(shallow: Path, ref: str) -> None:
    # gitpython resolves HEAD~1 from the parent line of HEAD's commit, an object the clone does not hold.
    assert refusal(load_manifest(Path("gitops.yaml")), ref) == (
        f"--ref {ref}: no such commit in {shallow} (a shallow clone: older commits are not fetched)\n{NOT_FOUND_HINT}"
    )


def test_the_tip_of_a_shallow_clone_is_read(shallow: Path) -> None:
    local = read_local_code(load_manifest(Path("gitops.yaml")), "HEAD")
    assert names_and_values(local) == {"main": "two"}


@pytest.mark.parametrize(
    ("ref", "kind"), [("HEAD^{tree}", "a tree (a folder)"), ("HEAD:src/main.js", "a blob (a file)")]
)
def test_a_ref_to_a_tree_or_a_blob_is_refused(here: Path, ref: str, kind: str) -> None:
    make_repo(here, {"src/main.js": "x"})
    assert refusal(load(here), ref) == (
        f"--ref {ref}: names {kind} in {here}, not a commit\n"
        "Name a commit: a branch, a tag or a commit id (git log shows them)."
    )


def test_a_ref_in_a_repository_without_commits(here: Path) -> None:
    make_repo(here, {"src/main.js": "x"}, commit=False)
    assert refusal(load(here), "HEAD") == (
        f"--ref HEAD: no such commit in {here} (the repository has no commit yet)\n{NOT_FOUND_HINT}"
    )


@pytest.mark.parametrize("ref", ["", "  ", "--output=/tmp/x"])
def test_an_empty_or_option_like_ref_is_refused(here: Path, ref: str) -> None:
    make_repo(here, {"src/main.js": "x"})
    message = refusal(load(here), ref)
    if ref.strip():
        assert message == f"--ref {ref}: no such commit, branch or tag in {here}\n{NOT_FOUND_HINT}"
    else:
        assert message == (
            "--ref is empty\nName a commit (a branch, a tag or a commit id), or drop --ref to read the working tree."
        )


def test_code_under_5_mb_but_over_the_8_mib_body_limit_in_utf8_is_refused_before_any_request(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 3 M CJK characters: 3 M UTF-16 units (under the 5 MB rule), 9 M bytes of UTF-8 (over the 8 MiB body limit).
    from tests.project import Project

    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": "module.exports.loop = () => {};\n", "src/text.js": "// " + "\u4e2d" * 3_000_000 + "\n"})
    p.manifest([{"branch": "default", "root": "src"}])
    p.commit()
    result = p.plan()
    assert result.code == 6, result.err
    assert "over the server's request body limit of 8,388,608 (8 MiB)" in result.err
    assert standin.count("POST /api/user/code") == 0
