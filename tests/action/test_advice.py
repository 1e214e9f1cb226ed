"""Issue 45: every hint and page gives only advice the tool accepts.

The tool's messages that tell a CI user where a credential goes (the credentials module's hint, the Action's
missing-secret warning, its refusals and its input errors) and every page of the docs, the README, ``action.yml`` and
the example workflows are collected, and each Action input or environment route they name is checked:

* the input is one of ``action.yml``'s, and not a deprecated one unless the text says it is the old name;
* no sentence advises the step's ``env:`` for a secret (the Action refuses that with exit code 13), and no workflow
  snippet gives a secret to the screeps-gitops step or its job through ``env:``;
* each message's advice is then *followed*: its ``input: value`` spans become the step's inputs, in the situation
  that produced the message, and the Action's own checks run on them (the inputs read, the step-environment
  refusal, the credentials resolved): advice that would end in exit code 13, 7 or a usage error fails here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops.config.credentials import resolve_auth
from gitops.config.manifest import load_manifest
from gitops.errors import GitopsError, TrustError, UsageError
from gitops.github.inputs import INPUT_ENV, Inputs
from gitops.github.trust import missing_secret_message, refuse_credentials_from_the_step_env
from gitops.secrets import Secret

ROOT = Path(__file__).resolve().parents[2]
ACTION_INPUTS: dict[str, dict[str, Any]] = yaml.safe_load((ROOT / "action.yml").read_text("utf-8"))["inputs"]
DEPRECATED = {name for name, spec in ACTION_INPUTS.items() if spec.get("deprecationMessage")}
#: Words with which a text may name a deprecated input: it says that it is one, or tells to remove it.
SAYS_DEPRECATED = re.compile(r"old name|deprecat|remove", re.IGNORECASE)
#: Words with which a sentence may name the step's ``env:``: to warn against it, never to advise it.
WARNS = re.compile(r"\b(never|not|refused|refuses|remove|instead|nor|no)\b", re.IGNORECASE)

#: A sentence that names ``env:`` to say a secret there was refused, or to remove it.
SAYS_REFUSED = re.compile(r"refused|not used|remove", re.IGNORECASE)
#: ``name: value`` in a code span: an input as a workflow's ``with:`` gives it.
_SPAN = re.compile(r"`([a-z][a-z0-9_-]*):(?: ([^`]*))?`")
#: More lines of the ``credentials`` input: ``NAME=${{ secrets.NAME }}``.
_LINE = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*=\$\{\{[^`]*\}\})`")
#: Inputs named in prose: ``input 'token'``, ``inputs 'a' and 'b'``, ``the action's `x` input``, ``the `x` input``.
_PROSE = re.compile(r"inputs? '([a-z-]+)'(?: and '([a-z-]+)')?|`([a-z][a-z0-9-]*)` input\b")
_EXPRESSION = re.compile(r"\$\{\{\s*(?:secrets|vars)\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
#: Inputs that carry a credential's value (the rest name variables or steer the run).
_VALUE_INPUTS = {"screeps-token", "token", "username", "password", "credentials"}


def inputs_named(text: str) -> list[str]:
    """The Action inputs ``text`` names, as a ``with:`` span or in prose (not manifest keys such as ``token_env``,
    nor the credentials file's ``token``: those are neither spans with a colon nor called inputs)."""
    named = [m.group(1) for m in _SPAN.finditer(text) if _is_input_span(m)]
    for m in _PROSE.finditer(text):
        named += [name for name in m.groups() if name]
    return named


def _is_input_span(match: re.Match[str]) -> bool:
    # A value given from an expression, a variable's name given to a `*-env` input, or an input named alone
    # (`screeps-token:`): not the manifest's keys (`token_env: X`) or the credentials file's (`token: !!int x`).
    name, value = match.group(1), match.group(2)
    return "${{" in (value or "") or name.endswith("-env") or (value is None and name in ACTION_INPUTS)


def sentences(text: str) -> Iterator[str]:
    yield from (s for s in re.split(r"(?<=[.;:!?])\s+(?=[A-Z(`])|\n\s*\n", text) if s.strip())


def check_text(where: str, text: str) -> list[str]:
    """What is wrong with the advice of ``text`` as a page or a message says it."""
    problems: list[str] = []
    for sentence in sentences(text):
        for name in inputs_named(sentence):
            if name not in ACTION_INPUTS:
                problems.append(f"{where}: names the input '{name}', which action.yml does not have: {sentence!r}")
            elif name in DEPRECATED and not SAYS_DEPRECATED.search(sentence):
                problems.append(f"{where}: advises the deprecated input '{name}': {sentence!r}")
        env = re.search(r"(?<![\w-])env:", sentence)
        if env and not WARNS.search(sentence[: env.start()]) and not SAYS_REFUSED.search(sentence):
            problems.append(f"{where}: advises the step's env: (refused with exit code 13): {sentence!r}")
    return problems


# --- the pages ------------------------------------------------------------------------------------------------


def pages() -> list[Path]:
    return [
        ROOT / "README.md",
        ROOT / "action.yml",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "examples" / "workflows").glob("*.yml")),
    ]


def prose(path: Path) -> str:
    """A page's prose, with the messages it quotes in fenced blocks; without its YAML blocks (checked as YAML)."""
    text = path.read_text("utf-8")
    if path.suffix == ".yml":
        return "\n\n".join(_descriptions(yaml.safe_load(text)))
    return re.sub(r"^```ya?ml\n.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def _descriptions(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("description", "deprecationMessage") and isinstance(value, str):
                yield value
            else:
                yield from _descriptions(value)
    elif isinstance(node, list):
        for value in node:
            yield from _descriptions(value)


def workflows() -> Iterator[tuple[str, Any]]:
    """Every workflow or step list a page shows: the example workflows, and the docs' YAML blocks."""
    for path in pages():
        if path.suffix == ".yml" and path.name != "action.yml":
            yield path.name, yaml.safe_load(path.read_text("utf-8"))
        elif path.suffix == ".md":
            for number, block in enumerate(re.findall(r"^```ya?ml\n(.*?)^```", path.read_text("utf-8"), re.M | re.S)):
                try:
                    yield f"{path.name} block {number + 1}", yaml.safe_load(_dedent(block))
                except yaml.YAMLError:
                    continue  # a fragment (`- if: ...` lines cut from a step): its spans are checked as prose


def _dedent(block: str) -> str:
    lines = block.splitlines()
    indent = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    return "\n".join(line[indent:] for line in lines)


def gitops_steps(node: Any, job_env: dict[str, Any] | None = None) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each step that uses the screeps-gitops action, with the ``env:`` its job gives every step."""
    if isinstance(node, dict):
        if isinstance(node.get("uses"), str) and "screeps-gitops" in node["uses"]:
            yield node, job_env or {}
        env = node.get("env") if isinstance(node.get("steps"), list) else job_env
        for value in node.values():
            yield from gitops_steps(value, env if isinstance(env, dict) else job_env)
    elif isinstance(node, list):
        for value in node:
            yield from gitops_steps(value, job_env)


def test_every_page_names_only_inputs_the_action_has_and_never_advises_env() -> None:
    problems = [problem for path in pages() for problem in check_text(path.name, prose(path))]
    assert problems == []


def test_every_workflow_a_page_shows_gives_secrets_through_inputs_only() -> None:
    steps = 0
    problems: list[str] = []
    for where, document in workflows():
        for step, job_env in gitops_steps(document):
            steps += 1
            for name in step.get("with") or {}:
                if name not in ACTION_INPUTS:
                    problems.append(f"{where}: input '{name}' is not in action.yml")
                elif name in DEPRECATED:
                    problems.append(f"{where}: the deprecated input '{name}'")
            for env in (step.get("env") or {}, job_env):
                problems += [
                    f"{where}: the secret of {name} in env: (refused with exit code 13)"
                    for name, value in env.items()
                    if "secrets." in str(value)
                ]
    assert steps >= 6, "the collector found the examples' screeps-gitops steps"
    assert problems == []


def test_the_checks_find_the_old_advice() -> None:
    """The checks would have failed the hint that gave the refused routes (it said both)."""
    old = (
        "Set SCREEPS_TOKEN in the environment; in GitHub Actions pass the repository secret to the action's `token` "
        "input (`token: ${{ secrets.SCREEPS_TOKEN }}`) or to the step's `env:` (secrets are not given to pull "
        "requests from forks: plan those with --refresh=never)."
    )
    problems = check_text("old hint", old)
    assert any("deprecated input 'token'" in p for p in problems), problems
    assert any("advises the step's env:" in p for p in problems), problems
    assert check_text("typo", "pass it as `screeps_token: ${{ secrets.X }}`") != []


# --- the messages, followed ---------------------------------------------------------------------------------


SCENARIOS: list[tuple[str, dict[str, str], dict[str, str]]] = [
    # (name, the server's credential fields, the step's environment that produced the message)
    ("token", {"token_env": "SCREEPS_TOKEN"}, {}),
    ("token under another name", {"token_env": "SEASON_TOKEN"}, {}),
    ("account", {"username_env": "SCREEPS_USERNAME", "password_env": "SCREEPS_PASSWORD"}, {}),
    ("account under other names", {"username_env": "PLAYER", "password_env": "PLAYER_PASSWORD"}, {}),
    ("password missing", {"username_env": "PLAYER", "password_env": "PLAYER_PASSWORD"}, {"PLAYER": "alice"}),
]


def _manifest(tmp_path: Path, fields: dict[str, str]) -> Path:
    (tmp_path / "src").mkdir(exist_ok=True)
    url = "https://screeps.com" if "token_env" in fields else "http://127.0.0.1:21025"
    data = {
        "version": 1,
        "servers": {"main": {"url": url, **fields}},
        "branches": [{"server": "main", "branch": "default", "root": "src"}],
    }
    path = tmp_path / "gitops.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), "utf-8")
    return path


def messages(tmp_path: Path, fields: dict[str, str], env: dict[str, str]) -> list[tuple[str, str, dict[str, str]]]:
    """Every message the tool gives about this server's credentials in this situation, with the step's environment
    its advice is followed in (the refusal's: the user name, which env: may hold, stays; the secret is removed)."""
    loaded = load_manifest(_manifest(tmp_path, fields))
    config = loaded.manifest.servers["main"]
    out = [("the Action's missing-secret warning", missing_secret_message(loaded.manifest, ["main"]), env)]
    with pytest.raises(GitopsError) as missing:
        resolve_auth("main", config, env, cwd=tmp_path)
    out.append(("the credentials' hint", missing.value.hint or "", env))
    secret_field = config.token_env or config.password_env
    assert secret_field is not None
    user = {config.username_env: "alice"} if config.username_env else {}
    with pytest.raises(TrustError) as refused:
        refuse_credentials_from_the_step_env(loaded, ["main"], Inputs.from_env({}), {secret_field: "x" * 16, **user})
    out.append(("the step-env refusal", str(refused.value), {**env, **user}))
    return out


def followed(text: str, scenario_env: dict[str, str]) -> Iterator[dict[str, str]]:
    """The step's environment of each way ``text`` advises: its inputs' spans with a value, secrets filled in."""
    spans = [(m.group(1), m.group(2)) for m in _SPAN.finditer(text) if m.group(2) and _is_input_span(m)]
    names = [(n, v) for n, v in spans if n not in _VALUE_INPUTS]
    values = [(n, v) for n, v in spans if n in _VALUE_INPUTS and n != "credentials"]
    routes = [values] if values else []
    lines = [v for n, v in spans if n == "credentials"] + [m.group(1) for m in _LINE.finditer(text)]
    if lines:
        routes.append([("credentials", "\n".join(lines))])
    for route in routes:
        env = dict(scenario_env)
        for name, value in [*route, *names]:
            env[INPUT_ENV[name]] = _EXPRESSION.sub(lambda m: f"fake-{m.group(1).lower()}-0123456789", value)
        yield env


@pytest.mark.parametrize(("name", "fields", "env"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_each_message_is_advice_the_action_accepts(
    name: str, fields: dict[str, str], env: dict[str, str], tmp_path: Path
) -> None:
    loaded = load_manifest(_manifest(tmp_path, fields))
    config = loaded.manifest.servers["main"]
    for where, text, situation in messages(tmp_path, fields, env):
        assert check_text(where, text) == []
        routes = list(followed(text, situation))
        if where == "the step-env refusal":
            assert routes, f"{where} gives a route to follow: {text!r}"
        else:
            assert len(routes) >= 1, f"{where} says which inputs to set: {text!r}"
        for step_env in routes:
            try:
                inputs = Inputs.from_env(step_env)
                assert inputs.warnings == [], f"{where}: following it warns: {inputs.warnings}"
                refuse_credentials_from_the_step_env(loaded, ["main"], inputs, step_env)
                tool_env = {**step_env}
                tool_env.update({k: v.reveal() if isinstance(v, Secret) else v for k, v in inputs.credentials.items()})
                resolve_auth("main", config, tool_env, cwd=tmp_path)
            except (UsageError, TrustError, GitopsError) as exc:
                pytest.fail(f"{where}: following {text!r} ends in exit {exc.exit_code}: {exc}")
