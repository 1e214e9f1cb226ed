"""The build step: run a branch's ``build`` command, in the working tree or in a temporary checkout of a commit.

A command is a string, run through the shell (``sh -c``: ``npm ci && npm run build`` works as typed), or a list, the
program and its arguments (no shell). It runs with the manifest's folder as working directory (in a ``--ref``
checkout, the same folder there), its output and errors streamed to standard error. A command that fails stops
everything with exit 6, its exit code and its last lines. Each distinct command runs once, however many branches
name it.

With ``--ref`` the commit is checked out into a temporary ``git worktree`` (detached, in the system's temporary
folder): the build runs there, the code is read there, and the checkout is removed afterwards, also when the build
fails or the tool is interrupted (Ctrl-C, SIGTERM); the working tree is never touched. The build's own process
group is ended with it, so an interrupted build leaves no process behind.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import FrameType

from gitops.config.manifest import LoadedManifest, Manifest, ServerConfig
from gitops.config.model import named_variables
from gitops.edges.gitref import resolve_commit
from gitops.errors import SourceError
from gitops.secrets import redact, register

BuildCommand = str | list[str]

#: How many of a failed build's last output lines the error shows.
TAIL_LINES = 20
#: How long an interrupted build gets to end after SIGTERM before it is killed.
_STOP_SECONDS = 5.0


def build_commands(manifest: Manifest) -> list[BuildCommand]:
    """The distinct build commands of the manifest's branches, in manifest order (a branch without ``build`` of its
    own takes the manifest's)."""
    seen: dict[str, BuildCommand] = {}
    for branch in manifest.branches:
        command = branch.build if branch.build is not None else manifest.build
        if command is not None:
            seen.setdefault(_key(command), command)
    return list(seen.values())


def _key(command: BuildCommand) -> str:
    return command if isinstance(command, str) else "\0".join(["argv", *command])


def describe(command: BuildCommand) -> str:
    """The command as a person would type it."""
    return command if isinstance(command, str) else shlex.join(command)


def _argv(command: BuildCommand) -> list[str]:
    if isinstance(command, list):
        return command
    if os.name == "nt":  # pragma: no cover - no POSIX shell there
        return ["cmd", "/c", command]
    return ["/bin/sh", "-c", command]


#: Variables that hold secrets in the runs this tool knows of (the Action's inputs, GitHub's own tokens, the
#: conventional names of the screeps credentials); a build never sees them, nor the ones the manifest names.
SECRET_VARIABLES = frozenset(
    {
        "SCREEPS_TOKEN",
        "SCREEPS_PASSWORD",
        "GITOPS_ACTION_TOKEN",
        "GITOPS_ACTION_PASSWORD",
        "GITOPS_GITHUB_TOKEN",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "ACTIONS_RUNTIME_TOKEN",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
        "ACTIONS_ID_TOKEN_REQUEST_URL",
    }
)
#: Prefixes of variables a build never sees: a GitHub Action's inputs (``INPUT_*``, whatever they are called) and
#: this Action's own (``GITOPS_ACTION_*``).
SECRET_PREFIXES = ("INPUT_", "GITOPS_ACTION_")
#: The Action's variables that name where it hands a credential over (``token-env`` and friends): the variable they
#: name is a secret too, even when the manifest names another.
_HANDOVER_NAMES = ("GITOPS_ACTION_TOKEN_ENV", "GITOPS_ACTION_USERNAME_ENV", "GITOPS_ACTION_PASSWORD_ENV")


def secret_names(env: Mapping[str, str], servers: Mapping[str, ServerConfig]) -> frozenset[str]:
    """The variables of ``env`` that a build must not see: every variable any of ``servers`` names in a credential
    field (:func:`~gitops.config.model.named_variables`; pass the whole manifest's, not only the servers a
    ``--server`` run talks to), :data:`SECRET_VARIABLES`, every variable with a :data:`SECRET_PREFIXES` prefix, and
    the variables the Action hands credentials over in."""
    named = {name for server in servers.values() for name in named_variables(server)}
    named |= {env[key] for key in _HANDOVER_NAMES if env.get(key)}
    prefixed = {key for key in env if key.startswith(SECRET_PREFIXES)}
    return frozenset(named | SECRET_VARIABLES | prefixed)


#: Set (to 1) by the GitHub Action's step that plans or applies: the Action built the code in a step of its own,
#: which had no secret in its environment (``gitops build``); this step reads what it left.
SKIP_BUILD_VARIABLE = "GITOPS_SKIP_BUILD"


def skip_build(env: Mapping[str, str]) -> bool:
    """Whether the run reads the code as an earlier ``gitops build`` left it, without building (see
    :data:`SKIP_BUILD_VARIABLE`)."""
    return env.get(SKIP_BUILD_VARIABLE, "").strip().lower() in ("1", "true", "yes")


_SECRET_WORDS = ("TOKEN", "PASSWORD", "SECRET", "KEY")


def secret_values(env: Mapping[str, str], servers: Mapping[str, ServerConfig]) -> list[str]:
    """The values in ``env`` that are credentials, for the redactor: the tokens and passwords the servers name,
    :data:`SECRET_VARIABLES`, what the Action hands over, and any removed variable whose name says it holds one
    (``INPUT_TOKEN``). Not the other removed variables (a user name, an input such as ``gitops.yaml``), which are
    not secret and would make every message unreadable."""
    names = {name for server in servers.values() for name in named_variables(server, secret=True)}
    names |= SECRET_VARIABLES
    names |= {env[key] for key in ("GITOPS_ACTION_TOKEN_ENV", "GITOPS_ACTION_PASSWORD_ENV") if env.get(key)}
    names |= {
        key
        for key in env
        if key.startswith(SECRET_PREFIXES) and not key.endswith("_ENV") and any(w in key for w in _SECRET_WORDS)
    }
    return [env[name] for name in sorted(names) if env.get(name)]


def register_secrets(loaded: LoadedManifest, env: Mapping[str, str]) -> frozenset[str]:
    """Register the values of the run's secret variables (:func:`gitops.secrets.register`); their names.

    Known before any code is read or built: a build's output, and code that carries a credential, are judged
    against them (the credentials themselves are read later, by the session)."""
    for value in secret_values(env, loaded.every_server):
        register(value)
    return secret_names(env, loaded.every_server)


def build_environment(env: Mapping[str, str], secret: frozenset[str]) -> dict[str, str]:
    """The environment a build runs with: ``env`` without the variables in ``secret`` (:func:`secret_names`).

    A build command is code from the repository, and on a pull request from anyone who can open one: it must not
    read the token or password that the deploy uses. A build that needs a secret of its own (a private npm registry)
    gets it from its own step, before gitops runs.
    """
    return {k: v for k, v in env.items() if k not in secret}


def run_build(command: BuildCommand, cwd: Path, *, env: Mapping[str, str], where: str = "") -> None:
    """Run one build command in ``cwd`` with ``env`` (see :func:`build_environment`), its output streamed to
    standard error.

    Raises :class:`~gitops.errors.SourceError` (exit 6) when it cannot start or exits non-zero. Interrupted
    (KeyboardInterrupt, or SIGTERM inside :func:`interrupts_as_keyboard`), it ends the build's process group first.
    """
    shown = describe(command)
    print(f"build: {shown}{where}", file=sys.stderr, flush=True)
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    proc: subprocess.Popen[bytes] | None = None
    try:
        # An interrupt that lands while Popen is still returning would leave the started build without anyone
        # holding its pid: it is held back until ``proc`` is known, then delivered here, where _stop ends the build.
        with _interrupts_held():
            try:
                proc = subprocess.Popen(
                    _argv(command),
                    cwd=cwd,
                    env=dict(env),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: ended whole when the tool is interrupted
                )
            except OSError as exc:
                raise SourceError(
                    f"the build command {shown!r} cannot start: {exc.strerror or exc}",
                    hint="Install the program, or fix build in the manifest (a string runs through sh -c, a list "
                    "is the program and its arguments).",
                ) from None
        assert proc.stdout is not None
        with proc.stdout:
            for raw in proc.stdout:
                # A build that prints a credential (echo $TOKEN, a dump of its environment) never gets it shown:
                # the run's secrets are registered before any build starts (gitops.app.localcode).
                line = redact(raw.decode("utf-8", "replace"))
                sys.stderr.write(line)
                sys.stderr.flush()
                tail.append(line.rstrip("\r\n"))
        code = proc.wait()
    except BaseException:
        if proc is not None:
            _stop(proc)
        raise
    if code != 0:
        last = "\n".join(f"    | {line}" for line in tail) or "    (no output)"
        hint = "Fix the build (run it by hand in the same folder to see all of its output), then try again."
        if tool_missing(code, tail) and (cwd / "package.json").is_file():
            lock = "npm ci" if (cwd / "package-lock.json").is_file() else "npm install"
            hint = (
                f"The build's tool is not installed: install the project's packages first ({lock}, in "
                f"{cwd}), then try again. In a GitHub workflow, add a step that runs {lock} before this one."
            )
        raise SourceError(
            f"the build command {shown!r} failed with exit code {code}{where}; its last lines:\n{last}", hint=hint
        )


#: What a shell, npm or Node print when a build's program or package is not installed.
_MISSING_TOOL = re.compile(
    r"(: not found|command not found|is not recognized as an internal or external command|npx canceled due to "
    r"missing packages|Cannot find module|Cannot find package|ERR_MODULE_NOT_FOUND|could not determine executable)",
    re.IGNORECASE,
)


def tool_missing(code: int, tail: Iterable[str]) -> bool:
    """Whether a failed build failed because its program or packages are missing (exit 127, or what npm, npx,
    Node or the shell print then)."""
    return code == 127 or any(_MISSING_TOOL.search(line) for line in tail)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End the build's process group: SIGTERM, then SIGKILL if it does not end in time."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(_STOP_SECONDS)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM are only noted; on leaving it (handlers restored) each one noted is
    raised again, so that it acts as it would have, one step later. Outside the main thread it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        noted.append(signum)

    # A handler set from outside Python (getsignal() is None) cannot be put back, so that signal is left alone.
    held = [signum for signum in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(signum) is not None]
    previous = {signum: signal.signal(signum, note) for signum in held}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for pending in dict.fromkeys(noted):
            signal.raise_signal(pending)


@contextlib.contextmanager
def interrupts_as_keyboard() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt (as Ctrl-C does), so that cleanup runs; the previous
    handler is restored afterwards. Outside the main thread (signals cannot be caught there) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    try:
        return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, check=False)
    except OSError as exc:
        raise SourceError(f"--ref needs git, which cannot run: {exc.strerror or exc}") from None


@contextlib.contextmanager
def temporary_checkout(base_dir: Path, ref: str) -> Iterator[tuple[Path, str]]:
    """Check commit ``ref`` out into a temporary ``git worktree``; yields the manifest's folder inside it and the
    full commit id. The checkout is removed afterwards, whatever happens in the block."""
    top_run = _git(["rev-parse", "--show-toplevel"], base_dir)
    if top_run.returncode != 0:
        raise SourceError(
            f"--ref {ref}: {base_dir} (the manifest's folder) is not in a Git repository",
            hint="Drop --ref to build and read the working tree, or run gitops inside a clone of the repository.",
        )
    top = Path(os.fsdecode(top_run.stdout.strip())).resolve()
    # The same resolution, and the same messages, as a --ref read without a build (shallow clones, trees, typos).
    sha = resolve_commit(top, ref)
    relative = base_dir.resolve().relative_to(top)
    holder = Path(tempfile.mkdtemp(prefix="gitops-build-"))
    checkout = holder / "checkout"
    try:
        added = _git(["worktree", "add", "--detach", "--quiet", str(checkout), sha], top)
        if added.returncode != 0:
            message = added.stderr.decode("utf-8", "replace").strip()
            raise SourceError(f"--ref {ref}: git cannot check commit {sha[:12]} out to build it: {message}")
        yield checkout / relative, sha
    finally:
        _git(["worktree", "remove", "--force", "--force", str(checkout)], top)
        shutil.rmtree(holder, ignore_errors=True)
        _git(["worktree", "prune"], top)
