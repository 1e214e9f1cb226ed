"""A small Actions runner for ``action.yml``: its composite steps, run as GitHub's runner runs them.

What the real runner does and this one does too:

* inputs: the defaults of ``action.yml`` (``${{ github.token }}`` included), overridden by ``with``;
* ``${{ ... }}`` expressions in ``env``, ``with``, ``if`` and ``run`` (the subset ``action.yml`` uses: contexts
  ``inputs``, ``steps``, ``github``, ``runner``; ``==``, ``!=``, ``&&``, ``||``, ``!``; ``always()``, ``success()``);
* per step a fresh ``GITHUB_OUTPUT`` and ``GITHUB_STEP_SUMMARY`` file, parsed after the step; a failed step skips
  the rest unless their ``if`` says ``always()``;
* per step a fresh ``GITHUB_ENV`` and ``GITHUB_PATH`` file, read after the step: what it adds reaches every later
  step (over the job's variables, under a step's own ``env:``; a path is put first on ``PATH``);
* ``run`` steps under ``bash --noprofile --norc -eo pipefail``, with the job's ``GITHUB_*``/``RUNNER_*`` variables.

What it stands in for: ``actions/setup-python`` (answers this interpreter), ``astral-sh/setup-uv`` (answers the
``uv`` on PATH, if any: the install step is a stand-in too), ``actions/cache/restore`` and
``actions/cache/save`` (a folder of snapshots with GitHub's key rules: exact key, else the newest key with a
``restore-keys`` prefix; saving an existing key is refused with a warning, saving a path that is not there too),
and the ``install`` step (the tool is already installed in this virtual environment; uv would need the network:
bench/action_install.sh runs that step's commands for real). With ``uv`` given, ``astral-sh/setup-uv`` answers that
program instead and the ``install`` step's own script runs (tests/action/test_action_isolation.py's stand-in for
uv). With ``in_process`` the ``run`` step runs ``gitops action`` in this process (``gitops.cli.run``), so a test
can give the GitHub client a MockTransport and the tool the stand-in's clock; its environment is still exactly the
one the step declares.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
ACTION_YML = ROOT / "action.yml"

#: Variables of the test process that must not leak into a simulated job.
_JOB_PREFIXES = ("GITHUB_", "RUNNER_", "INPUT_", "GITOPS_", "SCREEPS_", "ACTIONS_")


def read_outputs(text: str) -> dict[str, str]:
    """Parse a ``GITHUB_OUTPUT`` file as the runner does (both ``name=value`` and heredoc forms)."""
    out: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            value: list[str] = []
            while i < len(lines) and lines[i] != delimiter:
                value.append(lines[i])
                i += 1
            if i >= len(lines):
                raise ValueError(f"output {name!r}: no closing delimiter {delimiter!r}")
            i += 1
            out[name] = "\n".join(value)
        else:
            name, _, rest = line.partition("=")
            out[name] = rest
    return out


def load_action() -> dict[str, Any]:
    data = yaml.safe_load(ACTION_YML.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


# --- expressions -------------------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<op>==|!=|&&|\|\||!|\(|\))|(?P<name>[A-Za-z_][\w.\-]*(?:\(\))?))"
)


def evaluate(expression: str, contexts: Mapping[str, Any], *, status: str) -> Any:
    """Evaluate a GitHub expression of the subset above."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = expression.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"unsupported expression: {expression!r}")
        kind = m.lastgroup
        assert kind is not None
        tokens.append((kind, m.group(kind)))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    parser = _Parser(tokens, contexts, status)
    value = parser.parse_or()
    if parser.i != len(tokens):
        raise ValueError(f"unsupported expression: {expression!r}")
    return value


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]], contexts: Mapping[str, Any], status: str) -> None:
        self.tokens, self.contexts, self.status, self.i = tokens, contexts, status, 0

    def peek(self) -> str | None:
        return self.tokens[self.i][1] if self.i < len(self.tokens) else None

    def parse_or(self) -> Any:
        left = self.parse_and()
        while self.peek() == "||":
            self.i += 1
            right = self.parse_and()
            left = left or right
        return left

    def parse_and(self) -> Any:
        left = self.parse_cmp()
        while self.peek() == "&&":
            self.i += 1
            right = self.parse_cmp()
            left = left and right
        return left

    def parse_cmp(self) -> Any:
        left = self.parse_unary()
        while self.peek() in ("==", "!="):
            op = self.tokens[self.i][1]
            self.i += 1
            right = self.parse_unary()
            equal = str(left).lower() == str(right).lower()  # GitHub compares strings case-insensitively
            left = equal if op == "==" else not equal
        return left

    def parse_unary(self) -> Any:
        kind, value = self.tokens[self.i]
        self.i += 1
        if value == "!":
            return not self.parse_unary()
        if value == "(":
            inner = self.parse_or()
            assert self.peek() == ")"
            self.i += 1
            return inner
        if kind == "str":
            return value[1:-1].replace("''", "'")
        if value.endswith("()"):
            return {
                "always()": True,
                "success()": self.status == "success",
                "failure()": self.status == "failure",
                "cancelled()": False,
            }[value]
        head, *rest = value.split(".")
        current: Any = self.contexts[head]
        for part in rest:
            current = current.get(part, "") if isinstance(current, Mapping) else ""
        return current


def substitute(text: str, contexts: Mapping[str, Any], *, status: str = "success") -> str:
    """``${{ ... }}`` replaced by its value, as the runner does in ``env``, ``with`` and ``run``."""

    def value(m: re.Match[str]) -> str:
        result = evaluate(m.group(1), contexts, status=status)
        if isinstance(result, bool):
            return str(result).lower()
        return "" if result is None else str(result)

    return re.sub(r"\$\{\{(.*?)\}\}", value, text)


# --- the cache service -------------------------------------------------------------------------------------------


@dataclass
class CacheStore:
    """What ``actions/cache`` keeps between runs: snapshots of a folder by key, newest last."""

    root: Path
    keys: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: Every restore asked for, (the key asked for, the key found or None), in order: what each job unpacked.
    restores: list[tuple[str, str | None]] = field(default_factory=list)

    def restore(self, path: Path, key: str, restore_keys: list[str]) -> str | None:
        found = key if key in self.keys else None
        if found is None:
            for prefix in restore_keys:
                matches = [k for k in self.keys if k.startswith(prefix)]
                if matches:
                    found = matches[-1]
                    break
        self.restores.append((key, found))
        if found is not None:
            path.mkdir(parents=True, exist_ok=True)
            entry = self.root / _safe(found)
            shutil.copytree(entry, path, dirs_exist_ok=True, ignore=shutil.ignore_patterns(ABSOLUTE))
            if (entry / ABSOLUTE).is_dir():
                # actions/cache/restore extracts with tar -P: a crafted entry's absolute member names are written
                # where they point, outside the path the job asked for.
                shutil.copytree(entry / ABSOLUTE, Path("/"), dirs_exist_ok=True)
        return found

    def put(self, path: Path, key: str) -> None:
        """An entry saved under ``key`` over any there (the newest now): what a forger with the cache token leaves."""
        shutil.rmtree(self.root / _safe(key), ignore_errors=True)
        self.keys = [k for k in self.keys if k != key]
        assert self.save(path, key)

    def save(self, path: Path, key: str) -> bool:
        if not key:
            raise AssertionError("actions/cache/save needs a key")
        if key in self.keys:
            self.warnings.append(f"Failed to save: Unable to reserve cache with key {key}")
            return False
        shutil.copytree(path, self.root / _safe(key))
        self.keys.append(key)
        return True


#: In an entry of :class:`CacheStore`: files under this folder stand for a crafted tar's absolute member names
#: (``ABSOLUTE/tmp/x`` is written at ``/tmp/x``), which ``tar -P`` writes where they point.
ABSOLUTE = "tar-P-absolute"


def _scalar(value: object) -> str:
    """A YAML scalar as the runner reads it: ``false`` is the string "false"."""
    if isinstance(value, bool):
        return str(value).lower()
    return "" if value is None else str(value)


def _safe(key: str) -> str:
    return re.sub(r"[^\w.-]", "_", key)


# --- the runner --------------------------------------------------------------------------------------------------


@dataclass
class _Carried:
    """What steps wrote to ``GITHUB_ENV`` and ``GITHUB_PATH``, for the steps after them."""

    env: dict[str, str] = field(default_factory=dict)
    path: list[str] = field(default_factory=list)

    def take(self, step_env: Mapping[str, str]) -> None:
        if "GITHUB_ENV" in step_env:
            self.env.update(read_outputs(Path(step_env["GITHUB_ENV"]).read_text(encoding="utf-8")))
        if "GITHUB_PATH" in step_env:
            added = Path(step_env["GITHUB_PATH"]).read_text(encoding="utf-8").splitlines()
            self.path[:0] = reversed([line for line in added if line.strip()])

    def over(self, env: Mapping[str, str]) -> dict[str, str]:
        """The job's variables with what earlier steps added (a step's own ``env:`` goes over these)."""
        out = {**env, **self.env}
        if self.path:
            out["PATH"] = os.pathsep.join([*self.path, out.get("PATH", "")])
        return out


@dataclass
class StepRun:
    id: str
    outcome: str  # success, failure, skipped
    outputs: dict[str, str]
    summary: str
    stdout: str
    stderr: str
    env: dict[str, str]


@dataclass
class ActionRun:
    """One use of the action in one job."""

    steps: dict[str, StepRun]
    outputs: dict[str, str]
    outcome: str
    runner_temp: Path

    @property
    def summary(self) -> str:
        return "".join(s.summary for s in self.steps.values())

    @property
    def stdout(self) -> str:
        return "".join(s.stdout for s in self.steps.values())

    @property
    def stderr(self) -> str:
        return "".join(s.stderr for s in self.steps.values())


@dataclass
class InProcess:
    """Run the ``run`` step inside this process: ``gitops.cli.run(["action"], clock=clock)`` within ``wrap``."""

    clock: Any = None
    github_transport: Any = None
    #: Seconds each request to GitHub may take (the client's own default when None).
    github_timeout: float | None = None


class Runner:
    """One simulated job (a fresh ``RUNNER_TEMP``) per :meth:`use` call; the cache store outlives jobs."""

    def __init__(
        self,
        workspace: Path,
        scratch: Path,
        job_env: Mapping[str, str],
        cache: CacheStore,
        *,
        github_token: str,
        uv: Path | None = None,
    ) -> None:
        self.workspace = workspace
        self.uv = uv
        self.scratch = scratch
        self.job_env = dict(job_env)
        self.cache = cache
        self.github_token = github_token
        self.jobs = 0

    def base_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(_JOB_PREFIXES) or k == "GITOPS_CACHE_DIR"}
        env.update(self.job_env)
        return env

    def use(
        self,
        with_: Mapping[str, str],
        *,
        job_env: Mapping[str, str] | None = None,
        in_process: InProcess | None = None,
    ) -> ActionRun:
        """Run the action's steps as ``uses: ./`` with ``with_`` in a new job (``job_env``: its event etc.)."""
        self.jobs += 1
        temp = self.scratch / f"job{self.jobs}" / "runner-temp"
        temp.mkdir(parents=True)
        env = self.base_env()
        env.update(job_env or {})
        env.update(
            {
                "RUNNER_TEMP": str(temp),
                "GITHUB_RUN_ID": str(4000 + self.jobs),
                "GITHUB_RUN_ATTEMPT": "1",
                "GITHUB_ACTION_PATH": str(ROOT),
                "GITHUB_WORKSPACE": str(self.workspace),
            }
        )
        action = load_action()
        inputs: dict[str, str] = {}
        github = {
            "token": self.github_token,
            "action_path": str(ROOT),
            "run_id": env["GITHUB_RUN_ID"],
            "workspace": str(self.workspace),
        }
        contexts: dict[str, Any] = {"github": github, "runner": {"temp": str(temp)}, "steps": {}, "inputs": inputs}
        for name, spec in action["inputs"].items():
            inputs[name] = substitute(_scalar(spec.get("default", "")), contexts)
        for name, value in with_.items():
            assert name in action["inputs"], f"input {name!r} is not declared in action.yml"
            inputs[name] = value
        status = "success"
        steps: dict[str, StepRun] = {}
        carried = _Carried()
        for index, step in enumerate(action["runs"]["steps"]):
            step_id = step.get("id") or f"step{index}"
            condition = str(step.get("if", "success()"))
            if not re.search(r"\b(always|success|failure|cancelled)\(\)", condition):
                condition = f"success() && ({condition})"  # as GitHub: no status function means success() too
            if not evaluate(condition.replace("${{", "").replace("}}", ""), contexts, status=status):
                steps[step_id] = StepRun(step_id, "skipped", {}, "", "", "", {})
                contexts["steps"][step_id] = {"outputs": {}, "outcome": "skipped"}
                continue
            step_dir = self.scratch / f"job{self.jobs}" / step_id
            step_dir.mkdir()
            result = self._step(step, step_id, step_dir, carried.over(env), contexts, status, in_process)
            steps[step_id] = result
            carried.take(result.env)
            contexts["steps"][step_id] = {"outputs": result.outputs, "outcome": result.outcome}
            if result.outcome == "failure":
                status = "failure"
        outputs = {
            name: substitute(str(spec["value"]), contexts, status=status) for name, spec in action["outputs"].items()
        }
        return ActionRun(steps, outputs, status, temp)

    def workflow_job(self, workflow: Path, job: str, *, job_env: Mapping[str, str] | None = None) -> dict[str, Path]:
        """Run a job of an example workflow made of cache restores, ``run`` steps and artifact uploads only (the
        credential-free job of drift.yml and unlock.yml that hands the ledger on): its artifacts by name, each a folder
        laid out as actions/download-artifact lays out an upload of one folder."""
        self.jobs += 1
        base = self.scratch / f"job{self.jobs}"
        temp, cwd, artifacts = base / "runner-temp", base / "no-checkout", base / "artifacts"
        for folder in (temp, cwd, artifacts):
            folder.mkdir(parents=True)
        env = {**self.base_env(), **(job_env or {}), "RUNNER_TEMP": str(temp)}
        contexts: dict[str, Any] = {"runner": {"temp": str(temp)}, "steps": {}, "github": {}, "inputs": {}}
        spec = yaml.safe_load(workflow.read_text(encoding="utf-8"))["jobs"][job]
        out: dict[str, Path] = {}
        for index, step in enumerate(spec["steps"]):
            step_id = step.get("id") or f"step{index}"
            with_ = {k: substitute(_scalar(v), contexts) for k, v in (step.get("with") or {}).items()}
            uses, outputs = str(step.get("uses", "")), {}
            if uses.startswith("actions/cache/restore@"):
                outputs = self._uses(uses, step_id, with_).outputs
            elif uses.startswith("actions/upload-artifact@"):
                out[with_["name"]] = shutil.copytree(with_["path"], artifacts / with_["name"])
            elif "run" in step:
                script = base / f"{step_id}.sh"
                script.write_text(substitute(str(step["run"]), contexts), encoding="utf-8")
                step_env = {**env, **{k: substitute(_scalar(v), contexts) for k, v in (step.get("env") or {}).items()}}
                done = run_bash(script, cwd=cwd, env=step_env)
                assert done.returncode == 0, f"{job}/{step_id}: {done.stdout}{done.stderr}"
            else:  # pragma: no cover - a new step in the workflow's job needs a stand-in here
                raise AssertionError(f"{workflow.name} {job}: no stand-in for {uses or step}")
            contexts["steps"][step_id] = {"outputs": outputs, "outcome": "success"}
        return out

    def _step(
        self,
        step: Mapping[str, Any],
        step_id: str,
        step_dir: Path,
        env: Mapping[str, str],
        contexts: Mapping[str, Any],
        status: str,
        in_process: InProcess | None,
    ) -> StepRun:
        with_ = {k: substitute(_scalar(v), contexts, status=status) for k, v in (step.get("with") or {}).items()}
        uses = step.get("uses")
        if uses is not None:
            return self._uses(str(uses), step_id, with_)
        step_env = dict(env)
        step_env.update(
            {k: substitute(_scalar(v), contexts, status=status) for k, v in (step.get("env") or {}).items()}
        )
        output, summary = step_dir / "output", step_dir / "summary"
        output.touch()
        summary.touch()
        step_env["GITHUB_OUTPUT"] = str(output)
        step_env["GITHUB_STEP_SUMMARY"] = str(summary)
        step_env["GITHUB_ENV"] = str(step_dir / "env")
        step_env["GITHUB_PATH"] = str(step_dir / "path")
        for name in ("GITHUB_ENV", "GITHUB_PATH"):
            Path(step_env[name]).touch()
        assert step.get("shell") == "bash", f"step {step_id}: composite run steps must name their shell"
        script = substitute(str(step["run"]), contexts, status=status)
        if step_id == "install" and self.uv is None:
            # Stands in for "python -m venv; pip install $ACTION_PATH": this interpreter already has the tool.
            assert '"$ACTION_PATH"' in script
            output.write_text(f"gitops={Path(sys.executable).parent / 'gitops'}\n", encoding="utf-8")
            assert "--require-hashes" in script
            cache = Path(step_env["UV_CACHE_DIR"])  # what uv leaves there, for the cache steps around this one
            cache.mkdir(parents=True, exist_ok=True)
            (cache / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n", encoding="utf-8")
            code, out, err = 0, "", ""
        elif step_id == "run" and in_process is not None:
            assert script.strip().endswith('"$GITOPS_BIN" action'), script
            code, out, err = _run_in_process(step_env, in_process, cwd=self.workspace)
        else:
            script_file = step_dir / "script.sh"
            script_file.write_text(script, encoding="utf-8")
            done = run_bash(script_file, cwd=self.workspace, env=step_env)
            code, out, err = done.returncode, done.stdout, done.stderr
        return StepRun(
            step_id,
            "success" if code == 0 else "failure",
            read_outputs(output.read_text(encoding="utf-8")),
            summary.read_text(encoding="utf-8"),
            out,
            err,
            step_env,
        )

    def _uses(self, uses: str, step_id: str, with_: Mapping[str, str]) -> StepRun:
        outputs: dict[str, str] = {}
        if uses.startswith("actions/setup-python@"):
            assert with_.get("update-environment") == "false", "the action must leave the job's Python alone"
            outputs["python-path"] = sys.executable
            outputs["python-version"] = ".".join(map(str, sys.version_info[:3]))
        elif uses.startswith("astral-sh/setup-uv@"):
            assert with_.get("enable-cache") == "false", "the action caches uv's packages itself, keyed on its lock"
            outputs["uv-path"] = str(self.uv) if self.uv is not None else shutil.which("uv") or "uv"
        elif uses.startswith("actions/cache/restore@"):
            restore_keys = [k.strip() for k in with_.get("restore-keys", "").splitlines() if k.strip()]
            hit = self.cache.restore(Path(with_["path"]), with_["key"], restore_keys)
            outputs["cache-hit"] = str(hit == with_["key"]).lower()
            outputs["cache-matched-key"] = hit or ""
        elif uses.startswith("actions/cache/save@"):
            if Path(with_["path"]).exists():
                self.cache.save(Path(with_["path"]), with_["key"])
            else:  # as actions/cache/save answers a path that is not there: a warning, nothing saved
                self.cache.warnings.append(f"Path Validation Error: {with_['path']} does not exist")
        else:  # pragma: no cover - a new uses: in action.yml needs a stand-in here
            raise AssertionError(f"no stand-in for {uses}")
        return StepRun(step_id, "success", outputs, "", "", "", dict(with_))


def _run_in_process(env: Mapping[str, str], how: InProcess, *, cwd: Path) -> tuple[int, str, str]:
    from gitops.cli import run
    from gitops.github.api import use_transport

    out, err = io.StringIO(), io.StringIO()
    with _environ(env), _cwd(cwd), redirect_stdout(out), redirect_stderr(err):
        if how.github_transport is not None:
            with use_transport(how.github_transport, timeout=how.github_timeout):
                code = run(["action"], clock=how.clock)
        else:
            code = run(["action"], clock=how.clock)
    return code, out.getvalue(), err.getvalue()


@contextmanager
def _environ(env: Mapping[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextmanager
def _cwd(path: Path) -> Iterator[None]:
    saved = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(saved)


def run_bash(
    script: Path, *, cwd: Path, env: Mapping[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run a step's script as the runner does: ``bash --noprofile --norc -eo pipefail FILE``."""
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
