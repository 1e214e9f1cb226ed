"""Seeded fuzzing of ``gitops validate``: odd YAML (tags, values, nesting, keys) ends in exit 0 or 5, never a crash.

(Or 6: a mutation can make a manifest that is valid as a manifest but names a glob that matches no file, and
that is the local code's problem, exit 6 by design; the test checks it is worded as one.)

The manifests are mutations of a valid one, written by hand (not by a YAML library) so that they can hold what a
library would never write: explicit tags on anything, values that do not fit their tag, keys of every kind, deep
and odd nesting. The same seed gives the same manifests, so a failure names one that can be replayed.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gitops.cli import run
from gitops.config.credentials import CredentialsFileError, resolve_auth
from gitops.config.manifest import ServerConfig
from gitops.errors import AuthError, GitopsError
from gitops.standin.accounts import AccountsError, load_accounts
from tests.factories import write_files

SEED = 20261122
COUNT = 6000

#: Plain words a mutation may write where a name, a root or a glob goes; each is a folder with a file of each name,
#: so that a manifest valid as a manifest is valid as code too (exit 0, not 6).
WORDS = ["main", "src", "x", "world", "sim", "keep", "remove", "local", "lib"]
SCALARS = [
    *WORDS,
    "'**/*.js'",
    "'*.js'",
    "'**/*.wasm'",
    "'.js'",
    "'.mjs'",
    "'/'",
    "'.'",
    "1",
    "0",
    "-1",
    "600",
    "1.5",
    "1e999",
    "-.inf",
    ".nan",
    "0x1F",
    "0o17",
    "1_000",
    "true",
    "no",
    "~",
    "null",
    "''",
    '"\\x00"',
    '"\\udce9"',
    '"a\\nb"',
    "2024-01-01",
    "2024-13-45",
    "2024-01-01T25:61:00Z",
    "'http://127.0.0.1:21025'",
    "'https://user:pw@screeps.com'",
    "'ftp://x'",
    "SCREEPS_TOKEN",
    "0123456789abcdef0123456789abcdef",
    "'$activeWorld'",
    "'../x'",
    "é",
    "=",
    "1" * 5000,
    "'" + "a" * 300 + "'",
]
TAGS = [
    "!!int",
    "!!float",
    "!!bool",
    "!!timestamp",
    "!!str",
    "!!null",
    "!!binary",
    "!!set",
    "!!omap",
    "!!pairs",
    "!!map",
    "!!seq",
    "!!merge",
    "!!value",
    "!!python/object:os.system",
    "!!python/object/apply:os.system",
    "!!python/name:os.system",
    "!!python/tuple",
    "!custom",
    "!",
    "!<tag:yaml.org,2002:int>",
    "!<tag:example.com,2000:x>",
]
KEYS = [
    "version",
    "servers",
    "branches",
    "budget",
    "url",
    "token_env",
    "username_env",
    "password_env",
    "credentials",
    "server",
    "branch",
    "root",
    "include",
    "exclude",
    "binary",
    "naming",
    "separator",
    "strip_suffixes",
    "activate",
    "remote_only",
    "reserve",
    "trust_own_upload_seconds",
    "'POST /api/user/code'",
    "'GET /api/user/code'",
    "token",
    "password",
    "1",
    "~",
    "true",
    "1.5",
    "2024-01-01",
    "<<",
    "[a]",
    "{a: 1}",
    "''",
]


class Tagged:
    """A node written with an explicit tag."""

    def __init__(self, tag: str, node: Any) -> None:
        self.tag, self.node = tag, node


def base() -> dict[str, Any]:
    return {
        "version": "1",
        "servers": {"local": {"url": "'http://127.0.0.1:21025'", "token_env": "SCREEPS_TOKEN"}},
        "branches": [{"server": "local", "branch": "main", "root": "src", "include": ["'**/*.js'"]}],
    }


def random_node(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth > 0 and roll < 0.15:
        return {rng.choice(KEYS): random_node(rng, depth - 1) for _ in range(rng.randint(0, 3))}
    if depth > 0 and roll < 0.3:
        return [random_node(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    if roll < 0.45:
        return Tagged(rng.choice(TAGS), random_node(rng, depth - 1) if depth > 0 else rng.choice(SCALARS))
    return rng.choice(SCALARS)


def containers(node: Any) -> list[Any]:
    found: list[Any] = []
    stack = [node]
    while stack:
        here = stack.pop()
        if isinstance(here, Tagged):
            stack.append(here.node)
        elif isinstance(here, dict | list):
            found.append(here)
            stack.extend(here.values() if isinstance(here, dict) else here)
    return found


def mutate(rng: random.Random, doc: dict[str, Any]) -> None:
    target = rng.choice(containers(doc))
    what = rng.random()
    if isinstance(target, dict):
        keys = list(target)
        if keys and what < 0.45:
            key = rng.choice(keys)
            target[key] = random_node(rng, rng.randint(0, 3))
        elif keys and what < 0.6:
            key = rng.choice(keys)
            target[key] = Tagged(rng.choice(TAGS), target[key])
        elif keys and what < 0.7:
            del target[rng.choice(keys)]
        else:
            target[rng.choice(KEYS)] = random_node(rng, rng.randint(0, 2))
    elif target and what < 0.6:
        target[rng.randrange(len(target))] = random_node(rng, rng.randint(0, 3))
    elif target and what < 0.7:
        i = rng.randrange(len(target))
        target[i] = Tagged(rng.choice(TAGS), target[i])
    else:
        target.append(random_node(rng, rng.randint(0, 2)))


def flow(node: Any) -> str:
    if isinstance(node, Tagged):
        return f"{node.tag} {flow(node.node)}"
    if isinstance(node, dict):
        return "{" + ", ".join(f"{key}: {flow(value)}" for key, value in node.items()) + "}"
    if isinstance(node, list):
        return "[" + ", ".join(flow(item) for item in node) + "]"
    return str(node)


def block(node: Any, indent: int) -> str:
    """Block style for mappings and lists without tags, flow style below the first tag."""
    pad = " " * indent
    if isinstance(node, dict) and node:
        return "".join(
            f"{pad}{key}:\n{block(value, indent + 2)}"
            if isinstance(value, dict | list) and value
            else f"{pad}{key}: {flow(value)}\n"
            for key, value in node.items()
        )
    if isinstance(node, list) and node:
        return "".join(f"{pad}-\n{block(item, indent + 2)}" for item in node)
    return f"{pad}{flow(node)}\n"


#: Characters a file may hold that YAML does not allow (C0 controls, DEL, C1, NUL), and odd ones it does (a BOM,
#: NEL, a line or paragraph separator), and a lone surrogate (written as the bytes Python's surrogatepass gives).
CONTROL = [*(chr(c) for c in range(0x20) if c not in (0x09, 0x0A, 0x0D)), "\x7f", "\x80", "\x9f", "\ufeff", "\x85"]
CONTROL += ["\u2028", "\u2029", "\ud800", "\udfff"]


def with_control_characters(rng: random.Random, text: str) -> str:
    """Sometimes a control character somewhere: in a key, a value, a comment or between lines."""
    roll = rng.random()
    if roll < 0.15:
        at = rng.randrange(len(text) + 1)
        return text[:at] + rng.choice(CONTROL) + text[at:]
    if roll < 0.25:
        lines = text.split("\n")
        at = rng.randrange(len(lines))
        lines.insert(at, f"# comment {rng.choice(CONTROL)} here")
        return "\n".join(lines)
    return text


def manifest_text(rng: random.Random) -> str:
    doc = base()
    for _ in range(rng.choice([0, 1, 1, 2, 3, 5])):
        mutate(rng, doc)
    return with_control_characters(rng, block(doc, 0) if rng.random() < 0.6 else flow(doc) + "\n")


@pytest.fixture
def code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("GITOPS_MANIFEST", "GITOPS_REF", "SCREEPS_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    files: dict[str, str | bytes] = {}
    for folder in WORDS:
        files[f"{folder}/main.js"] = "module.exports.loop = () => {};\n"
        files.update({f"{folder}/{name}.js": "" for name in WORDS if name != "main"})
    write_files(tmp_path, files)
    return tmp_path


def test_generated_manifests_end_in_exit_0_or_5(code: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(SEED)
    seen: dict[int, int] = {}
    for n in range(COUNT):
        text = manifest_text(rng)
        (code / "gitops.yaml").write_bytes(text.encode("utf-8", "surrogatepass"))
        exit_code = run(["validate"])
        out, err = capsys.readouterr()
        assert exit_code in (0, 5, 6), f"manifest {n} of seed {SEED} ended in exit {exit_code}:\n{text}\n{err}"
        assert "Traceback" not in err + out, f"manifest {n} of seed {SEED}:\n{text}\n{err}"
        if exit_code == 5:
            assert err.startswith("Error: manifest gitops.yaml is invalid ("), f"manifest {n}:\n{text}\n{err}"
        if exit_code == 6:
            assert err.startswith("Error: the local code from the working tree cannot be deployed"), f"{n}: {err}"
        seen[exit_code] = seen.get(exit_code, 0) + 1
    # Both outcomes are reached: the mutations neither leave every manifest valid nor break every one.
    assert seen.get(0, 0) > COUNT // 50
    assert seen.get(5, 0) > COUNT // 2
    assert seen.get(6, 0) < COUNT // 20


def test_the_same_odd_yaml_in_the_accounts_and_credentials_files_is_reported_not_raised(tmp_path: Path) -> None:
    # The three files share one reader: what cannot crash the manifest cannot crash the other two either.
    rng = random.Random(SEED + 1)
    accounts, credentials = tmp_path / "accounts.yaml", tmp_path / ".screeps.yaml"
    env = {"HOME": str(tmp_path / "home"), "SCREEPS_CONFIG": str(credentials)}
    server = ServerConfig(url="http://127.0.0.1:21025", credentials="local")
    for n in range(COUNT // 4):
        text = manifest_text(rng)
        accounts.write_bytes(text.replace("branches", "users").encode("utf-8", "surrogatepass"))
        error = refusal(lambda: load_accounts(accounts))
        if error is not None:
            assert isinstance(error, AccountsError), f"{n}: {error!r}"
            assert error.exit_code == 4
            assert all(p.startswith(str(accounts)) for p in error.problems), f"{n}: {error}"
        credentials.write_bytes(
            text.replace("servers", "servers" if n % 2 else "nope").encode("utf-8", "surrogatepass")
        )
        error = refusal(lambda: resolve_auth("local", server, env, cwd=tmp_path))
        if error is None:  # a mutation may make a usable entry (token: '*.js' under servers.local)
            continue
        assert isinstance(error, AuthError), f"{n}: {error!r}"
        assert error.exit_code == 7
        if isinstance(error, CredentialsFileError):
            assert all(p.startswith(str(credentials)) for p in error.problems), f"{n}: {error}"


def refusal(call: Callable[[], object]) -> GitopsError | None:
    """The tool's error from ``call`` (any other exception fails the test), or ``None``."""
    try:
        call()
    except GitopsError as exc:
        return exc
    return None
