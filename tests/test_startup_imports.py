"""What a plan or apply imports before its first request, and what ``gitops --help`` imports (issue 23).

Every module on this list costs start-up time that a deploy pays before the first byte leaves; the rest of a plan
(the plan models, rendering, applying) is imported by the local read's worker while the servers answer
(``gitops.app.planning.AFTER_THE_SERVERS``), and the console's socket library only by verify and ``console``.
Each check runs in a fresh interpreter, so that modules other tests imported do not count.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gitops.app.planning import AFTER_THE_SERVERS, BEFORE_THE_WORKER
from gitops.config.manifest import load_manifest

ROOT = Path(__file__).resolve().parent.parent


def _imported_after(statements: str) -> set[str]:
    code = f"import sys\n{statements}\nimport json\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))  # the last line: what came before is the command's output


def test_the_plan_and_apply_commands_leave_the_plan_models_to_the_worker() -> None:
    before = ["gitops.cli", "gitops.cli.apply", "gitops.cli.plan", "gitops.app.planning", *BEFORE_THE_WORKER]
    loaded = _imported_after("\n".join(f"import {name}" for name in before))
    assert "gitops.config.manifest" in loaded  # the check sees the real path (it would pass vacuously otherwise)
    late_modules = (
        *AFTER_THE_SERVERS,
        "gitops.core.diff",
        "gitops.core.drift",
        "gitops.core.health",
        "tenacity",
        "zlib_ng",
    )
    for late in (*late_modules, "websockets", "gitops.edges.socket"):
        assert late not in loaded, f"{late} is imported before the first request"


def test_the_parent_of_a_forked_read_takes_its_code_without_the_glob_library() -> None:
    """The parent unpickles the code its child read, and plans with it: it imports what the code is made of
    (``gitops.core.local``), never the glob matching or the requires check that made it (~12 ms of CPU while the
    servers answer)."""
    import pickle

    from gitops.core.codeset import CodeSet, Module
    from gitops.core.local import LocalBranch, LocalCode, SourceInfo

    local = LocalCode(
        [
            LocalBranch(
                "s", "main", CodeSet.of([Module("main", text="x")]), {"main": "src/main.js"}, {"main": "javascript"}
            )
        ],
        SourceInfo("worktree", None, None, None),
        [],
    )
    names = ["gitops.cli", "gitops.cli.apply", "gitops.app.planning", *BEFORE_THE_WORKER, *AFTER_THE_SERVERS]
    loaded = _imported_after(
        "\n".join(f"import {name}" for name in names)
        + f"\nimport pickle\nlocal = pickle.loads(bytes.fromhex({pickle.dumps(local).hex()!r}))"
        + "\nassert local.branches[0].code.modules['main'].text == 'x'"
    )
    assert "gitops.core.local" in loaded  # the check sees the real path
    for matching in ("wcmatch", "bracex", "gitops.core.requires"):
        assert matching not in loaded, f"the parent of a forked read imports {matching}"


def test_the_plan_models_leave_difflib_to_a_diff_or_a_misspelt_branch() -> None:
    """difflib (~4 ms) is imported for a changed text module's diff, or to name the branch a missing one was most
    likely meant to be: not by every plan."""
    loaded = _imported_after("\n".join(f"import {name}" for name in AFTER_THE_SERVERS))
    assert "gitops.core.plan" in loaded  # the check sees the real path
    assert "difflib" not in loaded
    misspelt = "print(similar_branch('defualt', ['default']))"
    loaded = _imported_after(f"from gitops.core.plan import similar_branch\n{misspelt}")
    assert "difflib" in loaded


def test_help_imports_no_models_and_no_http() -> None:
    loaded = _imported_after("from gitops.cli import cli\ntry:\n    cli(['--help'])\nexcept SystemExit:\n    pass")
    assert "click" in loaded
    for heavy in ("pydantic", "httpx", "yaml", "gitops.config.manifest", "websockets"):
        assert heavy not in loaded, f"gitops --help imports {heavy}"


def test_a_plan_whose_manifest_was_validated_before_parses_no_yaml(tmp_path: Path) -> None:
    """The manifest cache (``gitops/config/manifestcache.py``): with the manifest validated once, what a plan or an
    apply imports before its first request holds neither pyyaml nor the validator (its pydantic models)."""
    manifest = tmp_path / "gitops.yaml"
    manifest.write_bytes((ROOT / "examples" / "multi-server" / "gitops.yaml").read_bytes())
    env = {"GITOPS_CACHE_DIR": str(tmp_path / "cache")}
    load_manifest(manifest, env)  # validated once, here
    before = ["gitops.cli", "gitops.cli.apply", "gitops.cli.plan", "gitops.app.planning", *BEFORE_THE_WORKER]
    # And what the worker imports meanwhile, and the local read: no pydantic anywhere on the way (issue 23).
    worker = [*AFTER_THE_SERVERS, "gitops.edges.sources", "gitops.app.ahead"]
    loaded = _imported_after(
        "\n".join(f"import {name}" for name in [*before, *worker])
        + f"\nfrom pathlib import Path\nfrom gitops.config.manifest import load_manifest\n"
        f"load_manifest(Path({str(manifest)!r}), {env!r})"
    )
    assert "gitops.config.manifestcache" in loaded  # the check sees the real path
    for heavy in ("yaml", "gitops.config.yamlload", "gitops.config.schema", "pydantic", "annotated_types"):
        assert heavy not in loaded, f"a plan with a cached manifest imports {heavy}"
