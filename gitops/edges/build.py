"""The build step: run a branch's ``build`` command, in the working tree or in a temporary checkout of a commit.

A command is a string, run through the shell (``sh -c``: ``npm ci && npm run build`` works as typed), or a list, the
program and its arguments (no shell). It runs with the manifest's folder as working directory (in a ``--ref``
checkout, the same folder there), its output and errors streamed to standard error (neutralised, once). A command
that watches for changes is refused before it starts; one that fails, or still runs after the manifest's
``build_timeout``, stops everything with exit 6. Each distinct command runs once, however many branches name it.
Before the builds, a checkout without ``node_modules`` gets its packages installed from its lockfile
(:mod:`gitops.edges.depinstall`).

With ``--ref`` the commit is checked out into a temporary ``git worktree`` (detached, in the system's temporary
folder): the build runs there, the code is read there, and the checkout is removed afterwards, also when the build
fails or the tool is interrupted (Ctrl-C, SIGTERM); the working tree is never touched. The build's own process
group is ended with it, so an interrupted build leaves no process behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import FrameType

from gitops.config.manifest import LoadedManifest, Manifest, ServerConfig
from gitops.config.model import named_variables
from gitops.core.buildcheck import watch_flag
from gitops.edges.buildhints import failure_hint
from gitops.edges.gitref import resolve_commit
from gitops.edges.threads import start_quiet
from gitops.errors import SourceError
from gitops.inert import inert
from gitops.secrets import redact, register

BuildCommand = str | list[str]

#: How many of a failed build's last output lines the error shows.
TAIL_LINES = 20
#: How long an interrupted build gets to end after SIGTERM before it is killed.
_STOP_SECONDS = 5.0
#: How long a build may run when the manifest does not say (``build_timeout``).
DEFAULT_TIMEOUT = 600.0
#: A build silent this long is said to be still running (and again after as long).
SILENT_EVERY = 15.0


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


def run_build(
    command: BuildCommand,
    cwd: Path,
    *,
    env: Mapping[str, str],
    where: str = "",
    timeout: float = DEFAULT_TIMEOUT,
    shown_dir: Path | None = None,
    kind: str = "build",
) -> None:
    """Run one build command in ``cwd`` with ``env`` (see :func:`build_environment`), its output streamed to
    standard error (each line redacted and neutralised: colours dropped, other escapes shown as text), and a line
    saying it still runs whenever it has been silent for a while.

    Raises :class:`~gitops.errors.SourceError` (exit 6) when it watches for changes (:func:`refuse_watching`), cannot
    start, exits non-zero, or still runs after ``timeout`` seconds (its process group is ended then). Interrupted
    (KeyboardInterrupt, or SIGTERM inside :func:`interrupts_as_keyboard`), it ends the build's process group first.
    ``shown_dir``: the folder hints name (the working tree's, for a temporary checkout); ``kind``: ``"build"`` or
    ``"install"``, how the messages call it.
    """
    shown = describe(command)
    if kind == "build":
        refuse_watching(command, cwd, where)
    print(inert(redact(f"{kind}: {shown}{where}"), one_line=True), file=sys.stderr, flush=True)
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
                    f"the {kind} command {shown!r} cannot start{where}: {exc.strerror or exc}",
                    hint=_start_hint(command, kind),
                ) from None
        if not _follow(proc, tail, f"{kind}: {shown}", timeout):
            _stop(proc)
            raise SourceError(
                f"the {kind} command {shown!r} was still running after {timeout:g} s{where}, and was stopped with "
                "its processes",
                hint="A build that watches for changes never ends: make it build once. If it needs longer, raise "
                "build_timeout in the manifest (seconds).",
            )
        code = proc.wait()
    except BaseException:
        if proc is not None:
            _stop(proc)
        raise
    if code != 0:
        # Its output was shown as it came: the error says where it is rather than repeating its last lines.
        said = "its output is above" if tail else "it printed nothing"
        if kind == "install":
            hint = (
                f"The packages could not be installed ({shown}, in {shown_dir or cwd}): fix the lockfile (run the "
                "same command in a fresh clone to see why; npm ci needs package-lock.json in line with "
                "package.json: run npm install and commit both), or set install in the manifest ('never', or the "
                "command to run)."
            )
        else:
            hint = failure_hint(code, list(tail), cwd, shown_dir or cwd, fresh=shown_dir not in (None, cwd))
        raise SourceError(f"the {kind} command {shown!r} failed with exit code {code}{where} ({said})", hint=hint)


def _start_hint(command: BuildCommand, kind: str) -> str:
    if kind == "install":
        program = command[0] if isinstance(command, list) else describe(command)
        return (
            f"The lockfile asks for {program}, which is not installed here: install it (Node.js's corepack enable "
            "provides yarn and pnpm), or set install in the manifest ('never', or the command to run)."
        )
    return (
        "Install the program, or fix build in the manifest (a string runs through sh -c, a list is the program "
        "and its arguments)."
    )


def refuse_watching(command: BuildCommand, cwd: Path, where: str = "") -> None:
    """:class:`SourceError` (exit 6) when ``command``, or a package script it runs (``package.json`` in ``cwd``),
    watches for changes instead of building once (:func:`gitops.core.buildcheck.watch_flag`)."""
    flag = watch_flag(command, package_scripts(cwd))
    if flag is not None:
        raise SourceError(
            f"the build command {describe(command)!r}{where} watches for changes: {flag}, so it would never end",
            hint="Name a command that builds once (without --watch or -w), e.g. a package script of its own: "
            '"build:once": "rollup -c".',
        )


def package_scripts(folder: Path) -> dict[str, str]:
    """The ``scripts`` of the ``package.json`` in ``folder`` (those that are text), or none."""
    try:
        package = json.loads((folder / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    scripts = package.get("scripts") if isinstance(package, dict) else None
    if not isinstance(scripts, dict):
        return {}
    return {name: text for name, text in scripts.items() if isinstance(name, str) and isinstance(text, str)}


#: Colours and other text styles (SGR): dropped from a build's output, which a log shows as text.
_STYLE = re.compile(r"\x1b\[[0-9;:]*m")


def shown_line(raw: bytes) -> str:
    """One line of a build's output as it is shown: colours dropped, what a terminal's carriage return would have
    overwritten left out, credentials redacted, any other control character shown as an escape
    (:func:`gitops.inert.inert`)."""
    text = raw.decode("utf-8", "replace").rstrip("\r\n")
    text = _STYLE.sub("", text).rsplit("\r", 1)[-1]
    return inert(redact(text))


def _follow(proc: subprocess.Popen[bytes], tail: deque[str], label: str, timeout: float) -> bool:
    """Stream the build's output until it ends (``True``) or ``timeout`` seconds have passed (``False``); while it
    is silent, say every :data:`SILENT_EVERY` seconds how long it has run."""
    assert proc.stdout is not None
    lines: queue.Queue[bytes | None] = queue.Queue()
    stdout, proc.stdout = proc.stdout, None  # the reader's from now on: it closes it (never while it reads)

    def pump() -> None:
        # The output is read in a thread of its own: the tool waits on the queue, so that a build that neither
        # prints nor ends is still timed, and a Ctrl-C still reaches it.
        try:
            with stdout:
                for raw in stdout:
                    lines.put(raw)
        except (OSError, ValueError):
            pass
        finally:
            lines.put(None)

    start_quiet(threading.Thread(target=pump, name="gitops-build-output", daemon=True))
    began = heard = time.monotonic()
    while True:
        now = time.monotonic()
        if now - began >= timeout:
            return False
        try:
            raw = lines.get(timeout=min(1.0, timeout - (now - began)))
        except queue.Empty:
            now = time.monotonic()
            if now - heard >= SILENT_EVERY:
                heard = now
                print(
                    f"{label} still running, {now - began:.0f} s so far (stopped at {timeout:g} s: build_timeout)",
                    file=sys.stderr,
                    flush=True,
                )
            continue
        if raw is None:
            try:  # its output ended; the build may still run (a process that closed it)
                proc.wait(max(0.0, timeout - (time.monotonic() - began)))
            except subprocess.TimeoutExpired:
                return False
            return True
        heard = time.monotonic()
        # A build that prints a credential (echo $TOKEN, a dump of its environment) never gets it shown: the run's
        # secrets are registered before any build starts (gitops.app.localcode).
        line = shown_line(raw)
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
        tail.append(line)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End the build's process group: SIGTERM, then SIGKILL if it does not end in time; also the processes of the
    group left behind when the build's own process has ended already (``sleep 600 &``)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(_STOP_SECONDS)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # what is left of the group (a process that ignores SIGTERM)
    proc.wait()
    if proc.stdout is not None:  # not yet handed to a reader (_follow)
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
