"""Lines a build stamps with the time (issue 41): ``ignore_lines`` makes the comparison with the server ignore
them, so a stamped build gives "No changes", while a real change still uploads every module as built.

A real git repository, a real build through ``sh -c`` that stamps each output with the time, the real stand-in on
a loopback port, the real CLI in-process.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gitops.cli import run
from gitops.standin.testing import ALICE, StandIn
from tests.project import Project

#: A stamp that differs on every build (nanoseconds), then the source.
STAMPING_BUILD = 'mkdir -p dist; { echo "// Built at $(date +%s%N)"; cat src/main.js; } > dist/main.js'
STAMP = r"// Built at \d+"
SOURCE = "module.exports.loop = () => {};\n"


@pytest.fixture
def project(
    tmp_path: Path,
    standin: StandIn,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> Project:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    monkeypatch.setenv("GITOPS_CACHE_DIR", str(p.root.parent / "cache"))
    monkeypatch.delenv("GITOPS_REBUILD", raising=False)
    p.write({"src/main.js": SOURCE, ".gitignore": "dist/\n"})
    return p


def _stamp_on_server(standin: StandIn) -> str:
    modules = standin.branch_modules(ALICE, "main") or {}
    text = modules["main"]
    assert isinstance(text, str)
    return text.splitlines()[0]


def test_a_stamped_build_gives_no_changes_and_a_real_change_uploads_as_built(
    project: Project, standin: StandIn
) -> None:
    project.manifest([{"branch": "main", "root": "dist", "ignore_lines": [STAMP]}], build=STAMPING_BUILD)
    project.commit()
    first = project.apply("--yes")
    assert first.code == 0, first.out + first.err
    deployed = _stamp_on_server(standin)
    assert re.fullmatch(STAMP, deployed)

    # --rebuild: the build runs again, and stamps another time.
    second = project.plan("--rebuild")
    assert second.code == 0, second.out + second.err
    assert "No changes" in second.out
    assert "only ignored lines differ: not uploaded (main)" in second.out
    assert (project.root / "dist" / "main.js").read_text("utf-8").splitlines()[0] != deployed
    code, document = project.plan_json("--rebuild")
    assert code == 0
    assert document["branches"][0]["ignored"] == ["main"]
    assert document["branches"][0]["action"] == "none"
    applied = project.apply("--yes", "--rebuild")
    assert applied.code == 0, applied.out + applied.err
    assert _stamp_on_server(standin) == deployed  # nothing was uploaded

    # A real change: the whole module is uploaded as built, the stamp line included.
    project.write({"src/main.js": "module.exports.loop = () => { console.log(1); };\n"})
    changed = project.apply("--yes")
    assert changed.code == 0, changed.out + changed.err
    built = (project.root / "dist" / "main.js").read_text("utf-8")
    assert standin.branch_modules(ALICE, "main") == {"main": built}
    assert _stamp_on_server(standin) != deployed


def test_a_branch_known_from_the_ledger_is_compared_with_the_code_kept_beside_it(
    project: Project, standin: StandIn
) -> None:
    # The official server's list carries no modules: a branch is then known by digest, from the ledger. The code of
    # each deploy is kept beside the ledger (for an undo), and gives the comparison the server's text.
    project.manifest([{"branch": "main", "root": "dist", "ignore_lines": [STAMP]}], build=STAMPING_BUILD)
    project.commit()
    assert project.apply("--yes").code == 0
    result = project.plan("--refresh=never", "--rebuild")
    assert result.code == 0, result.out + result.err
    assert "only ignored lines differ: not uploaded (main)" in result.out
    # Code that really changed is still a change.
    project.write({"src/main.js": "module.exports.loop = () => { console.log(2); };\n"})
    changed = project.plan("--refresh=never")
    assert changed.code == 2, changed.out + changed.err


def test_without_ignore_lines_every_stamped_build_is_an_upload(project: Project, standin: StandIn) -> None:
    project.manifest([{"branch": "main", "root": "dist"}], build=STAMPING_BUILD)
    project.commit()
    assert project.apply("--yes").code == 0
    second = project.plan("--rebuild")
    assert second.code == 2, second.out + second.err
    assert "only ignored lines differ" not in second.out


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("// Built at (", "is not a regular expression"),
        (".*", "matches an empty line"),
    ],
)
def test_a_bad_pattern_is_a_manifest_error_naming_its_place(
    project: Project, capsys: pytest.CaptureFixture[str], pattern: str, says: str
) -> None:
    path = project.manifest([{"branch": "main", "root": "src", "ignore_lines": ["// ok .*", pattern]}])
    capsys.readouterr()
    code = run(["validate", "-m", str(path)])
    err = capsys.readouterr().err
    assert code == 5, err
    assert "gitops.yaml:" in err
    assert "branches[0].ignore_lines[1]" in err
    assert says in err
    assert "Traceback" not in err
