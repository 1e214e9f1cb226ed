"""``gitops init`` in an npm-workspaces monorepo (issue 46, point 2): a shape written for the test, on a real Git
repository, through the real command."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from gitops.cli import run
from tests.factories import make_repo

MONOREPO = {
    "package.json": json.dumps({"name": "top", "private": True, "workspaces": ["packages/*"]}),
    "eslint.config.shared.js": "module.exports = [];\n",
    "packages/lib/package.json": json.dumps({"name": "lib"}),
    "packages/lib/index.js": "module.exports = {};\n",
    "packages/bot/package.json": json.dumps({"name": "bot", "scripts": {"build": "rollup -c", "watch": "rollup -cw"}}),
    "packages/bot/rollup.config.js": "export default { input: 'src/main.ts', output: { file: 'dist/main.js' } };\n",
    "packages/bot/src/main.ts": "export const loop = () => {};\n",
}


def gitops(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_init_at_a_workspaces_top_refuses_and_names_where_to_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "mono", MONOREPO)
    monkeypatch.chdir(repo)
    code, out, err = gitops(capsys, "init", "--token-env", "SCREEPS_TOKEN")
    assert code == 4, out + err
    assert err.startswith("Error: package.json declares npm workspaces ('packages/*') and this folder holds no bot")
    assert "cd packages/bot && gitops init" in err
    assert "Traceback" not in err
    assert not (repo / "gitops.yaml").exists()


def test_init_in_the_bots_folder_writes_its_own_manifest_below_another(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "mono", {**MONOREPO, "gitops.yaml": "version: 1\n"})
    monkeypatch.chdir(repo / "packages" / "bot")
    monkeypatch.delenv("GITOPS_MANIFEST", raising=False)
    code, out, err = gitops(capsys, "init", "--token-env", "SCREEPS_TOKEN")
    assert code == 0, out + err
    assert "found above this folder" not in err
    written = yaml.safe_load(Path("gitops.yaml").read_text(encoding="utf-8"))["branches"][0]
    # rollup's own configuration says where the bundle goes; the build script, not the watching one, builds it.
    assert (written["root"], written["build"]) == ("dist", "npm run build")
    assert (repo / "gitops.yaml").read_text(encoding="utf-8") == "version: 1\n"  # the manifest above is untouched
    assert os.path.samefile(Path.cwd(), repo / "packages" / "bot")


def test_a_bundle_requiring_its_wasm_by_stem_validates_as_init_wrote_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = (
        "import screeps from 'rollup-plugin-screeps-world';\nimport copy from 'rollup-plugin-copy';\n"
        "export default { input: 'src/main.ts', output: { file: 'dist/main.js' },\n"
        "  plugins: [copy({ targets: [{ src: 'src/pkg/engine_bg.wasm', dest: 'dist' }] }), screeps({})] };\n"
    )
    repo = make_repo(
        tmp_path / "bot",
        {
            "package.json": json.dumps({"scripts": {"build": "rollup -c", "watch": "rollup -cw"}}),
            "rollup.config.js": config,
            "src/main.ts": "export const loop = () => {};\n",
            "src/pkg/engine_bg.wasm": "\0asm",
            ".gitignore": "dist/\n",
        },
    )
    monkeypatch.chdir(repo)
    code, out, err = gitops(capsys, "init", "--token-env", "SCREEPS_TOKEN")
    assert code == 0, out + err
    # What the build writes (rollup is not installed here): the bundle requiring the module by its stem.
    (repo / "dist").mkdir()
    (repo / "dist" / "main.js").write_text("const m = new WebAssembly.Module(require('engine_bg'));\n")
    (repo / "dist" / "engine_bg.wasm").write_bytes(b"\0asm\1\0\0\0")
    monkeypatch.setenv("GITOPS_SKIP_BUILD", "1")
    code, out, err = gitops(capsys, "validate", "--list")
    assert code == 0, out + err
    assert "engine_bg  " in out
    assert "binary" in out
