"""The local code of a manifest, built first when its branches name a ``build`` command.

The one call the commands make to read local code (:func:`read_code`): without a build it is
:func:`gitops.edges.sources.read_local_code`; with one, the build runs in the working tree (no ``--ref``) or in a
temporary checkout of the commit (``--ref``, :func:`gitops.edges.build.temporary_checkout`), and the code is read
from where it ran. See :mod:`gitops.edges.build` for how a command runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from gitops.config.manifest import LoadedManifest
from gitops.edges.build import build_commands, build_environment, interrupts_as_keyboard, run_build, temporary_checkout
from gitops.edges.sources import LocalCode, SourceInfo, read_local_code
from gitops.errors import SourceError


def read_code(loaded: LoadedManifest, ref: str | None, env: Mapping[str, str]) -> LocalCode:
    """The code of every branch, after its build: from the working tree, or built from commit ``ref``.

    ``env`` is the run's environment; a build gets it without credentials (:func:`build_environment`).

    Raises :class:`~gitops.errors.SourceError` (exit 6) for a failed build or code that cannot be deployed.
    """
    commands = build_commands(loaded.manifest)
    if not commands:
        return read_local_code(loaded, ref)
    build_env = build_environment(env, loaded.manifest)
    with interrupts_as_keyboard():
        if ref is None:
            for command in commands:
                run_build(command, loaded.base_dir, env=build_env)
            return read_local_code(loaded)
        with temporary_checkout(loaded.base_dir, ref) as (base_dir, commit):
            where = f" (in a temporary checkout of {ref}, commit {commit[:12]})"
            for command in commands:
                run_build(command, base_dir, env=build_env, where=where)
            try:
                local = read_local_code(dataclasses.replace(loaded, base_dir=base_dir))
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
