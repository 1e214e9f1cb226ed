"""Only the repository's files are deployed (issue 10, problem 5): in working-tree mode as with ``--ref``, a root, or
a file or folder reached under it, that resolves outside the Git work tree holding the manifest (through ``..`` or a
symbolic link), or into ``.git``, is refused with exit 6; nothing is read or uploaded. Real repositories, real links.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gitops.cli import run
from gitops.config.manifest import LoadedManifest, load_manifest
from gitops.edges.sources import read_local_code
from gitops.errors import ManifestError, SourceError
from gitops.standin.testing import ALICE, StandIn
from tests.factories import commit_all, make_repo, manifest_data, write_files, write_manifest
from tests.project import Project

pytestmark = pytest.mark.skipif(os.name == "nt", reason="symbolic links")

UPLOAD = "POST /api/user/code"
SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- not a module\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """``repo/`` (a Git repository with ``src/main.js``) next to ``outside/`` and a home with a private key."""
    write_files(tmp_path / "outside", {"main.js": "// a file of the machine\n"})
    write_files(tmp_path / "home/.ssh", {"id_rsa": SECRET})
    return make_repo(tmp_path / "repo", {"src/main.js": "module.exports.loop = () => {};\n", "src/util.js": "u"})


def load(folder: Path, **branch: object) -> LoadedManifest:
    write_manifest(folder, manifest_data(branches=[{"branch": "main", "root": "src", **branch}]))
    return load_manifest(folder / "gitops.yaml")


def refusal(loaded: LoadedManifest, ref: str | None = None) -> str:
    with pytest.raises(SourceError) as caught:
        read_local_code(loaded, ref)
    assert caught.value.exit_code == 6
    return str(caught.value)


def test_a_root_above_the_repository_is_refused_in_both_modes(repo: Path) -> None:
    loaded = load(repo, root="../outside")
    commit_all(repo)
    outside = os.path.realpath(repo.parent / "outside")
    assert refusal(loaded).endswith(
        f"branches[0].root: '../outside' resolves to {outside}, outside the repository "
        f"{os.path.realpath(repo)}, and only the repository's files are deployed; put the code inside the "
        "repository, or fix root"
    )
    assert refusal(loaded, "HEAD").endswith("'../outside' leads outside the Git repository; put the code inside it")


def test_a_root_in_dot_git_is_refused_in_both_modes(repo: Path) -> None:
    loaded = load(repo, root=".git", include=["**/*"])
    commit_all(repo)
    expected = (
        "'.git' is inside .git, Git's own folder (history, hooks and config, never code to deploy); name a folder "
        "of the working tree"
    )
    assert refusal(loaded).endswith(expected)
    assert refusal(loaded, "HEAD").endswith(expected)
    assert refusal(load(repo, root=".GIT")).endswith(expected.replace("'.git'", "'.GIT'"))  # as Git protects it
    assert refusal(load(repo, root="src/../.git/hooks", include=["**/*"])).endswith(
        "is inside .git, Git's own folder (history, hooks and config, never code to deploy); name a folder of the "
        "working tree"
    )


def test_an_absolute_root_is_refused_by_the_manifest(repo: Path) -> None:
    write_manifest(repo, manifest_data(branches=[{"branch": "main", "root": "/etc"}]))
    with pytest.raises(ManifestError) as caught:
        load_manifest(repo / "gitops.yaml")
    assert "'/etc' is absolute; give a folder relative to the manifest, e.g. src" in str(caught.value)


def test_a_root_that_is_a_link_out_of_the_repository_is_refused(repo: Path) -> None:
    (repo / "deploy").symlink_to(repo.parent / "outside")
    (repo / "etc").symlink_to("/etc")
    loaded = load(repo, root="deploy")
    commit_all(repo)
    outside = os.path.realpath(repo.parent / "outside")
    assert f"'deploy' resolves to {outside}, outside the repository" in refusal(loaded)
    # The commit holds the link, not a folder: --ref refuses it too.
    assert "'deploy' is not a folder in commit" in refusal(loaded, "HEAD")
    etc = load(repo, root="etc", include=["**/*"])
    assert f"'etc' resolves to {os.path.realpath('/etc')}, outside the repository" in refusal(etc)


def test_a_root_that_is_a_link_into_dot_git_is_refused(repo: Path) -> None:
    (repo / "hooks").symlink_to(".git/hooks")
    message = refusal(load(repo, root="hooks", include=["**/*"]))
    assert f"'hooks' resolves to {os.path.realpath(repo / '.git/hooks')}, inside .git, Git's own folder" in message


def test_links_under_the_root_to_the_machine_are_refused_in_both_modes(repo: Path) -> None:
    (repo / "src/key.js").symlink_to(repo.parent / "home/.ssh/id_rsa")
    (repo / "src/etc").symlink_to("/etc")
    (repo / "src/ext").symlink_to(repo.parent / "outside")
    loaded = load(repo, include=["**/*.js", "etc/hostname"])
    commit_all(repo)
    message = refusal(loaded)
    assert SECRET not in message
    assert message.endswith(
        "  - local/main: src/etc/hostname is reached through src/etc, a symbolic link that leads outside the "
        "repository; copy the files into the root, or exclude them\n"
        "  - local/main: src/ext/main.js is reached through src/ext, a symbolic link that leads outside the "
        "repository; copy the files into the root, or exclude them\n"
        "  - local/main: src/key.js is a symbolic link that leads outside the repository; copy the file into the "
        "root, or exclude it"
    )
    # The commit stores the links, not what they lead to: --ref refuses the file as leaving the repository, and
    # has no files under the folder links.
    by_ref = refusal(loaded, "HEAD")
    assert "src/key.js is a symbolic link that leads outside the repository" in by_ref
    assert "'etc/hostname' matches no file under src/ in commit" in by_ref


def test_links_under_the_root_into_dot_git_are_refused_in_both_modes(repo: Path) -> None:
    (repo / "config.js").symlink_to(".git/config")
    (repo / "gitdir").symlink_to(".git")
    write_manifest(repo, manifest_data(branches=[{"branch": "main", "root": ".", "include": ["**/*.js", "gitdir/*"]}]))
    loaded = load_manifest(repo / "gitops.yaml")
    message = refusal(loaded)
    assert "  - local/main: config.js is a symbolic link that leads into .git, Git's own folder; copy the file" in (
        message
    )
    assert (
        "  - local/main: gitdir/config is reached through gitdir, a symbolic link that leads into .git, Git's own "
        "folder; copy the files into the root, or exclude them"
    ) in message
    commit_all(repo)
    by_ref = refusal(loaded, "HEAD")
    assert "config.js is a symbolic link that leads into .git, Git's own folder" in by_ref
    assert "'gitdir/*' matches no file under ./ in commit" in by_ref


def test_outside_git_the_manifest_folder_is_the_boundary(tmp_path: Path) -> None:
    write_files(tmp_path, {"bot/src/main.js": "", "shared/util.js": ""})
    loaded = load(tmp_path / "bot", root="../shared")
    assert "'../shared' resolves to" in refusal(loaded)
    assert f"outside the repository {os.path.realpath(tmp_path / 'bot')}" in refusal(loaded)
    assert [b.code.names() for b in read_local_code(load(tmp_path / "bot")).branches] == [["main"]]


def test_what_stays_in_the_repository_is_read_in_both_modes(tmp_path: Path) -> None:
    """A manifest in a sub-folder may name a root elsewhere in the repository; links inside the root are followed,
    and a root that is a link to a folder of the repository is read."""
    repo = make_repo(
        tmp_path / "repo", {"src/main.js": "m", "src/common/util.js": "u", "deploy/.keep": "", "dist/main.js": "d"}
    )
    (repo / "src/alias").symlink_to("common")
    (repo / "src/util.js").symlink_to("common/util.js")
    (repo / "current").symlink_to("dist")
    loaded = load(repo / "deploy", root="../src")
    commit_all(repo)
    expected = {"main": "m", "common/util": "u", "alias/util": "u", "util": "u"}
    for ref in (None, "HEAD"):
        local = read_local_code(loaded, ref)
        assert {m.name: m.text for b in local.branches for m in b.code} == expected
    linked = read_local_code(load(repo, root="current"))
    assert {m.name: m.text for b in linked.branches for m in b.code} == {"main": "d"}


@pytest.fixture
def project(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    write_files(tmp_path / "machine", {"main.js": "// a file of the machine\n"})
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": "module.exports.loop = () => {};\n"})
    return p


@pytest.mark.parametrize("case", ["parent", "dot-git", "linked-root", "linked-file"])
def test_validate_plan_and_apply_refuse_and_upload_nothing(
    project: Project, standin: StandIn, tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    branch: dict[str, object]
    if case == "parent":
        branch = {"branch": "main", "root": "../machine"}
    elif case == "dot-git":
        branch = {"branch": "main", "root": ".git", "include": ["**/*"]}
    elif case == "linked-root":
        (project.root / "deploy").symlink_to(tmp_path / "machine")
        branch = {"branch": "main", "root": "deploy"}
    else:
        (project.root / "src/id.js").symlink_to(tmp_path / "machine/main.js")
        branch = {"branch": "main", "root": "src"}
    project.manifest([branch])
    project.commit()
    capsys.readouterr()
    assert run(["validate", "-m", str(project.root / "gitops.yaml")]) == 6
    assert "cannot be deployed" in capsys.readouterr().err
    for command in (("plan",), ("apply", "--yes")):
        result = project.gitops(*command)
        assert result.code == 6, (command, result.err)
        assert "cannot be deployed" in result.err
        assert "a file of the machine" not in result.out + result.err
    # The same manifest is refused with --ref as well.
    assert project.plan("--ref", "HEAD").code == 6
    assert standin.count(UPLOAD) == 0
    assert standin.branch_modules(ALICE, "main") is None
