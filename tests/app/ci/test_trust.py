"""What a CI run may be given (:mod:`gitops.app.ci.trust`): the refusals every CI system shares, in each host's
words; the refresh decision before the session; the base commit's manifest from the checkout or the host."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gitops.app.ci.host import BaseManifest
from gitops.app.ci.report import Report
from gitops.app.ci.trust import lacks_credentials, no_credentials_notice, read_base_manifest, refuse_changed_routes
from gitops.config.manifest import load_manifest
from gitops.config.routes import RouteChange
from gitops.errors import ExitCode, TrustError
from tests.app.ci.recording import WORDS, Change
from tests.factories import commit_all, make_repo


def _manifest(url: str, **server: str) -> str:
    data = {
        "version": 1,
        "servers": {"local": {"url": url, **server}},
        "branches": [{"server": "local", "branch": "main", "root": "src"}],
    }
    return yaml.safe_dump(data)


def test_a_change_that_moves_a_server_is_refused_in_the_hosts_words() -> None:
    report = Report(command="plan", manifest="gitops.yaml")
    report.route_changes = [RouteChange("server 'local' url", "https://a.test", "https://b.test")]
    with pytest.raises(TrustError) as refused:
        refuse_changed_routes(report, WORDS)
    assert refused.value.message.startswith("this change changes where credentials go")
    assert refused.value.hint == WORDS.routes_hint
    assert refused.value.exit_code == ExitCode.TRUST


def test_a_change_whose_base_could_not_be_read_is_refused_too() -> None:
    report = Report(command="plan", manifest="gitops.yaml", routes_unknown="the base is gone")
    with pytest.raises(TrustError, match=r"could not be compared with the base branch's \(the base is gone\)") as no:
        refuse_changed_routes(report, WORDS)
    assert no.value.hint == WORDS.routes_unknown_hint
    refuse_changed_routes(Report(command="plan", manifest="gitops.yaml"), WORDS)  # nothing changed: no refusal


@pytest.mark.parametrize(
    ("change", "starts"),
    [
        (Change(from_fork=True), "This change comes from a fork, and the system gives forks no secrets"),
        (Change(), "A change's plan runs without the deploy token for server 'local', as it should"),
        (None, "There are no credentials for server 'local' in this run"),
    ],
)
def test_the_notice_of_a_plan_without_credentials(change: Change | None, starts: str) -> None:
    notice = no_credentials_notice(["local"], change, WORDS)
    assert notice.startswith(starts)
    assert "The plan was made from the ledger alone (refresh: never)" in notice


def test_a_run_lacks_credentials_only_when_a_servers_are_not_there(tmp_path: Path) -> None:
    path = tmp_path / "gitops.yaml"
    path.write_text(_manifest("https://screeps.com", token_env="SCREEPS_TOKEN"), "utf-8")
    loaded = load_manifest(path)
    assert lacks_credentials(loaded, {"HOME": str(tmp_path)})
    assert not lacks_credentials(loaded, {"HOME": str(tmp_path), "SCREEPS_TOKEN": "a" * 32})


def test_a_broken_credentials_file_is_left_for_the_sessions_own_check(tmp_path: Path) -> None:
    path = tmp_path / "gitops.yaml"
    path.write_text(_manifest("https://screeps.com", credentials="main"), "utf-8")
    (tmp_path / ".screeps.yaml").write_text("servers: [not, a, mapping\n", "utf-8")
    assert not lacks_credentials(load_manifest(path), {"HOME": str(tmp_path)})


def test_the_base_manifest_comes_from_the_checkouts_own_commit(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"gitops.yaml": _manifest("https://a.test", token_env="T")})
    base = commit_all(root, "base")
    (root / "gitops.yaml").write_text(_manifest("https://b.test", token_env="T"), "utf-8")
    loaded = load_manifest(root / "gitops.yaml")
    found = read_base_manifest(loaded, base, unreachable="is not here")
    assert found.manifest is not None
    assert found.manifest.servers["local"].url == "https://a.test"
    assert read_base_manifest(loaded, "", unreachable="x") == BaseManifest(None, "the event names no base commit")
    gone = "f" * 40
    assert read_base_manifest(loaded, gone, unreachable="is not here").why == f"commit {gone[:12]} is not here"


def test_a_base_the_checkout_lacks_is_fetched_from_the_host(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"gitops.yaml": _manifest("https://a.test", token_env="T")})
    loaded = load_manifest(root / "gitops.yaml")
    gone = "e" * 40
    asked: list[tuple[str, str]] = []

    def fetch(path: str, sha: str) -> bytes | BaseManifest | None:
        asked.append((path, sha))
        return _manifest("https://c.test", token_env="T").encode()

    found = read_base_manifest(loaded, gone, unreachable="x", fetch=fetch)
    assert asked == [("gitops.yaml", gone)]
    assert found.manifest is not None
    assert found.manifest.servers["local"].url == "https://c.test"
    assert read_base_manifest(loaded, gone, unreachable="x", fetch=lambda p, s: None).why == (
        f"the base commit {gone[:12]} has no gitops.yaml"
    )
    assert read_base_manifest(loaded, gone, unreachable="x", fetch=lambda p, s: b"version: [").why == (
        "the base commit's gitops.yaml is not a valid manifest"
    )
