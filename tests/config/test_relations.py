"""The rules that relate values (``gitops.config.relations``): credentials per server, branches and their servers,
what the branch entries say together, the budget's reserve; each refusal's exact message."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.config.manifests import BRANCH, SERVER, problems


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            f"version: 1\nservers:\n  local: {{url: 'http://127.0.0.1:21025'}}\n{BRANCH}\n",
            [
                "gitops.yaml:3: servers.local: names no credentials; add token_env (a token, official servers), "
                "username_env and password_env (private servers), or credentials (an entry of the unified "
                "credentials file .screeps.yaml)"
            ],
            id="no-credentials",
        ),
        pytest.param(
            f"version: 1\nservers:\n  local: {{url: 'http://127.0.0.1:21025', token_env: T, credentials: main}}\n"
            f"{BRANCH}\n",
            [
                "gitops.yaml:3: servers.local: names credentials in more than one way (token_env, credentials); "
                "keep exactly one"
            ],
            id="two-ways-of-credentials",
        ),
        pytest.param(
            f"version: 1\nservers:\n  local:\n    url: 'http://127.0.0.1:21025'\n    username_env: U\n{BRANCH}\n",
            [
                "gitops.yaml:5: servers.local.username_env: needs password_env too (private servers sign in with "
                "both); add password_env"
            ],
            id="user-without-password",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\nbranches:\n  - {{server: local, branch: main}}\n"
            "  - {server: local, branch: main}\n",
            [
                "gitops.yaml:5: branches[1]: branch 'main' of server 'local' is already listed at branches[0]; "
                "list each branch once"
            ],
            id="duplicate-branch",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\nbranches:\n  - {{server: local, branch: a, activate: [world]}}\n"
            "  - {server: local, branch: b, activate: [world, sim]}\n",
            [
                "gitops.yaml:5: branches[1].activate: branches[0] already activates 'world' on server 'local', and "
                "a server has one active world branch; keep activate: [world] on one of them"
            ],
            id="two-branches-activate-world",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\n{BRANCH}\nbudget:\n  reserve:\n    POST /api/user/cod: 20\n",
            [
                'gitops.yaml:6: budget.reserve["POST /api/user/cod"]: is not a rate-limited endpoint; did you '
                "mean 'POST /api/user/code'? (see the limits: gitops help manifest)"
            ],
            id="reserve-unknown-endpoint",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\n{BRANCH}\nbudget:\n  reserve:\n    POST /api/user/code: 240\n"
            "    GET /api/user/code: -1\n    global: 10\n",
            [
                'gitops.yaml:6: budget.reserve["POST /api/user/code"]: 240 is not below the limit (240 per day); '
                "keep back fewer requests than that",
                'gitops.yaml:7: budget.reserve["GET /api/user/code"]: -1 is negative; keep back 0 requests or more',
                "gitops.yaml:8: budget.reserve.global: is not a rate-limited endpoint; use an endpoint of the limits "
                "table (see the limits: gitops help manifest)",
            ],
            id="reserve-out-of-range",
        ),
        pytest.param(
            f"version: 1\n{SERVER}\nbranches: []\n",
            ["gitops.yaml:3: branches: lists no branches; add one, e.g. - {server: local, branch: main}"],
            id="no-branches",
        ),
        pytest.param(
            f"version: 1\nservers: {{}}\n{BRANCH}\n",
            [
                "gitops.yaml:2: servers: lists no servers; add one, e.g. local: {url: http://127.0.0.1:21025, "
                "token_env: ...}"
            ],
            id="no-servers",
        ),
        pytest.param(
            "version: 1\nservers: {'my server': {url: 'http://h', token_env: T}}\n"
            "branches: [{server: my server, branch: main}]\n",
            [
                "gitops.yaml:2: servers[\"my server\"]: is not a usable server name; use letters, digits, '-', '_' "
                "and '.', starting with a letter or digit"
            ],
            id="server-name-with-space",
        ),
    ],
)
def test_each_rule_that_relates_values_says_what_is_wrong_and_the_fix(
    here: Path, text: str, expected: list[str]
) -> None:
    assert problems(here, text) == expected


def test_more_branches_than_a_user_can_have(here: Path) -> None:
    branches = "\n".join(f"  - {{server: local, branch: b{i}}}" for i in range(31))
    assert problems(here, f"version: 1\n{SERVER}\nbranches:\n{branches}\n") == [
        "gitops.yaml:3: branches: server 'local' gets 31 branches, but a user has at most 30; deploy fewer branches"
    ]
