"""The quick start's main job, as a new user meets it: from this checkout, and from a built wheel installed into a
fresh virtual environment (as ``pip install`` / ``pipx install`` would), run from an empty folder."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitops.cli import run
from gitops.cli.help import installed_links

ROOT = Path(__file__).resolve().parent.parent


def _check_demo_output(text: str) -> None:
    assert "Local stand-in service running at http://127.0.0.1:" in text
    assert "== gitops apply --yes" in text
    # The second plan finds nothing left to do, and the server holds the example's modules.
    assert text.count("(exit code 0)") >= 2
    assert "No changes" in text
    assert "main (active: world)" in text
    assert "role/harvester" in text
    assert "run 'gitops init'" in text  # the demo's last line leads to init


def test_every_subpackage_is_listed_for_the_wheel() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "gitops").rglob("__init__.py")} | {
        "gitops._examples",
        "gitops._docs",  # docs/, shipped for 'gitops help TOPIC'
        "gitops._privateserver",  # scripts/private-server/, shipped for 'gitops rehearse'
    }
    # The bundled example's folders are listed too (setuptools warns about folders it is not told of).
    examples = ROOT / "examples"
    found |= {
        ".".join(["gitops._examples", *folder.relative_to(examples).parts])
        for folder in (examples / "basic").rglob("*")
        if folder.is_dir()
    } | {"gitops._examples.basic"}
    assert listed == found, "pyproject.toml [tool.setuptools] packages must list every package of gitops/"


def test_demo_from_the_checkout(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(["demo"]) == 0
    _check_demo_output(capsys.readouterr().out)


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """A folder removed after the test: the installed copy holds the stand-in's demo tokens (source code), which the
    suite's canary check would otherwise find among the files left behind."""
    yield tmp_path
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_demo_after_installing_the_wheel_runs_from_an_empty_folder(scratch: Path) -> None:
    tmp_path = scratch
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    # The build backend has nothing to warn about (it once printed ~200 lines for the example's folders).
    assert "BuildBackendWarning" not in build.stdout + build.stderr
    assert "is absent from the `packages` configuration" not in build.stdout + build.stderr
    (wheel,) = wheels.glob("screeps_gitops-*.whl")
    # The metadata: the one version, the licence, the URLs, and the serve extra's packages only under the extra.
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(name).decode("utf-8")
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in archive.namelist())
        # gitops rehearse installs the pinned server and preloads these into it.
        for shipped in ("package.json", "package-lock.json", "loopback-guard.js", "no_snapshot.js"):
            assert f"gitops/_privateserver/{shipped}" in archive.namelist(), shipped
    from gitops import __version__

    assert f"\nVersion: {__version__}\n" in metadata
    assert "\nLicense-Expression: MIT\n" in metadata
    assert "\nProject-URL: Homepage, https://github.com/OWNER/screeps-gitops\n" in metadata
    assert "\nProvides-Extra: serve\n" in metadata
    for package in ("starlette", "uvicorn", "watchfiles"):
        [line] = [ln for ln in metadata.splitlines() if ln.startswith(f"Requires-Dist: {package}")]
        assert line.endswith('; extra == "serve"'), line
    env_dir = tmp_path / "fresh-venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=120)
    python = env_dir / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    # The dependencies come from this test environment's site-packages (the wheel itself is installed --no-deps, so
    # this checkout's editable install is not on the path: its finder lives in a .pth file, which this does not load).
    fresh_site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.strip()
    )
    deps = [sysconfig.get_paths()["purelib"], *site.getsitepackages()]
    (fresh_site / "test-deps.pth").write_text("\n".join(dict.fromkeys(deps)) + "\n", encoding="utf-8")
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITOPS_", "SCREEPS_", "PYTHON")) or k == "GITOPS_CACHE_DIR"
    }
    where = subprocess.run(
        [str(python), "-c", "import gitops; print(gitops.__file__)"],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert Path(where.stdout.strip()).is_relative_to(env_dir), "the demo must run the installed wheel"
    demo = subprocess.run(
        [str(env_dir / "bin" / "gitops"), "demo"],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert demo.returncode == 0, demo.stderr[-2000:]
    _check_demo_output(demo.stdout)
    assert list(empty.iterdir()) == [], "the demo works in a temporary folder and leaves the current one alone"
    # The documentation travels with the wheel: a pip/pipx user reads it with 'gitops help TOPIC'.
    page = subprocess.run(
        [str(env_dir / "bin" / "gitops"), "help", "layouts"],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert page.returncode == 0, page.stderr
    # As the page reads where the tool is installed: its links name help topics or the repository's files.
    shipped = installed_links((ROOT / "docs/your-layout.md").read_text(encoding="utf-8"))
    assert page.stdout == shipped.rstrip("\n") + "\n"
