"""The naming rule in reverse, and what a pull writes for one branch: pure, no files, no server."""

from __future__ import annotations

import re

import pytest

from gitops.config.manifest import BranchConfig, Naming, manifest_from_data
from gitops.core.branchbuild import build_branch
from gitops.core.codeset import CodeSet, Module
from gitops.core.local import module_name
from gitops.core.naming import Unmappable, module_path
from gitops.core.pull import plan_branch_pull

SLASH = Naming()
DOT = Naming(separator=".")


@pytest.mark.parametrize(
    ("name", "binary", "naming", "path"),
    [
        ("main", False, SLASH, "main.js"),
        ("role/harvester", False, SLASH, "role/harvester.js"),
        ("role.harvester", False, DOT, "role.harvester.js"),
        ("role.harvester", False, SLASH, "role.harvester.js"),
        ("lib/add.wasm", True, SLASH, "lib/add.wasm"),
        ("lib.add.wasm", True, DOT, "lib.add.wasm"),
        ("compiled", True, SLASH, "compiled"),
        ("a.js", False, SLASH, "a.js.js"),
        ("x", False, Naming(strip_suffixes=[".mjs", ".js"]), "x.mjs"),
        ("a.min", False, Naming(strip_suffixes=[".min.js", ".js"]), "a.min.min.js"),
        ("a.min", False, Naming(strip_suffixes=[".js", ".min.js"]), "a.min.min.js"),
        ("données/été", False, SLASH, "données/été.js"),
    ],
)
def test_module_path_is_the_inverse_of_module_name(name: str, binary: bool, naming: Naming, path: str) -> None:
    assert module_path(name, binary=binary, naming=naming) == path
    assert module_name(path, binary=binary, naming=naming) == name


def test_a_slash_in_a_dot_separated_branch_has_no_file() -> None:
    with pytest.raises(Unmappable, match=re.escape("naming.separator is '.'")):
        module_path("role/harvester", binary=False, naming=DOT)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "empty name"),
        ("../escape", "'..'"),
        ("a/../../b", "'..'"),
        ("..", "'..'"),
        ("/etc/passwd", "absolute"),
        ("C:/Windows/x", "absolute"),
        ("a\\..\\b", "'\\\\'"),
        ("a//b", "empty or '.' part"),
        ("./a", "empty or '.' part"),
        ("a/", "empty or '.' part"),
        (".git/hooks/pre-commit", ".git"),
        ("x/.GIT/config", ".git"),
        ("a\x00b", "control character"),
        ("a\nb", "control character"),
        ("\ud800", "lone surrogate"),
    ],
)
def test_hostile_names_are_refused(name: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason) as caught:
        module_path(name, binary=False, naming=SLASH)
    assert not isinstance(caught.value, Unmappable)


def test_a_part_longer_than_a_file_name_is_unmappable() -> None:
    with pytest.raises(Unmappable, match="255 bytes"):
        module_path("x" * 300, binary=False, naming=SLASH)


def config(**kwargs: object) -> BranchConfig:
    """A validated branch (a ``naming`` mapping becomes its class), as a manifest holding it gives it."""
    return manifest_from_data(
        {
            "version": 1,
            "servers": {"local": {"url": "http://127.0.0.1:21025", "token_env": "SCREEPS_TOKEN"}},
            "branches": [{"server": "local", "branch": "main", "root": "src", **kwargs}],
        }
    ).branches[0]


def test_a_pull_creates_updates_and_keeps_files() -> None:
    code = CodeSet.of(
        [
            Module("main", text="loop\n"),
            Module("role/harvester", text="new\n"),
            Module("util", text="same\n"),
            Module("lib/add.wasm", binary=b"\x00asm"),
        ]
    )
    files = {"role/harvester.js": b"old\n", "util.js": b"same\n"}
    result = plan_branch_pull(config(include=["**/*.js", "**/*.wasm"]), code, files, files.get)
    assert [(w.path, w.action) for w in result.writes] == [
        ("lib/add.wasm", "create"),
        ("main.js", "create"),
        ("role/harvester.js", "update"),
        ("util.js", "same"),
    ]
    assert result.writes[0].data == b"\x00asm"
    assert [w.path for w in result.changes] == ["lib/add.wasm", "main.js", "role/harvester.js"]
    assert result.notes == []
    assert result.refused == []


def test_an_existing_file_that_maps_to_the_module_is_the_one_written() -> None:
    # A '.'-separated branch whose files live in folders: role/harvester.js is module role.harvester.
    files = {"role/harvester.js": b"old\n"}
    result = plan_branch_pull(
        config(naming={"separator": "."}), CodeSet.of([Module("role.harvester", text="x")]), files, files.get
    )
    assert [(w.path, w.action) for w in result.writes] == [("role/harvester.js", "update")]


def test_what_does_not_round_trip_is_said() -> None:
    code = CodeSet.of(
        [
            Module("main", text="x"),
            Module("lib/add.wasm", binary=b"\x00asm"),  # include has no *.wasm
            Module("role/a", text="y"),  # excluded
            Module("data.bin", binary=b"\x01"),  # included, but binary does not match it
        ]
    )
    files = {"local-only.js": b"// mine\n"}
    result = plan_branch_pull(config(include=["**/*.js", "*.bin"], exclude=["role/**"]), code, files, files.get)
    # Only main is written: a file the manifest would not read back as the module is never written (it could be
    # anything the project runs), and the person is told what the next apply would do.
    assert [w.path for w in result.writes] == ["main.js"]
    assert result.notes == [
        "module 'data.bin' is not written to data.bin: binary does not match it, so the next apply would remove it "
        "from the server; fix include, exclude or binary in the manifest, then pull again",
        "module 'lib/add.wasm' is not written to lib/add.wasm: include does not match it, so the next apply would "
        "remove it from the server; fix include, exclude or binary in the manifest, then pull again",
        "module 'role/a' is not written to role/a.js: exclude leaves it out, so the next apply would remove it from "
        "the server; fix include, exclude or binary in the manifest, then pull again",
        "local-only.js (module 'local-only') is not on the server; the next apply uploads it",
    ]


def test_file_and_folder_clashes_are_not_written() -> None:
    code = CodeSet.of([Module("a", binary=b"1"), Module("a/b", text="2"), Module("c/d", text="3")])
    files = {"c": b"a file where a folder is needed"}
    result = plan_branch_pull(config(include=["**"], binary=["a"]), code, files, files.get)
    assert result.writes == []
    assert result.notes == [
        "module 'a' goes to a, but a is a folder; not written",
        "module 'a/b' goes to a/b.js, but a is a file; not written",
        "module 'c/d' goes to c/d.js, but c is a file; not written",
    ]


def test_hostile_names_are_refused_with_the_rest_still_decided() -> None:
    code = CodeSet.of([Module("main", text="x"), Module("../../etc/cron.d/x", text="y")])
    result = plan_branch_pull(config(), code, [], lambda _p: None)
    assert result.refused == ["module '../../etc/cron.d/x' has '..' in its name, which would lead out of the root"]


def test_a_lone_surrogate_in_a_text_is_not_written() -> None:
    result = plan_branch_pull(config(), CodeSet.of([Module("main", text="a\ud800b")]), [], lambda _p: None)
    assert result.writes == []
    assert "lone surrogate" in result.notes[0]


def test_the_path_chosen_is_one_the_globs_read_back() -> None:
    # "x" could be x.mjs, x.js or x; only x.js is included, so that is where it goes.
    naming = {"strip_suffixes": [".mjs", ".js"]}
    result = plan_branch_pull(config(naming=naming), CodeSet.of([Module("x", text="1")]), [], lambda _p: None)
    assert [w.path for w in result.writes] == ["x.js"]
    assert result.notes == []


def round_trip(branch: BranchConfig, code: CodeSet) -> dict[str, bytes]:
    """Pull ``code`` into an empty root, then read the files back as plan does: the same code set, no notes."""
    result = plan_branch_pull(branch, code, [], lambda _p: None)
    assert result.notes == []
    files = {w.path: w.data for w in result.writes}
    built = build_branch(branch, files, files.__getitem__)
    assert built.problems == []
    assert built.code.digest == code.digest
    return files


def test_a_wrapped_source_map_goes_back_to_its_map_file() -> None:
    # rollup-plugin-screeps' form, no newline after the ';': the map itself, which wraps back byte for byte.
    wrapped = 'module.exports = {"version":3,"sources":["main.ts"]};'
    code = CodeSet.of([Module("main", text="x"), Module("main.js.map", text=wrapped)])
    files = round_trip(config(include=["**/*.js", "**/*.js.map"]), code)
    assert files == {"main.js": b"x", "main.js.map": b'{"version":3,"sources":["main.ts"]}'}


@pytest.mark.parametrize(
    "wrapped",
    [
        'module.exports = {"version":3,"sources":["main.ts"]};\n',
        'module.exports = {\n  "version": 3\n};\r\n',
        '  module.exports = {"version":3};',
    ],
)
def test_a_wrapper_in_another_form_is_written_as_the_server_holds_it(wrapped: str) -> None:
    # Wrapping the map again would not give these bytes: the file holds the wrapper verbatim, which reads back as is.
    code = CodeSet.of([Module("main", text="x"), Module("main.js.map", text=wrapped)])
    files = round_trip(config(include=["**/*.js", "**/*.js.map"]), code)
    assert files == {"main.js": b"x", "main.js.map": wrapped.encode()}


def test_a_map_module_that_is_not_wrapped_stays_javascript() -> None:
    code = CodeSet.of([Module("main", text="x"), Module("main.js.map", text="// not a wrapped map\n")])
    files = round_trip(config(), code)
    assert sorted(files) == ["main.js", "main.js.map.js"]


def test_source_maps_raw_writes_the_module_as_it_is() -> None:
    code = CodeSet.of([Module("main", text="x"), Module("main.js.map", text='module.exports = {"a":1};')])
    files = round_trip(config(source_maps="raw"), code)
    assert sorted(files) == ["main.js", "main.js.map.js"]


def test_a_binary_module_named_by_its_stem_goes_to_a_file_the_binary_globs_pick() -> None:
    branch = config(include=["*.js", "*.wasm"], binary=["*.wasm"], naming={"strip_suffixes": [".js", ".wasm"]})
    code = CodeSet.of([Module("main", text="require('mybot_bg')"), Module("mybot_bg", binary=b"\x00asm")])
    files = round_trip(branch, code)
    assert sorted(files) == ["main.js", "mybot_bg.wasm"]


@pytest.mark.parametrize("separator", ["/", "."])
def test_text_and_binary_modules_round_trip_with_both_separators(separator: str) -> None:
    names = ["main", "role.harvester", "a.b.c"] if separator == "." else ["main", "role/harvester", "lib/x.y"]
    code = CodeSet.of(
        [
            *(Module(n, text=f"// {n}") for n in names),
            Module("lib/add.wasm" if separator == "/" else "add.wasm", binary=b"1"),
        ]
    )
    round_trip(config(include=["**/*.js", "**/*.wasm"], naming={"separator": separator}), code)


def test_a_module_whose_file_would_configure_or_run_the_build_is_refused() -> None:
    code = CodeSet.of(
        [
            Module("main", text="x"),
            Module("package.json", binary=b"{}"),
            Module("rollup.config", text="export default {}"),
            Module("GIT~1/config", text="[core]"),
        ]
    )
    result = plan_branch_pull(config(include=["**"], binary=["*.json"]), code, [], lambda _p: None)
    assert result.refused == [
        "module 'GIT~1/config' would be written to GIT~1/config.js, but 'GIT~1' is the short (8.3) name Windows "
        "gives to .git",
        "module 'package.json' would be written to package.json, but 'package.json' configures or runs the "
        "project's build, which pull never writes",
        "module 'rollup.config' would be written to rollup.config.js, but 'rollup.config.js' configures or runs the "
        "project's build, which pull never writes",
    ]
    protected = plan_branch_pull(
        config(), CodeSet.of([Module("deploy", text="x")]), [], lambda _p: None, manifest_names=frozenset({"deploy.js"})
    )
    assert protected.refused == [
        "module 'deploy' would be written to deploy.js, but 'deploy.js' configures or runs the project's build, "
        "which pull never writes"
    ]


def test_names_that_are_one_file_on_a_case_insensitive_file_system_are_refused() -> None:
    code = CodeSet.of([Module("Role", text="1"), Module("role", text="2"), Module("main", text="m")])
    result = plan_branch_pull(config(), code, [], lambda _p: None)
    assert result.refused == [
        "Role.js and role.js are one file on a case-insensitive or Unicode-normalising file system (macOS, Windows) "
        "(modules 'Role', 'role'); the two would overwrite each other"
    ]
    files = {"Lib.js": b"mine"}
    clash = plan_branch_pull(config(), CodeSet.of([Module("lib", text="x")]), files, files.get)
    assert clash.refused == [
        "Lib.js and lib.js are one file on a case-insensitive or Unicode-normalising file system (macOS, Windows) "
        "(modules 'lib'); the two would overwrite each other"
    ]


def test_a_require_of_a_file_include_leaves_out_names_the_glob_to_add() -> None:
    files = {
        "main.js": b"const bot = require('bot.wasm');\nrequire('old');\nmodule.exports.loop = () => {};\n",
        "bot.wasm": b"\x00asm\x01\x00\x00\x00",
        "old.js": b"module.exports = 1;\n",
    }
    branch = config(include=["**/*.js"], exclude=["old.js"])
    built = build_branch(branch, files, files.__getitem__, prefix="dist")
    assert (
        "local/main: dist/main.js:1: require('bot.wasm') names a module the branch will not hold; "
        "dist/bot.wasm exists, but include does not match it; add '**/*.wasm' to include"
    ) in built.problems
    assert any("dist/old.js exists, but exclude leaves it out; change exclude" in p for p in built.problems)
    widened = build_branch(config(include=["**/*.js", "**/*.wasm"]), files, files.__getitem__, prefix="dist")
    assert widened.problems == []


def test_a_require_of_a_wasm_by_its_stem_says_both_fixes() -> None:
    files = {"main.js": b"require('engine');\nmodule.exports.loop = () => {};\n", "engine.wasm": b"\x00asm"}
    built = build_branch(config(include=["**/*.js"]), files, files.__getitem__, prefix="dist")
    assert built.problems[0] == (
        "local/main: dist/main.js:1: require('engine') names a module the branch will not hold; dist/engine.wasm "
        "exists, but include does not match it; add '**/*.wasm' to include, and add '.wasm' to "
        "naming.strip_suffixes to name it 'engine', or write require('engine.wasm')"
    )
    included = build_branch(config(include=["**/*.js", "**/*.wasm"]), files, files.__getitem__, prefix="dist")
    assert included.problems[0].endswith(
        "the branch has 'engine.wasm'; add '.wasm' to naming.strip_suffixes to name it 'engine', or write "
        "require('engine.wasm')"
    )
    named = config(include=["**/*.js", "**/*.wasm"], naming={"strip_suffixes": [".js", ".wasm"]})
    assert build_branch(named, files, files.__getitem__, prefix="dist").problems == []
