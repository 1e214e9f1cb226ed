"""The manifest: what loads, and the exact message for each kind of bad input (file, line, key, fix)."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest
import yaml

from gitops.config import validation
from gitops.config.manifest import load_manifest, manifest_from_data
from gitops.errors import ManifestError
from tests.config.manifests import BRANCH, SERVER, problems
from tests.factories import manifest_data, write_manifest

HINT = "The manifest reference: gitops help manifest; 'gitops schema' prints its JSON Schema."


def test_the_issue_example_loads_as_written(here: Path) -> None:
    write_manifest(
        here,
        textwrap.dedent(
            """\
            version: 1
            servers:
              local:
                url: http://127.0.0.1:21025
                token_env: SCREEPS_TOKEN
            branches:
              - server: local
                branch: main
                root: src
                include: ["**/*.js"]
                activate: [world]
            """
        ),
    )
    loaded = load_manifest(Path("gitops.yaml"))
    branch = loaded.manifest.branches[0]
    assert (branch.server, branch.branch, branch.root, branch.include, branch.activate) == (
        "local",
        "main",
        "src",
        ["**/*.js"],
        ["world"],
    )
    assert (branch.exclude, branch.binary, branch.remote_only) == ([], ["**/*.wasm"], "remove")
    assert (branch.naming.separator, branch.naming.strip_suffixes) == ("/", [".js"])
    assert loaded.manifest.servers["local"].token_env == "SCREEPS_TOKEN"
    assert loaded.path == here / "gitops.yaml"
    assert loaded.base_dir == here
    assert loaded.display == "gitops.yaml"
    assert loaded.where(("branches", 0, "include", 0)) == "gitops.yaml:10: branches[0].include[0]"
    assert len(loaded.digest) == 64


def test_digest_follows_the_meaning_not_the_formatting(here: Path) -> None:
    write_manifest(here, manifest_data())
    first = load_manifest(Path("gitops.yaml")).digest
    write_manifest(here, "# a comment\n" + yaml.safe_dump(manifest_data(), default_flow_style=True))
    assert load_manifest(Path("gitops.yaml")).digest == first
    write_manifest(here, manifest_data(branches=[{"branch": "main", "root": "src", "activate": ["world"]}]))
    assert load_manifest(Path("gitops.yaml")).digest != first


def test_a_folder_means_its_gitops_yaml(here: Path) -> None:
    write_manifest(here / "deploy", manifest_data())
    loaded = load_manifest(Path("deploy"))
    assert loaded.display == "deploy/gitops.yaml"
    assert loaded.base_dir == here / "deploy"


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        ("https://screeps.com", "https://screeps.com"),
        ("https://screeps.com/ptr", "https://screeps.com/ptr"),
        ("https://screeps.com/season/", "https://screeps.com/season"),
        ("http://127.0.0.1:21025", "http://127.0.0.1:21025"),
        ("http://my-server.home.arpa:21025/", "http://my-server.home.arpa:21025"),
    ],
)
def test_server_urls_with_any_path_prefix(here: Path, url: str, kept: str) -> None:
    write_manifest(here, servers={"local": {"url": url, "token_env": "SCREEPS_TOKEN"}})
    assert load_manifest(Path("gitops.yaml")).manifest.servers["local"].url == kept


@pytest.mark.parametrize(
    "credentials",
    [
        {"token_env": "SCREEPS_TOKEN"},
        {"username_env": "SCREEPS_USER", "password_env": "SCREEPS_PASSWORD"},
        {"credentials": "main"},
    ],
)
def test_each_way_of_credentials_alone_is_accepted(here: Path, credentials: dict[str, str]) -> None:
    write_manifest(here, servers={"local": {"url": "http://127.0.0.1:21025", **credentials}})
    server = load_manifest(Path("gitops.yaml")).manifest.servers["local"]
    assert {k: v for k, v in dataclasses.asdict(server).items() if v is not None} == {
        "url": "http://127.0.0.1:21025",
        "compress": "auto",
        **credentials,
    }


def test_the_whole_message_lists_every_problem_with_file_line_and_key(here: Path) -> None:
    write_manifest(
        here,
        textwrap.dedent(
            """\
            version: 1
            servers:
              local:
                url: http://127.0.0.1:21025
                token: 0123456789abcdef
            branches:
              - server: local
                branch: main
                includes: ["**/*.js"]
              - server: official
                branch: main
                include: ["../lib/*.js"]
            """
        ),
    )
    with pytest.raises(ManifestError) as caught:
        load_manifest(Path("gitops.yaml"))
    assert caught.value.exit_code == 5
    assert str(caught.value) == "\n".join(
        [
            "manifest gitops.yaml is invalid (4 problems):",
            "  - gitops.yaml:5: servers.local.token: literal secrets are refused; put the token in an environment "
            "variable and name it with token_env",
            "  - gitops.yaml:9: branches[0].includes: unknown key; did you mean 'include'?",
            "  - gitops.yaml:10: branches[1].server: 'official' is not a server of this manifest; use one of: local",
            "  - gitops.yaml:12: branches[1].include[0]: '../lib/*.js' contains '..'; globs only match files under "
            "root: move root up instead",
            HINT,
        ]
    )
    assert "0123456789abcdef" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            f"version: 1\n{SERVER}\n{BRANCH}\nservers: {{}}\n",
            [
                "gitops.yaml:4: servers: appears twice (also on line 2), and YAML keeps only the last; keep one",
                "gitops.yaml:4: servers: lists no servers; add one, e.g. local: {url: http://127.0.0.1:21025, "
                "token_env: ...}",
            ],
            id="duplicate-key",
        ),
        pytest.param(
            "version: 1\nservers: [\n",
            [
                "gitops.yaml:3:1: not valid YAML: expected the node content, but found '<stream end>' (while "
                "parsing a flow node); check the indentation, and quote values that contain ': ' or start with "
                "'*', '&', '!' or '{'"
            ],
            id="yaml-syntax",
        ),
        pytest.param(
            "version: 1\n\tservers: {}\n",
            [
                "gitops.yaml:2:1: not valid YAML: found character '\\t' that cannot start any token (while scanning "
                "for the next token); indent with spaces, not tabs"
            ],
            id="yaml-tab",
        ),
        pytest.param(
            "# nothing yet\n",
            ["gitops.yaml:1: the manifest is empty; start it with 'version: 1' (see gitops help manifest)"],
            id="empty",
        ),
    ],
)
def test_each_kind_of_bad_input(here: Path, text: str, expected: list[str]) -> None:
    assert problems(here, text) == expected


def test_no_secret_value_is_echoed(here: Path) -> None:
    text = (
        "version: 1\nservers:\n"
        "  a: {url: 'https://bob:pa55word@screeps.com', token: tok3n-value, token_env: 12-s3cret-34}\n"
        "  b: {url: 'https://screeps.com/?_token=qu3ry-t0ken', password: pa55word, api_key: k3y-value}\n"
        "branches: [{server: a, branch: main}]\n"
    )
    message = "\n".join(problems(here, text))
    for secret in ("pa55word", "tok3n-value", "12-s3cret-34", "qu3ry-t0ken", "k3y-value"):
        assert secret not in message


def test_not_found(here: Path) -> None:
    with pytest.raises(ManifestError) as caught:
        load_manifest(Path("gitops.yaml"))
    assert str(caught.value) == (
        "manifest gitops.yaml not found\n"
        "Without -m, gitops looks for gitops.yaml or gitops.yml here and in the folders above, up to the top of the "
        "Git repository. Create one with 'gitops init' (it writes a commented one for the layout it finds), or name "
        "another file with -m/--manifest or GITOPS_MANIFEST."
    )


def test_not_utf8(here: Path) -> None:
    (here / "gitops.yaml").write_bytes(b"version: 1\n# caf\xe9\n")
    with pytest.raises(ManifestError) as caught:
        load_manifest(Path("gitops.yaml"))
    assert caught.value.problems == ["gitops.yaml:2: not UTF-8 (byte 0xe9 at offset 16); save the file as UTF-8"]


def test_data_not_read_from_a_file_is_checked_by_the_same_rules() -> None:
    data = manifest_data(
        servers={"local": {"url": "http://127.0.0.1:21025"}}, branches=[{"server": "nowhere", "branch": "main"}]
    )
    with pytest.raises(ManifestError) as caught:
        manifest_from_data(data)
    assert caught.value.problems == [
        "branches[0].server: 'nowhere' is not a server of this manifest; use one of: local",
        "servers.local: names no credentials; add token_env (a token, official servers), username_env and "
        "password_env (private servers), or credentials (an entry of the unified credentials file .screeps.yaml)",
    ]
    # The models hold the rules for one value only: the cross-field rules run once, on the data as loaded.
    assert validation.Manifest.model_validate(data).branches[0].server == "nowhere"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            f'version: 1\n{SERVER}\nbranches: [{{server: local, branch: main, root: "src\\0"}}]\n',
            [
                "gitops.yaml:3: branches[0].root: 'src\\x00' contains the control character '\\x00'; write the "
                "folder's name without it, e.g. src"
            ],
            id="nul-in-root",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\nbranches:\n  - server: local\n    branch: main\n"
            '    include: ["**/*.js\\n"]\n    exclude: ["a\\tb/*.js"]\n    binary: ["*.wasm\\x7f"]\n',
            [
                "gitops.yaml:6: branches[0].include[0]: '**/*.js\\n' contains the control character '\\n'; write "
                "the glob without it, e.g. '**/*.js'",
                "gitops.yaml:7: branches[0].exclude[0]: 'a\\tb/*.js' contains the control character '\\t'; write "
                "the glob without it, e.g. '**/*.js'",
                "gitops.yaml:8: branches[0].binary[0]: '*.wasm\\x7f' contains the control character '\\x7f'; write "
                "the glob without it, e.g. '**/*.js'",
            ],
            id="control-characters-in-globs",
        ),
        pytest.param(
            "version: 1\nservers: &a {x: *a}\nbranches: [{server: local, branch: main}]\n",
            [
                "gitops.yaml:2:10: YAML anchors are not supported in gitops.yaml; remove '&a' and write the value "
                "out where it is needed",
                "gitops.yaml:2:17: YAML aliases are not supported in gitops.yaml; write the value out",
            ],
            id="self-referencing-alias",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\nbranches:\n  - server: local\n    branch: main\n    include: &js ['**/*.js']\n"
            "  - server: local\n    branch: sim\n    include: *js\n    <<: *js\n",
            [
                "gitops.yaml:6:14: YAML anchors are not supported in gitops.yaml; remove '&js' and write the value "
                "out where it is needed",
                "gitops.yaml:9:14: YAML aliases are not supported in gitops.yaml; write the value out",
                "gitops.yaml:10:9: YAML aliases are not supported in gitops.yaml; write the value out",
            ],
            id="alias-and-merge-key",
        ),
        pytest.param(
            f'version: 1\n{SERVER}\nbranches: [{{server: local, branch: "ma\\udce9in"}}]\n',
            ["gitops.yaml:3:36: the escape '\\udce9' is a lone surrogate, not a character; write the text itself"],
            id="lone-surrogate",
        ),
        pytest.param(
            "version: 1\nservers: " + "[" * 70 + "]" * 70 + "\n",
            ["gitops.yaml:2:73: found values nested more than 64 levels deep; a manifest needs only a few levels"],
            id="nested-too-deeply",
        ),
    ],
)
def test_inputs_that_used_to_crash_are_refused(here: Path, text: str, expected: list[str]) -> None:
    assert problems(here, text) == expected


def test_billion_laughs_is_refused_before_anything_is_expanded(here: Path) -> None:
    # Ten levels of ten aliases each would be 10**10 strings once expanded; composing refuses the first alias.
    levels = ["a0: &a0 [lol]"] + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 11)]
    text = f"version: 1\n{SERVER}\n{BRANCH}\n" + "\n".join(levels) + "\n"
    found = problems(here, text)
    assert len(found) == 11 + 100
    assert found[0] == (
        "gitops.yaml:4:5: YAML anchors are not supported in gitops.yaml; remove '&a0' and write the value out where "
        "it is needed"
    )
    assert found[2] == "gitops.yaml:5:10: YAML aliases are not supported in gitops.yaml; write the value out"


SERVER_BLOCK = "servers:\n  local: {url: 'http://127.0.0.1:21025', token_env: SCREEPS_TOKEN}\n"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("!!int x", "the value is not a whole number, as its tag !!int says; write a whole number, or remove the tag"),
        ("!!float x", "the value is not a number, as its tag !!float says; write a number, or remove the tag"),
        ("!!timestamp x", "the value is not a date or timestamp, as its tag !!timestamp says; write a date or"),
        ("!!bool x", "the value is not true or false, as its tag !!bool says; write true or false, or remove the tag"),
        ("!!binary aGVsbG8=", "the YAML tag !!binary on a value is not supported; remove the tag"),
        ("!!set {a, b}", "the YAML tag !!set on a mapping is not supported; remove the tag"),
        ("!!omap [{a: 1}]", "the YAML tag !!omap on a list is not supported; remove the tag"),
        ("!!python/object/apply:os.system [ls]", "the YAML tag !!python/object/apply:os.system on a list is not"),
        ("!!python/name:os.system ''", "the YAML tag !!python/name:os.system on a value is not supported"),
        ("!custom x", "the YAML tag !custom on a value is not supported; remove the tag"),
        ("2024-13-45", "the value reads as a date or timestamp but is not a valid one; quote it if it is text"),
        ("1" * 5000, "the value reads as a whole number but is not a valid one; quote it if it is text"),
    ],
)
def test_values_that_do_not_fit_their_tag_are_one_problem_each(here: Path, value: str, expected: str) -> None:
    # Each of these was an exception from deep in pyyaml (exit 70); the value is left out, and reported once.
    found = problems(here, f"version: 1\n{SERVER_BLOCK}branches:\n  - server: local\n    branch: {value}\n")
    [only] = found
    assert only.startswith(f"gitops.yaml:6: branches[0].branch: {expected}")


def test_tags_everywhere_are_reported_at_once_with_the_other_problems(here: Path) -> None:
    text = (
        "version: !!int one\n"
        "servers:\n"
        "  local: {url: !!float x, token_env: !!bool maybe}\n"
        "  !!int x: {url: 'http://127.0.0.1:21025'}\n"
        "branches:\n"
        "  - {server: local, branch: main, colour: blue, <<: {a: 1}}\n"
    )
    assert problems(here, text) == [
        "gitops.yaml:1: version: the value is not a whole number, as its tag !!int says; write a whole number, or "
        "remove the tag (and quote the value if it is text)",
        "gitops.yaml:3: servers.local.url: the value is not a number, as its tag !!float says; write a number, or "
        "remove the tag (and quote the value if it is text)",
        "gitops.yaml:3: servers.local.token_env: the value is not true or false, as its tag !!bool says; write true "
        "or false, or remove the tag (and quote the value if it is text)",
        "gitops.yaml:4: servers: a key is not a whole number, as its tag !!int says; write a whole number, or remove "
        "the tag (and quote the value if it is text)",
        "gitops.yaml:6: branches[0]: '<<' (a YAML merge key) is not supported; write the keys out",
        "gitops.yaml:6: branches[0].colour: unknown key; the keys here are: server, branch, root, include, exclude, "
        "binary, naming, activate, remote_only, build, source_maps, requires, verify, ignore_lines",
    ]
