"""The paths a pull never writes (issue 18, item 1): Git's verify_path spellings, build files, dot-files, depth."""

from __future__ import annotations

import pytest

from gitops.core.protected import MAX_DEPTH, collisions, comparable, refusal


@pytest.mark.parametrize(
    "path",
    [
        ".git/config",
        ".git./config",  # Windows drops the trailing dot
        ".git /config",  # ... and the trailing space
        ".GIT/config",
        "GIT~1/config",  # NTFS's short name of .git
        "git~2/hooks/pre-commit",
        ".g\u200cit/config",  # HFS+ ignores U+200C
        "\u200c.git/config",
        ".git\ufeff/config",
        "x/.github/workflows/deploy.yml",
        ".envrc",
        ".vscode/tasks.json",
        ".gitignore",
        ".screeps.yaml",
        ".npmrc",
    ],
)
def test_dot_files_and_every_spelling_of_git_are_refused(path: str) -> None:
    assert refusal(path, binary=True) is not None
    assert refusal(path, binary=False) is not None


@pytest.mark.parametrize(
    "path",
    [
        "gitops.yaml",
        "Gitops.YML",
        "package.json",
        "sub/package.json",
        "package-lock.json",
        "Gruntfile.js",
        "gulpfile.js",
        "rollup.config.js",
        "rollup.config.mjs",
        "webpack.config.js",
        "vite.config.ts",
        "tsconfig.json",
        "Makefile",
        "Cargo.toml",
        "build.rs",
        "package.json.",  # Windows opens it as package.json
        "package.json ",
        # Found and run by name, whatever the suffix (issue 37): task runners, test runners, build scripts.
        "gulpfile.babel.js",
        "Gulpfile.ts",
        "gulpfile.esm.js",
        "Gruntfile.ts",
        "jakefile.js",
        "Brocfile.js",
        "webpackfile.js",
        "dangerfile.ts",
        "Jenkinsfile",
        "karma.conf.js",
        "protractor.conf.js",
        "wdio.conf.ts",
        "nightwatch.conf.cjs",
        "build.js",
        "tools/build.mjs",
        "BUILD.ts",
        "build",
        "build.gradle",
        "Rakefile",
        "Gemfile",
        "Vagrantfile",
        "Procfile",
    ],
)
def test_files_that_configure_or_run_the_build_are_refused(path: str) -> None:
    reason = refusal(path, binary=True)
    assert reason is not None
    assert "configures or runs the project's build" in reason or "Windows" in reason


@pytest.mark.parametrize("path", ["CON.js", "nul", "com1.wasm", "LPT9.js", "a<b.js", "a:b.js", "what?.js"])
def test_names_windows_cannot_hold_are_refused(path: str) -> None:
    assert refusal(path, binary=False) is not None


@pytest.mark.parametrize("path", ["deploy.sh", "data.json", "x.yaml", "run.py", "setup.cfg", "secrets.env"])
def test_binary_modules_never_get_the_suffix_of_a_script_or_a_config(path: str) -> None:
    assert refusal(path, binary=True) is not None


@pytest.mark.parametrize(
    ("path", "binary"),
    [
        ("main.js", False),
        ("role/harvester.js", False),
        ("role.harvester.js", False),
        ("main.js.map", False),
        ("lib/add.wasm", True),
        ("addTwo", True),  # a binary module without suffix
        ("pkg/mybot_bg.wasm", True),
        ("utils.config", True),  # no suffix after .config
        ("package.js", False),  # a module named package is fine
        ("gitops.js", False),
        ("configuration.js", False),
        ("git~.js", False),
        ("builder.js", False),  # the role, not the build script
        ("role.build.js", False),
        ("buildings.js", False),
        ("conf.js", False),
        ("conference.js", False),
        ("karma.js", False),
    ],
)
def test_ordinary_module_files_are_written(path: str, binary: bool) -> None:
    assert refusal(path, binary=binary) is None


def test_the_manifest_of_another_name_is_protected_too() -> None:
    assert refusal("deploy.bot", binary=True) is None
    reason = refusal("Deploy.Bot", binary=True, manifest_names=frozenset({"deploy.bot"}))
    assert reason is not None
    assert "configures or runs" in reason


def test_depth_and_length_are_bounded() -> None:
    assert refusal("/".join(["d"] * MAX_DEPTH) + "/x.js", binary=False) is None
    assert refusal("/".join(["d"] * (MAX_DEPTH + 1)) + "/x.js", binary=False) == (
        f"that is {MAX_DEPTH + 1} folders deep (at most {MAX_DEPTH})"
    )
    assert refusal("/".join(["d" * 200] * 6), binary=False) == "that path is longer than 1024 bytes"


def test_comparable_folds_what_macos_and_windows_fold() -> None:
    assert comparable("Role") == comparable("role") == comparable("ROLE.") == comparable("role ")
    assert comparable("caf\u00e9") == comparable("cafe\u0301")  # NFC and NFD
    assert comparable("a\u200cb") == comparable("ab")


def test_collisions_between_new_paths_and_with_files_already_there() -> None:
    assert collisions(["Role.js", "role.js", "main.js"]) == [("Role.js", "role.js")]
    assert collisions(["caf\u00e9.js", "cafe\u0301.js"]) == [("cafe\u0301.js", "caf\u00e9.js")]
    assert collisions(["Lib/a.js", "lib/b.js"]) == []  # different files; the folder is one folder
    assert collisions(["Role.js"], existing=["role.js"]) == [("role.js", "Role.js")]
    assert collisions(["role.js"], existing=["role.js"]) == []
