"""Peak memory of reading a 41 MB code set file (``--codeset``), two revisions side by side (issue 45, point 6).

The file holds 8 branches of 5 MB of ASCII code each (50 modules of 100 kB), the largest a manifest of 8 branches
sends; it is written once, with its manifest, in a Git repository in a temporary folder. Each revision's ``gitops``
package is taken from Git (``git archive``) and run by this interpreter (``PYTHONPATH`` ahead of the editable
install), each process started through ``bench/launch.py`` (its ``wait4`` peak is its own). A process that only
loads the manifest is measured too: the read's share is the difference.

    .venv/bin/python bench/bench_codeset.py main HEAD
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from proc_usage import clean_env, run_measured  # noqa: E402

BRANCHES, MODULES, MODULE_BYTES = 8, 50, 100_000
LOAD = (
    "from pathlib import Path; from gitops.config.manifest import load_manifest; m = load_manifest(Path('gitops.yaml'))"
)
READ = LOAD + "; from gitops.edges.codesetfile import read_codeset; read_codeset(Path('codeset.json'), m)"


def project(root: Path) -> None:
    """The repository with its manifest, committed, and the code set file of that commit beside it."""
    root.mkdir()
    branches = "".join(f"  - {{server: local, branch: b{i}}}\n" for i in range(BRANCHES))
    manifest = "version: 1\nservers:\n  local: {url: 'http://127.0.0.1:9', token_env: SCREEPS_TOKEN}\nbranches:\n"
    (root / "gitops.yaml").write_text(manifest + branches, "utf-8")
    (root / ".gitignore").write_text("codeset.json\n", "utf-8")
    git = ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "bench"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()

    def module(branch: int, index: int) -> dict[str, object]:
        text = (f"// b{branch} m{index}\n" + "module.exports.v = 'abcdefghij';\n" * 3200)[:MODULE_BYTES]
        raw = text.encode("ascii")
        digest = hashlib.sha256(raw).hexdigest()
        return {
            "name": f"m{index}",
            "kind": "javascript",
            "size": len(raw),
            "sha256": digest,
            "file": f"m{index}.js",
        } | {"text": text}

    data = {
        "format": "screeps-gitops-codeset",
        "format_version": 1,
        "commit": commit,
        "manifest": {"path": "gitops.yaml", "sha256": hashlib.sha256((root / "gitops.yaml").read_bytes()).hexdigest()},
        "warnings": [],
        "branches": [
            {"server": "local", "branch": f"b{b}", "modules": [module(b, i) for i in range(MODULES)]}
            for b in range(BRANCHES)
        ],
    }
    (root / "codeset.json").write_text(json.dumps(data, ensure_ascii=True, separators=(",", ":")), "ascii")


def tree(rev: str, into: Path) -> Path:
    """The ``gitops`` package of ``rev`` in ``into``, byte-compiled."""
    into.mkdir()
    archive = subprocess.run(["git", "archive", rev, "gitops"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(into / "gitops")], check=True, capture_output=True)
    return into


def peak(source: Path, code: str, cwd: Path) -> float:
    # The tool's caches in the bench's folder (the validated manifest's among them), not the user's.
    caches = {name: str(cwd.parent / name.lower()) for name in ("XDG_CACHE_HOME", "XDG_STATE_HOME")}
    env = clean_env() | caches | {"PYTHONPATH": str(source)}
    usage = run_measured([sys.executable, "-c", code], env, cwd, timeout=300)
    if usage.code != 0:
        raise SystemExit(f"{source}: exit {usage.code}: {usage.output[-600:]}")
    return usage.rss_mb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("revisions", nargs=2, metavar="REV", help="the revision before, then the one after")
    parser.add_argument("--rounds", type=int, default=3, help="processes of each kind per revision (median)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gitops-bench-codeset-") as tmp:
        work = Path(tmp)
        project(work / "bot")
        size = (work / "bot" / "codeset.json").stat().st_size
        print(f"code set file: {size / 1e6:.1f} MB, {BRANCHES} branches")
        for rev in options.revisions:
            source = tree(rev, work / f"tree-{len(list(work.iterdir()))}")
            peak(source, LOAD, work / "bot")  # a user's second run: the manifest from the validated-manifest cache
            loads = [peak(source, LOAD, work / "bot") for _ in range(options.rounds)]
            reads = [peak(source, READ, work / "bot") for _ in range(options.rounds)]
            load, read = statistics.median(loads), statistics.median(reads)
            print(
                f"{rev}: peak RSS {read:.0f} MB reading (manifest alone {load:.0f} MB): the read {read - load:.0f} MB"
            )


if __name__ == "__main__":
    main()
