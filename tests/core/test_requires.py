"""The require scan and check (pure), and the module kinds: what the game could not run is caught before upload."""

from __future__ import annotations

import pytest

from gitops.core.modulekinds import kind_of, wrap_source_map
from gitops.core.requires import check_requires, resolve, scan_requires, summarise

SOURCE = """\
var a = require('role.harvester'); // require('in-a-comment')
/* require("in-a-block-comment") */ const b = require("util/x");
x.require('a-method'); y?.require('optional-chain'); var r = /require('in-a-regex')/g;
var d = a / 2; var e = f / require('after-division');
var t = `require('in-a-template')`; var u = require(`plain-template`); var v = require(`dyn-${n}`);
var w = require(name); var z = require( 'spaced' ); var q = 'require("in-a-string")';
var esc = require('it\\'s');
"""


def test_scan_finds_literal_calls_only_with_their_lines() -> None:
    found = [(c.line, c.name) for c in scan_requires(SOURCE)]
    assert found == [
        (1, "role.harvester"),
        (2, "util/x"),
        (4, "after-division"),
        (5, "plain-template"),
        (6, "spaced"),
        (7, "it's"),
    ]


def test_a_bundle_without_require_is_not_scanned() -> None:
    assert scan_requires("(function(){var x=1/2;/*x*/})();" * 1000) == []


def test_an_unterminated_comment_or_string_does_not_break_the_scan() -> None:
    assert scan_requires("require('a');\n/* never closed require('b')") == [scan_requires("require('a')")[0]]
    assert [c.name for c in scan_requires("var s = 'open\nrequire('c');")] == ["c"]


def test_names_resolve_as_the_game_does() -> None:
    # @screeps/engine requireFn: moduleName.replace(/^\.\//, '') and a plain lookup.
    assert resolve("./role/harvester") == "role/harvester"
    assert resolve("././x") == "./x"
    assert resolve("../x") == "../x"
    assert resolve("role.harvester") == "role.harvester"


def check(text: str, names: list[str], separator: str = "/", ignore: tuple[str, ...] = ()) -> list[str]:
    return [
        m.describe() for m in check_requires([("main", "src/main.js", text)], names, ignore=ignore, separator=separator)
    ]


def test_check_reports_missing_modules_with_hints() -> None:
    assert check("require('role.harvester')", ["main", "role.harvester"]) == []
    assert check("require('lodash'); require('fs'); require('node:path'); require('fs/promises')", ["main"]) == []
    assert check("require('role/harvester')", ["main", "role.harvester"], separator=".") == [
        "src/main.js:1: require('role/harvester') names a module the branch will not hold; the branch has "
        "'role.harvester' (naming.separator is '.'); write require('role.harvester'), or change naming.separator"
    ]
    assert check("\n\nrequire('role.builder')", ["main"]) == [
        "src/main.js:3: require('role.builder') names a module the branch will not hold"
    ]
    assert check("require('lib/add')", ["main", "lib/add.wasm"]) == [
        "src/main.js:1: require('lib/add') names a module the branch will not hold; the branch has 'lib/add.wasm'; "
        "add '.wasm' to naming.strip_suffixes to name it 'lib/add', or write require('lib/add.wasm')"
    ]
    assert check("require('mybot_bg.wasm')", ["main", "mybot_bg"]) == [
        "src/main.js:1: require('mybot_bg.wasm') names a module the branch will not hold; module names have no "
        ".wasm here; write require('mybot_bg')"
    ]
    assert check("require('./util')", ["main", "util"]) == []
    assert check("require('optional')", ["main"], ignore=("optional",)) == []


def test_relative_requires_are_not_resolved_from_the_file() -> None:
    [problem] = [
        m.describe()
        for m in check_requires([("role/harvester", "src/role/harvester.js", "require('./spawner')")], ["role/spawner"])
    ]
    assert problem == (
        "src/role/harvester.js:1: require('./spawner') names module 'spawner' the branch will not hold; the game's "
        "require takes module names, not paths: it drops one leading './' and looks the rest up from the branch's "
        "top (not from 'role', the folder of 'role/harvester'); did you mean require('role/spawner')?"
    )


@pytest.mark.parametrize(
    ("path", "binary", "kind"),
    [
        ("main.js", False, "javascript"),
        ("lib/x.cjs", False, "javascript"),
        ("lib/x.mjs", False, "javascript"),
        ("main.js.map", False, "source map"),
        ("pkg/bot_bg.wasm", True, "binary"),
        ("rooms.json", False, "other"),
        ("main.ts", False, "other"),
    ],
)
def test_kinds(path: str, binary: bool, kind: str) -> None:
    assert kind_of(path, binary=binary) == kind


def test_a_suffix_listed_for_stripping_is_javascript() -> None:
    assert kind_of("bot.screeps", binary=False, module_suffixes=(".screeps",)) == "javascript"


def test_wrap_source_map() -> None:
    # rollup-plugin-screeps' bytes: no newline after the ';'.
    assert wrap_source_map('{"version":3}\n') == 'module.exports = {"version":3};'
    # A file that already holds the wrapper is taken as it is (pull writes one so when it must).
    assert wrap_source_map('module.exports = {"version":3};\n') == 'module.exports = {"version":3};\n'
    with pytest.raises(ValueError, match="is not valid JSON"):
        wrap_source_map("nope")
    with pytest.raises(ValueError, match="not a JSON object"):
        wrap_source_map("[1]")


def test_a_require_inside_try_braces_is_guarded_and_one_after_them_is_not() -> None:
    calls = scan_requires(
        "try { require('a'); if (x) { require('b'); } } catch (e) { require('c'); }\n"
        "try {\n  const f = () => require('d');\n} finally {}\nrequire('e');\n"
    )
    assert [(c.name, c.guarded) for c in calls] == [("a", True), ("b", True), ("c", False), ("d", True), ("e", False)]


def test_missing_guarded_requires_are_warnings_and_unguarded_ones_problems() -> None:
    from gitops.core.requires import guarded_warnings

    text = "try { require('opt'); } catch (e) {}\nrequire('actions/build');\n"
    missing = check_requires([("main", "main.js", text)], ["main", "actions_build"])
    assert summarise(missing, "b")[0] == (
        "b: main.js:2: require('actions/build') names a module the branch will not hold; did you mean "
        "require('actions_build')? The branch holds that module"
    )
    assert len(summarise(missing, "b")) == 2
    assert guarded_warnings(missing, "b") == [
        "b: main.js:1: require('opt') inside a try block names a module the branch will not hold (the code catches "
        "the error; list 'opt' under requires.ignore to silence this)"
    ]
    assert summarise([m for m in missing if m.guarded], "b") == []


def test_a_require_inside_any_braces_is_nested_and_only_one_at_load_refuses() -> None:
    """Issue 41: a require on a path never taken blocked validate and the adopting round trip. Only a require that
    runs when the module loads (outside every brace) surely throws; one in a function or block is a warning."""
    from gitops.core.requires import guarded_warnings

    text = (
        "const util = require('util2');\n"
        "module.exports.loop = function () {\n"
        "  if (Game.time % 1000 === 0) { require('report').send(); }\n"
        "};\n"
        "const o = { x: require('in_object') };\n"
    )
    calls = scan_requires(text)
    assert [(c.name, c.nested) for c in calls] == [("util2", False), ("report", True), ("in_object", True)]
    missing = check_requires([("main", "src/main.js", text)], ["main"])
    problems = summarise(missing, "local/main")
    assert problems[0] == "local/main: src/main.js:1: require('util2') names a module the branch will not hold"
    assert len(problems) == 2  # the one at load, and how to allow one on purpose
    assert guarded_warnings(missing, "local/main") == [
        "local/main: src/main.js:3: require('report') inside a function or block names a module the branch will "
        "not hold (if that code runs, the game throws \"Unknown module\" there; list 'report' under requires.ignore "
        "to silence this)",
        "local/main: src/main.js:5: require('in_object') inside a function or block names a module the branch will "
        "not hold (if that code runs, the game throws \"Unknown module\" there; list 'in_object' under "
        "requires.ignore to silence this)",
    ]
    only_nested = check_requires([("main", "src/main.js", text.split("\n", 1)[1])], ["main"])
    assert summarise(only_nested, "local/main") == []


def test_the_nearest_module_is_by_shape_then_by_spelling() -> None:
    from gitops.core.requires import nearest_module

    assert nearest_module("actions/build", ["actions_build", "main"]) == "actions_build"
    assert nearest_module("Role.Harvester", ["role.harvester"]) == "role.harvester"
    assert nearest_module("role.harvestr", ["role.harvester"]) == "role.harvester"
    assert nearest_module("zzz", ["role.harvester"]) is None
