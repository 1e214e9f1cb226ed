"""pydantic's errors in the manifest's words (``gitops.config.errorwords``): a missing key, a value of the wrong
kind, an unknown or misplaced key, a literal secret; each message exact."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.config.manifests import BRANCH, SERVER, problems


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            f"version: 1\nservers:\n  local: {{url: 'http://127.0.0.1:21025', password: hunter2}}\n{BRANCH}\n",
            [
                "gitops.yaml:3: servers.local.password: literal secrets are refused; put the password in an "
                "environment variable and name it with password_env"
            ],
            id="literal-password",
        ),
        pytest.param(
            f"version: 1\nservers:\n  local: {{url: 'http://127.0.0.1:21025', token_env: T, username: bob}}\n"
            f"{BRANCH}\n",
            [
                "gitops.yaml:3: servers.local.username: user names are not written here; put it in an environment "
                "variable and name it with username_env"
            ],
            id="literal-user-name",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\nbranches: [{{server: local, branch: 2024}}]\n",
            ["gitops.yaml:3: branches[0].branch: must be a string, not a number; put the value in quotes"],
            id="branch-name-read-as-a-number",
        ),
        pytest.param(
            # An operator object, which the real server would read as a query matching every branch (issue 40).
            f"version: 1\n{SERVER}\nbranches: [{{server: local, branch: {{$ne: x}}}}]\n",
            ["gitops.yaml:3: branches[0].branch: must be a string, not a mapping; put the value in quotes"],
            id="branch-name-an-operator-object",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\nbranches: [{{server: local, branch: main, activate: [wrold]}}]\n",
            ["gitops.yaml:3: branches[0].activate[0]: must be 'world' or 'sim', not 'wrold'"],
            id="activate-unknown",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\nbranches: [{{server: local, branch: main, include: '**/*.js'}}]\n",
            ["gitops.yaml:3: branches[0].include: must be a list, not a string; write [a, b] or one '- item' per line"],
            id="include-not-a-list",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\nbranches: [{{server: local, branch: main, remote_only: delete}}]\n",
            ["gitops.yaml:3: branches[0].remote_only: must be 'remove' or 'keep', not 'delete'"],
            id="bad-remote-only",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\n{BRANCH}\nbudget: {{reserve: {{POST /api/user/code: many}}}}\n",
            ['gitops.yaml:4: budget.reserve["POST /api/user/code"]: must be a whole number, not a string'],
            id="reserve-not-a-number",
        ),
        pytest.param(
            f"version: 2\n{SERVER}\n{BRANCH}\n",
            ["gitops.yaml:1: version: 2 is not a manifest version this screeps-gitops reads; write 'version: 1'"],
            id="version-2",
        ),
        pytest.param(
            f"{SERVER}\n",
            [
                "gitops.yaml:1: version: is required but missing; add 'version: 1' at the top",
                "gitops.yaml:1: branches: is required but missing; add a 'branches:' list, e.g. - {server: local, "
                "branch: main}",
            ],
            id="missing-keys",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\n{BRANCH}\nbudjet: {{}}\n",
            ["gitops.yaml:4: budjet: unknown key; did you mean 'budget'?"],
            id="typo-at-top-level",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\n{BRANCH}\nverify: {{ticks: 5}}\n",
            [
                "gitops.yaml:4: verify: 'verify' is not a key here; it is a key of each entry of 'branches:' "
                "(branches[].verify): move it there"
            ],
            id="a-branchs-key-at-the-top-level",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\nbranches: [{{server: local, branch: main, token_env: X}}]\n",
            [
                "gitops.yaml:3: branches[0].token_env: 'token_env' is not a key here; it is a key of a server under "
                "'servers:' (servers.NAME.token_env): move it there"
            ],
            id="a-servers-key-in-a-branch",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\nbranches: [{{server: local, branch: main, deploy: yes}}]\n",
            [
                "gitops.yaml:3: branches[0].deploy: unknown key; the keys here are: server, branch, root, include, "
                "exclude, binary, naming, activate, remote_only, build, source_maps, requires, verify, ignore_lines"
            ],
            id="unknown-key",
        ),
        pytest.param(
            "- version: 1\n",
            ["gitops.yaml:1: (top level): must be a mapping (key: value lines), not a list"],
            id="not-a-mapping",
        ),
    ],
)
def test_each_pydantic_error_is_said_in_the_manifests_words(here: Path, text: str, expected: list[str]) -> None:
    assert problems(here, text) == expected
