"""Manifests for the tests of the manifest's rules: a server and a branch to write beside the key under test, and
every problem a manifest file's load reports."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gitops.config.manifest import DEFAULT_MANIFEST, load_manifest
from gitops.errors import ManifestError
from tests.factories import write_manifest

BRANCH = "branches: [{server: local, branch: main}]"
SERVER = 'servers: {local: {url: "http://127.0.0.1:21025", token_env: SCREEPS_TOKEN}}'


def problems(folder: Path, text: str) -> list[str]:
    write_manifest(folder, textwrap.dedent(text))
    with pytest.raises(ManifestError) as caught:
        load_manifest(Path(DEFAULT_MANIFEST))
    return caught.value.problems
