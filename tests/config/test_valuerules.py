"""The rules for one value (``gitops.config.valuerules``): each refusal's exact message, with the file, the line,
the key and the fix; a value that could be a secret is never echoed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.config.manifests import BRANCH, SERVER, problems


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            f"version: 1\nservers:\n  local: {{url: 'http://127.0.0.1:21025',"
            f" token_env: 5f0a8bc2-1d3e-4f5a-9b6c-7d8e9fa0b1c2}}\n{BRANCH}\n",
            [
                "gitops.yaml:3: servers.local.token_env: is not an environment variable name (letters, digits and "
                "'_', not starting with a digit; the value is not shown in case it is a secret); name the variable "
                "that holds the secret, e.g. SCREEPS_TOKEN"
            ],
            id="token-pasted-into-token_env",
        ),
        pytest.param(
            f"version: 1\nservers:\n  local: {{url: 'http://127.0.0.1:21025',"
            f" token_env: a5f0a8bc21d34f5a9b6c7d8e9fa0b1c2}}\n{BRANCH}\n",
            [
                "gitops.yaml:3: servers.local.token_env: looks like a token, not the name of an environment "
                "variable; literal secrets are refused: put the token in an environment variable and name that "
                "variable here, e.g. SCREEPS_TOKEN"
            ],
            id="hex-token-in-token_env",
        ),
        pytest.param(
            f"version: 1\nservers:\n  local: {{url: 'http://bob:hunter2@127.0.0.1:21025', token_env: T}}\n{BRANCH}\n",
            [
                "gitops.yaml:3: servers.local.url: must not contain a user name or password; put them in "
                "environment variables and name them with username_env and password_env (or use token_env)"
            ],
            id="url-with-password",
        ),
        pytest.param(
            f"version: 1\nservers:\n  local: {{url: 'https://screeps.com/?_token=abc', token_env: T}}\n{BRANCH}\n",
            [
                "gitops.yaml:3: servers.local.url: must not have a query or a fragment; give the base URL only, "
                "e.g. https://screeps.com/ptr (a token goes in an environment variable named by token_env)"
            ],
            id="url-with-query",
        ),
        pytest.param(
            f"version: 1\nservers:\n  local: {{url: screeps.com, token_env: T}}\n{BRANCH}\n",
            [
                "gitops.yaml:3: servers.local.url: 'screeps.com' has no scheme; write https:// (the official "
                "server) or http:// (a private server), e.g. https://screeps.com or http://127.0.0.1:21025"
            ],
            id="url-without-scheme",
        ),
        pytest.param(
            f"version: 1\nservers:\n  local: {{url: 'ftp://screeps.com', token_env: T}}\n{BRANCH}\n",
            ["gitops.yaml:3: servers.local.url: scheme 'ftp://' is not supported; use https:// or http://"],
            id="url-bad-scheme",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\nbranches: [{{server: local, branch: $activeWorld}}]\n",
            [
                "gitops.yaml:3: branches[0].branch: '$activeWorld' starts with '$', which the server reads as 'the "
                "active branch' ($activeWorld, $activeSim), so no branch can have such a name; name the branch "
                "itself, e.g. main"
            ],
            id="branch-starting-with-dollar",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\nbranches: [{{server: local, branch: ''}}]\n",
            ["gitops.yaml:3: branches[0].branch: is empty; name the branch, e.g. main"],
            id="empty-branch-name",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\nbranches: [{{server: local, branch: main, activate: [world, world]}}]\n",
            ["gitops.yaml:3: branches[0].activate: lists 'world' twice; list it once"],
            id="activate-twice",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\nbranches: [{{server: local, branch: main, include: []}}]\n",
            [
                "gitops.yaml:3: branches[0].include: is empty, so the branch would have no modules; list at least "
                "one glob, e.g. ['**/*.js'], or leave include out for that default"
            ],
            id="empty-include",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\nbranches:\n  - server: local\n    branch: main\n    exclude: ['/tmp/*.js']\n",
            [
                "gitops.yaml:6: branches[0].exclude[0]: '/tmp/*.js' is absolute; globs are relative to the branch "
                "root, e.g. '**/*.js'"
            ],
            id="absolute-glob",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\nbranches: [{{server: local, branch: main, root: /home/me/bot}}]\n",
            [
                "gitops.yaml:3: branches[0].root: '/home/me/bot' is absolute; give a folder relative to the "
                "manifest, e.g. src"
            ],
            id="absolute-root",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\nbranches: [{{server: local, branch: main, naming: {{separator: '--'}}}}]\n",
            [
                "gitops.yaml:3: branches[0].naming.separator: '--' is not one character; write the one character "
                "that stands for a folder boundary in module names: '/', '.', or the one your upload script "
                "flattens folders with, such as '_'"
            ],
            id="bad-separator",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\nbranches: [{{server: local, branch: main, naming: {{strip_suffixes: [js]}}}}]\n",
            [
                "gitops.yaml:3: branches[0].naming.strip_suffixes[0]: 'js' is not a file suffix; write it with its "
                "dot, e.g. '.js'"
            ],
            id="suffix-without-dot",
        ),
    ],
)
def test_each_rule_for_one_value_says_what_is_wrong_and_the_fix(here: Path, text: str, expected: list[str]) -> None:
    assert problems(here, text) == expected


def test_branch_names_follow_the_servers_rules(here: Path) -> None:
    """Issue 41: a 40-character branch passed validate and apply then failed with a bare "invalid branch name". The
    server counts a name's length as JavaScript does (UTF-16 units), and takes at most 30."""
    thirty = "b" * 30
    emoji = "\U0001f600" * 16  # 16 characters, 32 UTF-16 units
    text = (
        f"version: 1\n{SERVER}\nbranches:\n"
        f"  - {{server: local, branch: {thirty}}}\n"
        f"  - {{server: local, branch: {'c' * 40}}}\n"
        f"  - {{server: local, branch: '{emoji}'}}\n"
        '  - {server: local, branch: "tab\\there"}\n'
    )
    found = problems(here, text)
    assert len(found) == 3, found
    assert found[0].startswith("gitops.yaml:5: branches[1].branch: '" + "c" * 40 + "' is 40 characters long;")
    assert "the server takes at most 30" in found[0]
    assert "is 32 characters long as the server counts them (UTF-16 units; 16 characters)" in found[1]
    assert "control character" in found[2]
