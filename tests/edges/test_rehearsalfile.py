"""A rehearsal in jobs: the base built into a code set of its own (``gitops build --ref BASE --out``), the rehearsal
run from code set files (``gitops rehearse --codeset --base-codeset``), and its result file, which the comment job
reads as data. The refusals here all come before any world starts (no private server is needed for them)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from gitops.cli import run
from gitops.config.manifest import load_manifest
from gitops.core.health import Thresholds, Tick
from gitops.core.rehearsal import compare, side
from gitops.core.rehearsalresult import RehearsalResult, result_data
from gitops.edges.codesetfile import read_codeset
from gitops.edges.rehearsalfile import read_result, write_result
from gitops.errors import ExitCode, SourceError
from gitops.render.rehearsal import markdown
from tests.factories import git

BOOM = "Error: boom `x` @alice\n    at module.exports.loop (main:1:149)\n    at __mainLoop:1:52\n"


def result() -> RehearsalResult:
    base = side(
        "base", [Tick(log=("x",))] * 4, [1.0, 1.5, 1.0, 2.0], 10, Thresholds(ticks=4), ["main"], commit="b" * 40
    )
    head = side("head", [Tick(errors=(BOOM,))] * 4, [3.0, None, 3.5, 4.0], 12, Thresholds(ticks=4), ["main"])
    return RehearsalResult(
        4, "code set head.json (commit aaaa)", "code set base.json", (compare("local/main", head, base),)
    )


def test_the_result_file_reads_back_to_the_same_comment(tmp_path: Path) -> None:
    path = tmp_path / "rehearsal.json"
    original = result()
    write_result(path, original)
    back = read_result(path)
    assert back.result == original.result == "failing"
    [c] = back.branches
    assert c.head.cpu_values == (3.0, 3.5, 4.0)
    assert c.base is not None
    assert c.base.cpu_values == (1.0, 1.5, 1.0, 2.0)
    args = (original.result, original.ticks, original.head_source, original.base_source)
    assert markdown(back.branches, *args) == markdown(original.branches, *args)
    assert "```mermaid" in markdown(back.branches, *args)


def test_caught_errors_noise_bands_and_new_lines_survive_the_file(tmp_path: Path) -> None:
    """The comment job renders from the file: what the rehearsal found beyond uncaught errors (caught errors, new and
    gone, new console lines, CPU and memory changes with their noise band) reaches the comment as it was."""
    caught = "room W1N1 failed: TypeError: x is undefined\n    at run (main:7:3)"
    cpu = [1.0, 2.0, 1.0, 2.0, 2.0, 3.0]
    base = side("base", [Tick(log=("tick 1",))] * 6, cpu, 10, Thresholds(ticks=6), ["main"])
    head = side("head", [Tick(log=("tick 2", caught))] * 6, cpu[::-1], 10, Thresholds(ticks=6), ["main"])
    original = RehearsalResult(6, "code set head.json", "code set base.json", (compare("local/main", head, base),))
    [c] = original.branches
    # What this test is about is there to lose.
    assert c.new_caught
    assert c.new_lines
    assert c.cpu is not None
    path = tmp_path / "rehearsal.json"
    write_result(path, original)
    back = read_result(path)
    args = (original.result, original.ticks, original.head_source, original.base_source)
    assert markdown(back.branches, *args) == markdown(original.branches, *args)
    assert "new caught error: TypeError: x is undefined at main:7 (6 ticks)" in markdown(back.branches, *args)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: d.update(format="screeps-gitops-codeset"), "is not a screeps-gitops rehearsal result"),
        (lambda d: d.update(format_version=2), "has format_version '2'"),
        (lambda d: d["branches"][0]["head"].update(ticks=True), "branches[0].head.ticks that is not a whole number"),
        (lambda d: d["branches"][0]["head"]["cpu_values"].append("1"), "cpu_values[3] that is not a finite number"),
        (lambda d: d["branches"][0]["base"].update(result="great"), "branches[0].base.result that is not healthy"),
        (lambda d: d["branches"][0].update(branch="x" * 5000), "branches[0].branch of 5,000 characters"),
        (lambda d: d["branches"][0]["head"].update(errors={}), "branches[0].head.errors that is not a list"),
    ],
)
def test_a_result_file_that_is_not_what_a_rehearsal_writes_is_refused_naming_the_place(
    tmp_path: Path, change: object, words: str
) -> None:
    data = result_data(result())
    assert callable(change)
    change(data)
    path = tmp_path / "rehearsal.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(SourceError) as caught:
        read_result(path)
    assert caught.value.exit_code == ExitCode.LOCAL_CODE
    assert caught.value.message.startswith(f"the rehearsal result file {path} ")
    assert words in caught.value.message


def test_a_result_file_that_is_not_json_nan_or_a_fifo_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "rehearsal.json"
    path.write_text(json.dumps(result_data(result())).replace("3.5", "NaN"), encoding="utf-8")
    with pytest.raises(SourceError, match="not a finite number"):
        read_result(path)
    path.write_text("<html>", encoding="utf-8")
    with pytest.raises(SourceError, match="is not JSON"):
        read_result(path)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(SourceError, match="is not a regular file"):
        read_result(fifo)  # refused, never waited on
    with pytest.raises(SourceError, match="cannot be read"):
        read_result(tmp_path / "missing.json")


def test_a_hostile_error_text_stays_inert_in_the_comment_rendered_from_the_file(tmp_path: Path) -> None:
    data = result_data(result())
    data["branches"][0]["head"]["errors"][0]["message"] = "```\n<!-- screeps-gitops section end rehearsal -->\n@x"
    data["branches"][0]["branch"] = "a`b\n# heading"
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    back = read_result(path)
    out = markdown(back.branches, back.result, back.ticks, back.head_source, back.base_source)
    assert "\n# heading" not in out
    assert "\n<!-- screeps-gitops" not in out
    assert "\n```\n<!--" not in out


def _bot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    root = tmp_path / "bot"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    manifest = {
        "version": 1,
        "servers": {"live": {"url": "http://127.0.0.1:9", "token_env": "SCREEPS_TOKEN"}},
        "branches": [{"server": "live", "branch": "main", "root": "src", "build": "sh build.sh"}],
    }
    (root / "gitops.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    (root / "build.sh").write_text(
        "mkdir -p src && printf 'module.exports.loop = () => {}; // %s\\n' \"$(cat v)\" > src/main.js\n"
    )
    (root / ".gitignore").write_text("src/\n")
    (root / "v").write_text("base\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    base = git(root, "rev-parse", "HEAD").strip()
    (root / "v").write_text("head\n")
    git(root, "commit", "-qam", "head")
    capsys.readouterr()
    return root, base


def test_build_ref_out_writes_the_base_commits_code_set_built_in_a_temporary_checkout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, base = _bot(tmp_path, capsys)
    out = tmp_path / "base.codeset.json"
    assert run(["build", "--ref", base, "--out", str(out), "-m", str(root / "gitops.yaml")]) == 0, capsys.readouterr()
    data = json.loads(out.read_text("ascii"))
    assert data["commit"] == base
    [module] = data["branches"][0]["modules"]
    assert module["text"] == "module.exports.loop = () => {}; // base\n"
    assert not (root / "src").exists(), "the working tree was not built: the base was built in its own checkout"

    assert run(["build", "--ref", base, "-m", str(root / "gitops.yaml")]) == ExitCode.USAGE
    assert "give --out FILE too" in capsys.readouterr().err


def test_rehearse_refuses_a_base_twice_and_a_base_code_set_of_another_manifest_before_any_world(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, base = _bot(tmp_path, capsys)
    manifest = str(root / "gitops.yaml")
    head_set, base_set = tmp_path / "head.json", tmp_path / "base.json"
    assert run(["build", "--out", str(head_set), "-m", manifest]) == 0
    assert run(["build", "--ref", base, "--out", str(base_set), "-m", manifest]) == 0
    monkeypatch.setenv("GITOPS_PRIVATE_SERVER", str(tmp_path / "no-server-here"))
    capsys.readouterr()

    code = run(
        ["rehearse", "-m", manifest, "--codeset", str(head_set), "--base", base, "--base-codeset", str(base_set)]
    )
    assert code == ExitCode.USAGE
    assert "both say where the base's code comes from; give one" in capsys.readouterr().err

    (root / "gitops.yaml").write_text((root / "gitops.yaml").read_text() + "# edited\n")
    git(root, "commit", "-qam", "another manifest")
    assert run(["build", "--out", str(head_set), "-m", manifest]) == 0
    capsys.readouterr()
    code = run(["rehearse", "-m", manifest, "--codeset", str(head_set), "--base-codeset", str(base_set)])
    err = capsys.readouterr().err
    assert code == ExitCode.LOCAL_CODE, err
    assert f"the code set file {base_set} was built from another manifest" in err
    assert "no-server-here" not in err, "refused before the world's install was looked for"


def test_the_base_code_set_must_be_the_named_base_commit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, base = _bot(tmp_path, capsys)
    out = tmp_path / "base.json"
    assert run(["build", "--ref", base, "--out", str(out), "-m", str(root / "gitops.yaml")]) == 0
    loaded = load_manifest(root / "gitops.yaml")
    assert read_codeset(out, loaded, base_of=base).source.commit == base
    assert read_codeset(out, loaded, base_of="").source.commit == base  # off a pull request: any commit
    with pytest.raises(SourceError, match=f"not from the base commit {'c' * 12}"):
        read_codeset(out, loaded, base_of="c" * 40)
