"""``gitops serve``'s run of the stand-in (``gitops/cli/standinrun.py``): the banner names where it listens and the
demo login, the login works on it, and Ctrl-C stops it with its temporary state deleted."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx


def test_a_demo_stand_in_serves_its_made_up_login_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "gitops", "serve", "--demo", "--port", "0"]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path) as server:
        try:
            assert server.stdout is not None
            banner = [server.stdout.readline() for _ in range(3)]
            while not (line := server.stdout.readline()).startswith("  token "):
                banner.append(line)
            url = re.search(r"listening on (http://\S+)", banner[0])
            state = re.search(r"state:\s+(\S+) \(temporary", banner[1])
            token = line.split()[1]
            assert url is not None, banner
            assert state is not None, banner
            answer = httpx.get(f"{url.group(1)}/api/user/branches", headers={"X-Token": token}, timeout=10)
            assert answer.status_code == 200
            assert Path(state.group(1)).exists()
        finally:
            server.send_signal(signal.SIGINT)
            out, err = server.communicate(timeout=30)
    assert "gitops serve: stopped." in out, err
    assert not Path(state.group(1)).exists()  # the temporary state went with the server
