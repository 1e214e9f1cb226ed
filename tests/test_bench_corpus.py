"""bench/corpus.py's comparing logic (the script itself drives real bots and is not part of the suite): the bot's
own upload list, named as each tool names modules, against gitops' list, by names and bytes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from corpus import DATA, Row, compare_lists, markdown_table, own_upload_list  # noqa: E402


def test_equal_lists_compare_equal_and_every_difference_is_named() -> None:
    same = compare_lists({"main": 10, "role.a": 5}, {"main": 10, "role.a": 5})
    assert same.equal
    assert same.describe() == "same 2 modules, same bytes"
    other = compare_lists({"main": 10, "gone": 1, "b": 3}, {"main": 11, "new": 2, "b": 3})
    assert not other.equal
    assert (other.same, other.only_own, other.only_gitops, other.sizes) == (1, ("gone",), ("new",), (("main", 10, 11),))
    assert (
        other.describe() == "1 same; only the bot's tool: gone; only gitops: new; other bytes (own/gitops): main 10/11"
    )


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        # grunt-screeps and gulp-screeps drop the last suffix, whatever it is; nested files by their base name.
        ("stem", {"main": 4, "main.js.map": 6, "lib": 3, "harvester": 2}),
        # rollup-plugin-screeps and the screeps-api CLI drop '.js' only: the .wasm keeps its suffix.
        ("js-stem", {"main": 4, "main.js.map": 6, "lib.wasm": 3, "harvester": 2}),
        ("path", {"main": 4, "main.js.map": 6, "lib.wasm": 3, "role/harvester": 2}),
    ],
)
def test_the_own_list_names_modules_as_the_bots_tool_does(tmp_path: Path, names: str, expected: dict[str, int]) -> None:
    files = {"main.js": b"main", "main.js.map.js": b"{map:1}"[:6], "lib.wasm": b"\x00as", "role/harvester.js": b"hi"}
    files["notes.txt"] = b"not uploaded"
    files["node_modules/x/index.js"] = b"never"
    for name, data in files.items():
        (tmp_path / "dist" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "dist" / name).write_bytes(data)
    spec = {"base": "dist", "files": ["*.js", "*.wasm", "**/harvester.js"], "names": names}
    assert own_upload_list(tmp_path, spec) == expected
    assert own_upload_list(tmp_path, {**spec, "leave_out": ["main.js"]}).get("main") is None
    assert own_upload_list(tmp_path, {**spec, "base": "missing"}) == {}


def test_the_data_file_pins_every_bot_and_the_table_has_a_row_each() -> None:
    bots = json.loads(DATA.read_text(encoding="utf-8"))["bots"]
    assert len(bots) >= 15
    assert len({b["name"] for b in bots}) == len(bots)
    for bot in bots:
        assert len(bot["commit"]) == 40, bot["name"]
        assert int(bot["commit"], 16) >= 0, bot["name"]
        assert bot["upload"]["names"] in ("stem", "js-stem", "path"), bot["name"]
    table = markdown_table([Row(b["name"], b["repo"], b["commit"], b["layout"], guess="a | b") for b in bots])
    assert len(table.splitlines()) == len(bots) + 2
    assert "a \\| b" in table
