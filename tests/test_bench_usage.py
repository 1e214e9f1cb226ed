"""The benchmarks' process measurement (``bench/launch.py`` through ``bench/proc_usage.py``): a command's own peak
memory, not its parent's; its exit code and output; a timeout that leaves no process behind."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from proc_usage import Timeout, clean_env, run_measured  # noqa: E402


def test_peak_memory_is_the_commands_own_even_from_a_big_parent(tmp_path: Path) -> None:
    # This process grows past 200 MB first: spawned directly, a child would report at least that much.
    ballast = b"\x01" * (200 * 1024 * 1024)
    small = run_measured([sys.executable, "-S", "-c", "pass"], clean_env(), tmp_path, timeout=60)
    big = run_measured(
        [sys.executable, "-S", "-c", "x = b'\\x01' * (60 * 1024 * 1024); print('done')"], clean_env(), tmp_path, 60
    )
    assert len(ballast) == 200 * 1024 * 1024
    assert small.code == 0
    assert small.rss_mb < 40, small
    assert 60 < big.rss_mb < 120, big
    assert big.output.strip() == "done"
    assert big.cpu > 0
    assert 0 < big.wall < 60


def test_exit_code_and_output_are_passed_on(tmp_path: Path) -> None:
    usage = run_measured(
        [sys.executable, "-S", "-c", "import sys; print('to out'); print('to err', file=sys.stderr); sys.exit(3)"],
        clean_env(),
        tmp_path,
        timeout=60,
    )
    assert usage.code == 3
    assert "to out" in usage.output
    assert "to err" in usage.output


def test_timeout_kills_the_command_and_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    script = f"echo $$ > {pid_file}; sleep 30 & echo $! >> {pid_file}; wait"
    started = time.monotonic()
    with pytest.raises(Timeout, match="killed after 1 s"):
        run_measured(["sh", "-c", script], clean_env(), tmp_path, timeout=1)
    assert time.monotonic() - started < 10
    pids = [int(line) for line in pid_file.read_text().split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in pids)


def test_clean_env_drops_what_would_steer_the_measured_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("GITOPS_REFRESH", "always")
    monkeypatch.setenv("NODE_OPTIONS", "--inspect")
    env = clean_env()
    assert not {"PYTHONDONTWRITEBYTECODE", "GITOPS_REFRESH", "NODE_OPTIONS"} & set(env)
    assert env["PATH"]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")
