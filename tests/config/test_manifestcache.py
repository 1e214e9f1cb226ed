"""The validated-manifest cache (``gitops/config/manifestcache.py``): a manifest validated before is built from
its entry, equal in every field; anything else (other bytes, a broken or foreign entry, an unusable folder) is
validated as if there were no cache, silently; an invalid manifest is never cached."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gitops
from gitops.config import manifestcache, validation
from gitops.config.manifest import LoadedManifest, load_manifest
from gitops.config.manifestcache import default_cache_dir
from gitops.errors import ManifestError

ROOT = Path(__file__).resolve().parents[2]

MANIFEST = textwrap.dedent(
    """\
    # A comment, and keys on their own lines: each key path has its line.
    version: 1
    servers:
      local:
        url: http://127.0.0.1:21025/
        token_env: SCREEPS_TOKEN
      "odd.name-x":
        url: http://127.0.0.1:21026
        username_env: U
        password_env: P
    branches:
      - server: local
        branch: main
        root: src
        include: ["**/*.js", "**/*.wasm"]
        naming: {separator: ".", strip_suffixes: [.js, .wasm]}
        activate: [world]
        build: [npm, run, build]
        verify:
          ticks: 5
          error_share: 1
          rollback: standby
          standby: blue
          fail_on: ["^boom"]
      - server: "odd.name-x"
        branch: dév
        requires: {check: false, ignore: [lodash]}
    budget:
      reserve: {"POST /api/user/code": 20}
    build: make
    """
)


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


@pytest.fixture
def env(cache: Path) -> dict[str, str]:
    return {"GITOPS_CACHE_DIR": str(cache)}


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    path = tmp_path / "repo" / "gitops.yaml"
    path.parent.mkdir()
    path.write_text(MANIFEST, encoding="utf-8")
    return path


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the real validator ran (the function is wrapped, not replaced)."""
    calls: list[int] = []
    real = validation.validate

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(validation, "validate", counted)
    return calls


def entries(cache: Path) -> list[Path]:
    folder = cache / "manifests"
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def assert_same(hit: LoadedManifest, miss: LoadedManifest) -> None:
    """Every field, also those ``==`` leaves out, and the line of every key path."""
    assert hit == miss
    assert (hit.manifest, hit.path, hit.base_dir, hit.digest, hit.display) == (
        miss.manifest,
        miss.path,
        miss.base_dir,
        miss.digest,
        miss.display,
    )
    assert dict(hit.locations) == dict(miss.locations)
    assert dict(hit.all_servers) == dict(miss.all_servers)
    for loc in [*miss.locations, ("branches", 0, "verify", "nothing"), ("budget", "reserve", "x"), ("nowhere",)]:
        assert hit.where(loc) == miss.where(loc)


def test_a_manifest_validated_before_is_built_from_its_entry(
    manifest: Path, env: dict[str, str], cache: Path, validations: list[int]
) -> None:
    miss = load_manifest(manifest, env)
    assert len(validations) == 1
    assert len(entries(cache)) == 1
    hit = load_manifest(manifest, env)
    assert validations == [1]  # not validated again
    assert_same(hit, miss)
    assert hit.where(("branches", 0, "verify", "fail_on", 0)) == f"{manifest}:24: branches[0].verify.fail_on[0]"
    assert hit.manifest.servers["local"].url == "http://127.0.0.1:21025"  # the validated value, not the file's


def test_where_the_file_is_comes_from_the_run_not_from_the_entry(
    manifest: Path, env: dict[str, str], tmp_path: Path, validations: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    load_manifest(manifest, env)
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "gitops.yaml").write_bytes(manifest.read_bytes())
    monkeypatch.chdir(tmp_path)
    hit = load_manifest(Path("elsewhere"), env)  # a folder means its gitops.yaml
    assert validations == [1]
    assert (hit.path, hit.base_dir, hit.display) == (
        (other / "gitops.yaml").resolve(),
        other.resolve(),
        str(Path("elsewhere/gitops.yaml")),
    )
    assert hit.where(("build",)) == f"{Path('elsewhere/gitops.yaml')}:30: build"


def test_a_changed_byte_is_a_miss(manifest: Path, env: dict[str, str], cache: Path, validations: list[int]) -> None:
    first = load_manifest(manifest, env)
    manifest.write_bytes(manifest.read_bytes().replace(b"# A comment", b"# A Comment"))
    second = load_manifest(manifest, env)
    assert len(validations) == 2
    assert len(entries(cache)) == 2
    assert second.manifest == first.manifest  # a comment changed nothing but the bytes


def _corrupt(entry: Path, how: str) -> None:
    text = entry.read_text(encoding="utf-8")
    data = json.loads(text)
    if how == "truncated":
        entry.write_text(text[: len(text) // 2], encoding="utf-8")
        return
    if how == "garbage":
        entry.write_bytes(b"\xff\x00not json")
        return
    if how == "empty":
        entry.write_bytes(b"")
        return
    if how == "other version":
        data["gitops"] = "0.0.1"
    elif how == "other format":
        data["format"] = manifestcache.FORMAT + 1
    elif how == "other rules":
        data["rules"] = "schema.py:1:1"
    elif how == "other bytes":
        data["sha256"] = "0" * 64
    elif how == "wrong type":
        data["manifest"]["branches"][0]["verify"]["ticks"] = "5"
    elif how == "bool for int":
        data["manifest"]["branches"][0]["verify"]["ticks"] = True
    elif how == "unknown field":
        data["manifest"]["servers"]["local"]["token"] = "x"
    elif how == "missing field":
        del data["manifest"]["budget"]
    elif how == "edited value":
        data["manifest"]["servers"]["local"]["url"] = "http://127.0.0.1:9"  # the digest no longer matches
    elif how == "bad literal":
        data["manifest"]["branches"][0]["activate"] = ["moon"]
    elif how == "bad locations":
        data["locations"] = [[["branches", 0.5], 3]]
    elif how == "not a mapping":
        data = [data]
    entry.write_text(json.dumps(data), encoding="utf-8")


@pytest.mark.parametrize(
    "how",
    [
        "truncated",
        "garbage",
        "empty",
        "other version",
        "other format",
        "other rules",
        "other bytes",
        "wrong type",
        "bool for int",
        "unknown field",
        "missing field",
        "edited value",
        "bad literal",
        "bad locations",
        "not a mapping",
    ],
)
def test_an_entry_that_cannot_be_used_is_a_silent_miss(
    manifest: Path,
    env: dict[str, str],
    cache: Path,
    validations: list[int],
    capsys: pytest.CaptureFixture[str],
    how: str,
) -> None:
    miss = load_manifest(manifest, env)
    (entry,) = entries(cache)
    _corrupt(entry, how)
    again = load_manifest(manifest, env)
    assert len(validations) == 2  # validated again
    assert_same(again, miss)
    assert capsys.readouterr() == ("", "")
    # ... and the entry is written afresh: the next run is a hit.
    assert_same(load_manifest(manifest, env), miss)
    assert len(validations) == 2


def test_a_changed_gitops_version_is_a_miss(
    manifest: Path, env: dict[str, str], cache: Path, validations: list[int]
) -> None:
    load_manifest(manifest, env)
    # The entry as another version of gitops wrote it (the file is the seam: no patched version string).
    (entry,) = entries(cache)
    data = json.loads(entry.read_text(encoding="utf-8"))
    data["gitops"] = "99.0.0"
    entry.write_text(json.dumps(data), encoding="utf-8")
    load_manifest(manifest, env)
    assert len(validations) == 2
    assert json.loads(entry.read_text(encoding="utf-8"))["gitops"] == gitops.__version__  # written afresh


INVALID = MANIFEST.replace("token_env: SCREEPS_TOKEN", "token: 0123456789abcdef0123456789abcdef")
INVALID_MESSAGE = "literal secrets are refused; put the token in an environment variable and name it with token_env"


def _problems(path: Path, env: dict[str, str]) -> list[str]:
    with pytest.raises(ManifestError) as caught:
        load_manifest(path, env)
    return caught.value.problems


def test_an_invalid_manifest_is_never_cached_and_always_gets_its_messages(
    manifest: Path, env: dict[str, str], cache: Path, validations: list[int]
) -> None:
    load_manifest(manifest, env)  # an entry exists, for other bytes
    (valid_entry,) = entries(cache)
    manifest.write_text(INVALID, encoding="utf-8")
    expected = [f"{manifest}:6: servers.local.token: {INVALID_MESSAGE}"]
    assert _problems(manifest, env) == expected
    assert _problems(manifest, env) == expected  # again: validated each time
    assert entries(cache) == [valid_entry]
    # An entry made for other bytes, put where the invalid bytes' entry would be, is not taken for them.
    key = hashlib.sha256(manifest.read_bytes()).hexdigest()
    (cache / "manifests" / f"{key}.json").write_bytes(valid_entry.read_bytes())
    assert _problems(manifest, env) == expected
    assert len(validations) == 4


def test_a_cache_that_cannot_be_written_is_no_error(manifest: Path, tmp_path: Path, validations: list[int]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    env = {"GITOPS_CACHE_DIR": str(blocker / "cache")}
    first = load_manifest(manifest, env)
    assert_same(load_manifest(manifest, env), first)
    assert len(validations) == 2


def test_a_folder_others_may_write_to_is_not_used(
    manifest: Path, env: dict[str, str], cache: Path, validations: list[int]
) -> None:
    load_manifest(manifest, env)
    (cache / "manifests").chmod(0o777)  # another user could have planted the entry
    load_manifest(manifest, env)
    assert len(validations) == 2
    (cache / "manifests").chmod(0o700)
    load_manifest(manifest, env)
    assert len(validations) == 2


def test_folders_and_entries_are_private(manifest: Path, env: dict[str, str], cache: Path) -> None:
    load_manifest(manifest, env)
    (entry,) = entries(cache)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert stat.S_IMODE((cache / "manifests").stat().st_mode) == 0o700
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    data = json.loads(entry.read_text(encoding="utf-8"))
    assert set(data) == {"format", "gitops", "rules", "sha256", "digest", "manifest", "locations"}
    assert [p.name for p in (cache / "manifests").iterdir()] == [entry.name]  # no temporary file left


def test_the_cache_keeps_the_most_recently_used_entries(manifest: Path, env: dict[str, str], cache: Path) -> None:
    keys = []
    for n in range(manifestcache.KEEP + 2):  # two more than it keeps (real entries, no patched limit)
        manifest.write_text(MANIFEST + f"# variant {n}\n", encoding="utf-8")
        load_manifest(manifest, env)
        keys.append(hashlib.sha256(manifest.read_bytes()).hexdigest())
        os.utime(cache / "manifests" / f"{keys[-1]}.json", ns=(n * 10**9, n * 10**9))  # distinct times
    assert [p.stem for p in entries(cache)] == sorted(keys[2:])


def test_the_cache_folder_follows_the_environment() -> None:
    assert default_cache_dir({"GITOPS_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x", "HOME": "/h"}) == Path("/c")
    assert default_cache_dir({"XDG_CACHE_HOME": "/x", "HOME": "/h"}) == Path("/x/screeps-gitops")
    assert default_cache_dir({"GITOPS_CACHE_DIR": "", "HOME": "/h"}) == Path("/h/.cache/screeps-gitops")


def test_the_suite_never_writes_the_real_cache() -> None:
    # tests/conftest.py points every process of the suite at a temporary folder.
    assert "GITOPS_CACHE_DIR" in os.environ
    assert default_cache_dir(os.environ) != default_cache_dir({"HOME": str(Path.home())})


def _fresh(code: str, env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False, env={**os.environ, **env}
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_cached_manifest_loads_without_pydantic(manifest: Path, env: dict[str, str]) -> None:
    code = textwrap.dedent(
        f"""\
        import sys
        from pathlib import Path
        from gitops.config.manifest import load_manifest
        loaded = load_manifest(Path({str(manifest)!r}))
        looked = "gitops.config.manifestcache" in sys.modules
        print(loaded.digest, "pydantic" in sys.modules, "yaml" in sys.modules, looked)
        """
    )
    digest, pydantic, yaml, looked = _fresh(code, env)
    assert (pydantic, yaml, looked) == ("True", "True", "True")  # the first run validates
    # pyyaml still parses the file: the entry is checked against it (a planted entry must not decide anything).
    assert _fresh(code, env) == [digest, "False", "True", "True"]
    assert digest == load_manifest(manifest, env).digest


def _plant(cache: Path, manifest: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Rewrite the manifest's cache entry as a build running as the player could: same key, other content."""
    (entry,) = entries(cache)
    data = json.loads(entry.read_text("utf-8"))
    change(data["manifest"])
    entry.write_text(json.dumps(data), "utf-8")


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m["servers"]["local"].__setitem__("url", "http://127.0.0.1:9"),
        lambda m: m["servers"]["local"].__setitem__("token_env", "OTHER_TOKEN"),
        lambda m: m["branches"][0].__setitem__("root", "elsewhere"),
        lambda m: m["branches"][0].__setitem__("build", "sh -c 'curl evil'"),
        lambda m: m["servers"].__setitem__("extra", dict(m["servers"]["local"], url="http://127.0.0.1:9")),
    ],
    ids=["url", "token_env", "root", "build", "extra-server"],
)
def test_an_entry_that_says_other_than_the_file_is_never_used(
    manifest: Path, env: dict[str, str], cache: Path, validations: list[int], change: Callable[[dict[str, Any]], None]
) -> None:
    """Issue 37: a pull request's build (run by a reviewer's validate) wrote an entry under main's manifest digest
    naming another url, and the next plan on main sent the token there. Every value of an entry is now checked
    against the file: a planted one is a miss, and the run validates the file instead."""
    miss = load_manifest(manifest, env)
    _plant(cache, manifest, change)
    loaded = load_manifest(manifest, env)
    assert validations == [1, 1]  # validated again
    assert_same(loaded, miss)
    assert loaded.manifest.servers["local"].url == "http://127.0.0.1:21025"
    assert set(loaded.manifest.servers) == set(miss.manifest.servers)
    # And the entry is written again from the file: the next run hits it.
    load_manifest(manifest, env)
    assert validations == [1, 1]


@pytest.mark.parametrize("example", sorted((ROOT / "examples").glob("*/gitops.yaml")), ids=lambda p: p.parent.name)
def test_every_example_manifest_hits_its_entry(
    example: Path, tmp_path: Path, env: dict[str, str], validations: list[int]
) -> None:
    """The check agrees with the validator on real manifests, so the cache still saves their validation."""
    path = tmp_path / example.parent.name / "gitops.yaml"
    path.parent.mkdir()
    path.write_bytes(example.read_bytes())
    load_manifest(path, env)
    load_manifest(path, env)
    assert validations == [1]
