"""``gitops demo``: the quick start's main job, with nothing to set up.

Starts the local stand-in service on a free loopback port with a throw-away account, copies the bundled example
(``examples/basic``, shipped inside the package) to a temporary folder pointed at it, then runs ``plan``,
``apply --yes`` and ``plan`` again exactly as a player would, shows what the server holds, and stops the service.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from importlib import resources
from pathlib import Path

import click

from gitops.cli import run
from gitops.cli.extras import require_serve_extra
from gitops.edges.clock import ManualClock
from gitops.errors import UsageError

EXAMPLE_URL = "http://127.0.0.1:21025"


def find_example(name: str) -> Path:
    """The bundled example ``name``.

    An installed tool (``pip install``, ``pipx install``) has it inside the package as ``gitops._examples``
    (pyproject.toml maps the repository's ``examples/`` there); an editable install from a checkout finds it in the
    checkout's ``examples/`` (setuptools' editable finder does not resolve such a mapped data folder).
    """
    candidates: list[Path] = []
    with suppress(ModuleNotFoundError):
        candidates.append(Path(str(resources.files("gitops._examples").joinpath(name))))
    candidates.append(Path(__file__).resolve().parents[2] / "examples" / name)
    for candidate in candidates:
        if (candidate / "gitops.yaml").is_file():
            return candidate
    raise UsageError(
        f"the bundled example {name!r} is not part of this installation of screeps-gitops",
        hint="Reinstall screeps-gitops (pip install, pipx install), or pass --example DIR (a folder with gitops.yaml).",
    )


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


@click.command()
@click.option(
    "--example",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    default=None,
    help="A folder with a gitops.yaml whose server url is http://127.0.0.1:21025 [default: examples/basic].",
)
def demo(example: Path | None) -> int:
    """Deploy a bundled example to a local stand-in service, then stop it."""
    require_serve_extra("demo")
    # After the check: the stand-in (starlette, uvicorn) is the optional extra's.
    from gitops.standin.testing import (  # noqa: PLC0415 (boundary: the serve extra)
        ALICE,
        DEMO_ACCOUNTS,
        FULL_TOKEN,
        running_standin,
    )

    source = example or find_example("basic")
    with tempfile.TemporaryDirectory(prefix="gitops-demo-") as tmp:
        work = Path(tmp) / "repo"
        shutil.copytree(source, work)
        manifest = work / "gitops.yaml"
        # The service's clock starts at the real time, so reset times in the plan read as today's.
        clock = ManualClock(time.time())
        with running_standin(DEMO_ACCOUNTS, Path(tmp) / "standin.sqlite3", clock=clock) as service:
            manifest.write_text(manifest.read_text(encoding="utf-8").replace(EXAMPLE_URL, service.url), "utf-8")
            click.secho(f"== Local stand-in service running at {service.url} (user '{ALICE}')", bold=True)
            click.echo(f"   example: {source} (copied to a temporary folder)\n")
            env = {
                "SCREEPS_TOKEN": FULL_TOKEN,
                "GITOPS_STATE_DIR": str(Path(tmp) / "state"),
                "GITOPS_MANIFEST": str(manifest),
            }
            with _environment(env):
                steps = [
                    ("plan: what would change", ["plan"]),
                    ("apply: upload and activate", ["apply", "--yes"]),
                    ("plan again: nothing left to do", ["plan"]),
                ]
                for title, argv in steps:
                    click.secho(f"== gitops {' '.join(argv)}   ({title})", bold=True)
                    code = run(argv)
                    click.echo(f"   (exit code {code})\n")
                    if code not in (0, 2):
                        return code
            branches = service.branches(ALICE)
            click.secho("== What the server holds now", bold=True)
            for entry in branches:
                flags = [w for w, key in (("world", "activeWorld"), ("sim", "activeSim")) if entry.get(key)]
                modules = service.branch_modules(ALICE, str(entry["branch"])) or {}
                active = f" (active: {', '.join(flags)})" if flags else ""
                click.echo(f"   {entry['branch']}{active}: {', '.join(sorted(modules))}")
        click.echo(
            "\nStopped the stand-in service. Next, for your own bot: cd into its repository and run 'gitops init' "
            "(--pull brings in the code a server already holds); 'gitops help layouts' explains what it writes."
        )
    return 0
