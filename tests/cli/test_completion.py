"""The shell completion's names (``gitops.cli.completion``): the manifest's servers and branches, nothing when it does
not load. The whole path, from a shell's words to the printed items, is ``tests/cli/test_cli.py``'s."""

from __future__ import annotations

from pathlib import Path

import click

from gitops.cli.completion import target_names

MANIFEST = (
    "version: 1\nservers:\n  alpha: {url: 'http://127.0.0.1:1', token_env: T}\n"
    "  beta: {url: 'http://127.0.0.1:2', token_env: T}\n"
    "branches:\n  - {server: alpha, branch: main, root: src}\n  - {server: beta, branch: sim, root: src}\n"
)


def _names(manifest: Path, option: str, incomplete: str) -> list[str]:
    param = click.Option([f"--{option}", {"server": "servers", "branch": "branches"}[option]], multiple=True)
    ctx = click.Context(click.Command("plan", params=[param]))
    ctx.params["manifest"] = str(manifest)
    return [item.value for item in target_names(ctx, param, incomplete)]


def test_servers_and_branches_come_from_the_manifest(tmp_path: Path) -> None:
    manifest = tmp_path / "gitops.yaml"
    manifest.write_text(MANIFEST, encoding="utf-8")
    assert _names(manifest, "server", "") == ["alpha", "beta"]
    assert _names(manifest, "branch", "") == ["alpha/main", "beta/sim", "main", "sim"]
    assert _names(manifest, "branch", "s") == ["sim"]
    assert _names(manifest, "server", "b") == ["beta"]


def test_a_manifest_that_does_not_load_offers_nothing(tmp_path: Path) -> None:
    assert _names(tmp_path / "missing.yaml", "server", "") == []
    broken = tmp_path / "gitops.yaml"
    broken.write_text("version: 1\nservers: [", encoding="utf-8")
    assert _names(broken, "branch", "") == []
