"""The local code of a manifest, built first when its branches name a ``build`` command.

The one call the commands make to read local code (:func:`read_code`): without a build it is
:func:`gitops.edges.sources.read_local_code`; with one, the build runs in the working tree (no ``--ref``) or in a
temporary checkout of the commit (``--ref``, :func:`gitops.edges.build.temporary_checkout`), and the code is read
from where it ran. See :mod:`gitops.edges.build` for how a command runs. A plan reads it through the head start's
local read (:class:`gitops.app.headstart.localread.LocalRead`), beside its wait for the servers.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING

from gitops.config.manifest import LoadedManifest
from gitops.core.local import LocalCode, SourceInfo
from gitops.edges import buildcache, depinstall
from gitops.edges.build import (
    build_commands,
    build_environment,
    interrupts_as_keyboard,
    register_secrets,
    run_build,
    skip_build,
    temporary_checkout,
)
from gitops.edges.codesetfile import codeset_path, read_codeset
from gitops.edges.depinstall import install_first
from gitops.edges.environ import seal_process
from gitops.edges.jssyntax import MAX_LISTED, syntax_problems
from gitops.errors import SourceError, UsageError
from gitops.secrets import leaked_in

if TYPE_CHECKING:  # imported after the servers answered (docs/architecture.md, "after the servers")
    from gitops.core.plan import BranchPlan


def read_code(
    loaded: LoadedManifest, ref: str | None, env: Mapping[str, str], seen: Callable[[int], None] | None = None
) -> LocalCode:
    """The code of every branch, after its build: from the working tree, or built from commit ``ref``.

    ``env`` is the run's environment; a build gets it without credentials (:func:`build_environment`). ``seen``:
    told the modification time of each file of the working tree read without a build
    (:func:`gitops.edges.sources.read_local_code`).

    Raises :class:`~gitops.errors.SourceError` (exit 6) for a failed build or code that cannot be deployed.
    """
    secret = register_secrets(loaded, env)
    codeset = codeset_path(env)
    if codeset is not None:
        if ref is not None:
            raise UsageError(
                f"--ref {ref} and --codeset {codeset} both say where the code comes from; give one",
                hint="A code set file holds code already built from one commit: drop --ref.",
            )
        # Made elsewhere (a build job): judged for credentials like a build's output, and never built here.
        local = read_codeset(codeset, loaded)
        _refuse_leaks(local)
        return local
    local = _read_code(loaded, ref, env, secret, seen)
    if not build_commands(loaded.manifest):
        return local  # the repository's own files: a build is what could write a credential into the code
    _refuse_leaks(local)
    return local


def _refuse_leaks(local: LocalCode) -> None:
    """:class:`SourceError` when a module holds the value of one of the run's secrets (or an encoding of one)."""
    for branch in local.branches:
        for module in branch.code:
            if leaked_in(module.text if module.text is not None else module.binary or b""):
                raise SourceError(
                    f"{branch.server}/{branch.branch}: module {module.name!r} holds a credential (the value of one of "
                    "the run's secret variables, or an encoded form of it); nothing was sent",
                    hint="Keep tokens and passwords out of the code: a build must not write them into its output "
                    "(it runs without them; see 'build' in the manifest documentation).",
                )


def check_syntax(local: LocalCode, only: Mapping[str, Collection[str]] | None = None) -> None:
    """:class:`SourceError` (exit 6) listing the JavaScript modules that do not parse
    (:mod:`gitops.edges.jssyntax`), before anything is sent: ``validate`` and ``build`` check every module, a plan
    (``only``: module names by branch label) those it uploads."""
    problems = syntax_problems(local.branches, only)
    if problems:
        count = f"{len(problems)} module{'s' if len(problems) != 1 else ''}"
        if len(problems) >= MAX_LISTED:
            count = f"the first {count}"
        raise SourceError(
            f"the local code from the {local.source.describe()} has JavaScript that does not parse ({count}); "
            "uploaded, it would throw a SyntaxError in every tick:\n" + "\n".join(f"  - {p}" for p in problems),
            hint="Fix the code at the line and column shown (or the build that wrote it).",
        )


def check_uploads(local: LocalCode, branches: Iterable[BranchPlan], *, replaced: Collection[tuple[str, str]]) -> None:
    """:func:`check_syntax` of the modules a plan uploads (added or changed: the others are what the server runs
    already, so a deploy that changes nothing parses nothing). Not the code of a recorded deploy (``replaced``: it
    ran on the server before), nor a code set file (``gitops build --out`` wrote it only after the same check
    passed, and parsing a large bot again would cost its first deploy about a second)."""
    if local.source.kind == "codeset":
        return
    uploaded = {
        b.label: {*b.names("added"), *b.names("changed")}
        for b in branches
        if b.writes_code and (b.server, b.branch) not in replaced
    }
    if uploaded:
        check_syntax(local, uploaded)


def _read_code(
    loaded: LoadedManifest,
    ref: str | None,
    env: Mapping[str, str],
    secret: frozenset[str],
    seen: Callable[[int], None] | None,
) -> LocalCode:
    commands = build_commands(loaded.manifest)
    if commands and skip_build(env) and ref is not None:
        raise SourceError(
            f"the code at ref {ref} needs its build, but this run skips builds (GITOPS_SKIP_BUILD: the GitHub Action "
            "builds the checked-out working tree in a step of its own, without credentials)",
            hint="Check the ref out with actions/checkout (its ref: input) instead of giving the action's ref input.",
        )
    if not commands or skip_build(env):
        return _read_files(loaded, ref, seen=seen)
    if ref is None:
        run_builds(loaded, env)  # reused when its inputs and output are unchanged (gitops.edges.buildcache)
        return _read_files(loaded)
    # A --ref build runs in a temporary checkout, removed afterwards: nothing of it is kept to reuse.
    build_env = build_environment(env, secret)
    seal_process(secret)
    timeout = float(loaded.manifest.build_timeout)
    with interrupts_as_keyboard(), temporary_checkout(loaded.base_dir, ref) as (base_dir, commit):
        where = f" (in a temporary checkout of {ref}, commit {commit[:12]})"
        # Messages name the working tree's folder: the checkout is gone when they are read.
        shown = loaded.base_dir
        install_first(
            base_dir, loaded.manifest.install, commands, env=build_env, timeout=timeout, where=where, shown_dir=shown
        )
        for command in commands:
            run_build(command, base_dir, env=build_env, where=where, timeout=timeout, shown_dir=shown)
        try:
            local = _read_files(dataclasses.replace(loaded, base_dir=base_dir))
        except SourceError as exc:
            text = exc.message.replace(str(base_dir), f"the checkout of {ref}")
            text = text.replace("from the working tree", f"built from ref {ref}", 1)
            raise SourceError(text, hint=exc.hint) from None
        manifest_in_commit = base_dir / loaded.path.name
        warnings = list(local.warnings)
        try:
            same = manifest_in_commit.read_bytes() == loaded.path.read_bytes()
        except OSError:
            same = False
        if not same:
            warnings.insert(
                0,
                f"the manifest {loaded.display} differs from the one in commit {commit[:12]} (or is not in it); "
                "the manifest is always read from disk, the code from the commit",
            )
    return LocalCode(local.branches, SourceInfo("ref", ref, commit, None), warnings)


def run_builds(loaded: LoadedManifest, env: Mapping[str, str]) -> int:
    """Run the build commands of the manifest's branches in the working tree, without any credential in reach
    (:func:`gitops.edges.build.secret_names`, :func:`gitops.edges.environ.seal_process`); how many ran: none when
    the output of the last build is reused, its inputs and its output unchanged since (:mod:`gitops.edges.buildcache`,
    ``--rebuild`` forces the build).

    ``gitops build`` calls it alone: the GitHub Action builds in a step of its own whose environment holds no
    secret, and the step that plans or applies then reads what it left (``GITOPS_SKIP_BUILD``).
    """
    commands = build_commands(loaded.manifest)
    if not commands:
        return 0
    secret = register_secrets(loaded, env)
    build_env = build_environment(env, secret)
    timeout = float(loaded.manifest.build_timeout)
    if depinstall.needed(loaded.base_dir, loaded.manifest.install, commands) is not None:
        # A working tree without node_modules (the GitHub Action's fresh checkout): installed before the build's
        # inputs are weighed, since the install records are among them.
        seal_process(secret)
        with interrupts_as_keyboard():
            install_first(loaded.base_dir, loaded.manifest.install, commands, env=build_env, timeout=timeout)
    written = [json.dumps(command) for command in commands]
    record = buildcache.BuildRecord(loaded, written, env)
    key = buildcache.inputs_key(loaded, written, build_env)
    if key is not None and not buildcache.rebuild(env):
        reuse = record.lookup(key)
        if reuse.built_at is not None:
            print(
                f"build: reused the output of the build of {buildcache.when(reuse.built_at)} (inputs unchanged); "
                "--rebuild forces it",
                file=sys.stderr,
                flush=True,
            )
            return 0
        if reuse.problem is not None:
            print(
                f"build: the record of the last build, {record.path}, {reuse.problem}; building (it is written "
                "again after the build; remove it if this repeats)",
                file=sys.stderr,
                flush=True,
            )
    seal_process(secret)
    began = time.time()
    with interrupts_as_keyboard():
        for command in commands:
            run_build(command, loaded.base_dir, env=build_env, timeout=timeout)
    # Recorded only when the inputs are what they were when the build began: a build that rewrote one of them, or
    # a file saved while it ran, leaves no record, and the next run builds again.
    if key is not None and buildcache.inputs_key(loaded, written, build_env) == key:
        record.store(key, began)
    return len(commands)


def _read_files(loaded: LoadedManifest, ref: str | None = None, seen: Callable[[int], None] | None = None) -> LocalCode:
    """:func:`gitops.edges.sources.read_local_code`, imported when this process reads files: the parent of a forked
    local read (:mod:`gitops.app.headstart.localread`) takes the code back and never loads the glob library and the
    requires check that reading needs."""
    from gitops.edges.sources import read_local_code  # noqa: PLC0415 (boundary: the local read)

    return read_local_code(loaded, ref, seen=seen)
