"""Release-ready: one version that the package, CHANGELOG.md, the snippets and the release tag agree on; the
licence and project URLs in the metadata; the release workflow (actionlint-clean, its version check run here)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

from gitops import __version__
from tests.action.test_action_yml import lint

ROOT = Path(__file__).resolve().parent.parent
RELEASE = ROOT / ".github" / "workflows" / "release.yml"
#: The one form every snippet uses to name the action (OWNER and COMMIT_SHA filled in by the reader): pinned by
#: full commit SHA, with the release as the comment that Dependabot and Renovate read.
USES = f"OWNER/screeps-gitops@COMMIT_SHA # v{__version__}"


def documents() -> list[Path]:
    return [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "examples" / "workflows").glob("*.yml")),
    ]


def test_the_version_is_single_sourced_and_the_changelog_names_it() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert "version" not in project
    assert project["dynamic"] == ["version"]
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert setuptools["dynamic"]["version"] == {"attr": "gitops.__version__"}
    entries = re.findall(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), flags=re.MULTILINE)
    released = [e for e in entries if e != "Unreleased"]  # work merged since the last release sits above it
    assert released[0] == __version__, "CHANGELOG.md's newest released entry must be the package's version"
    assert len(entries) == len(set(entries))


def test_licence_and_project_urls_are_in_the_metadata() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    assert {"Homepage", "Issues", "Changelog"} <= set(project["urls"])
    for url in project["urls"].values():
        assert url.startswith("https://github.com/OWNER/screeps-gitops")


def test_every_snippet_names_the_action_in_one_form_at_this_version() -> None:
    found = 0
    for path in documents():
        text = path.read_text(encoding="utf-8")
        # A workflow step pins the action by commit, with the release as the comment.
        for m in re.finditer(r"uses: ([\w.-]+/screeps-gitops@.*)$", text, flags=re.MULTILINE):
            assert m.group(1) == USES, f"{path.relative_to(ROOT)}: {m.group(1)!r}; every snippet says {USES}"
            found += 1
        assert "screeps-gitops/screeps-gitops" not in text, path
        # Prose names the same pin, or (as the alternative it explains) the release tag of this version.
        for ref in re.findall(r"OWNER/screeps-gitops@([\w.<>-]+)", text):
            assert ref in {"COMMIT_SHA", f"v{__version__}"}, f"{path.relative_to(ROOT)} names @{ref}"
        for version in re.findall(r"OWNER/screeps-gitops[@/]v(\d[\w.]*)", text):
            assert version == __version__, f"{path.relative_to(ROOT)} names v{version}"
        for version in re.findall(r"screeps-gitops@COMMIT_SHA # v(\d[\w.]*)", text):
            assert version == __version__, f"{path.relative_to(ROOT)} names v{version}"
    assert found >= 10


def test_the_docs_say_why_to_pin_and_how_a_fork_publishes() -> None:
    text = (ROOT / "docs" / "github-action.md").read_text(encoding="utf-8")
    assert "## Pinning the action" in text
    assert "commit SHA" in text
    assert "**Today** no release has been published" in text
    assert "**Once a release is published**" in text
    assert "receives the Screeps token" in text
    assert "### Publishing a fork" in text
    assert "release.yml" in text


def test_release_workflow_passes_actionlint() -> None:
    done = lint(RELEASE, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_release_workflow_tests_builds_releases_and_moves_the_major_tag() -> None:
    workflow = yaml.safe_load(RELEASE.read_text(encoding="utf-8"))
    assert workflow[True] == {"push": {"tags": ["v*.*.*"]}}  # YAML 1.1 reads the key "on" as true
    job = workflow["jobs"]["release"]
    assert job["permissions"] == {"contents": "write"}
    runs = "\n".join(str(s.get("run", "")) for s in job["steps"])
    assert "pytest" in runs
    assert "python -m build" in runs
    assert "gh release create" in runs
    assert 'git push --force origin "refs/tags/$MAJOR"' in runs
    pypi = workflow["jobs"]["pypi"]
    assert pypi["needs"] == "release"
    assert pypi["if"] == "vars.PUBLISH_TO_PYPI == 'true'", "PyPI only when the repository asks for it"
    assert pypi["permissions"] == {"id-token": "write"}
    assert "uv publish --trusted-publishing always dist/*" in pypi["steps"][-1]["run"]


def _version_step(tmp_path: Path, tag: str) -> subprocess.CompletedProcess[str]:
    """The workflow's own version check, run on this checkout as the runner runs a step."""
    workflow = yaml.safe_load(RELEASE.read_text(encoding="utf-8"))
    job = workflow["jobs"]["release"]
    [step] = [s for s in job["steps"] if s.get("id") == "version"]
    script = tmp_path / "step.sh"
    script.write_text(step["run"], encoding="utf-8")
    output = tmp_path / "output"
    output.write_text("", encoding="utf-8")
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=ROOT,
        env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "TAG": tag, "GITHUB_OUTPUT": str(output)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_release_refuses_a_tag_other_than_the_version(tmp_path: Path) -> None:
    done = _version_step(tmp_path, f"v{__version__}")
    assert done.returncode == 0, done.stdout + done.stderr
    major = __version__.split(".")[0]
    assert (tmp_path / "output").read_text(encoding="utf-8") == f"version={__version__}\nmajor=v{major}\n"

    done = _version_step(tmp_path, "v99.0.0")
    assert done.returncode == 1
    assert f"::error::tag v99.0.0, package version {__version__}" in done.stdout
