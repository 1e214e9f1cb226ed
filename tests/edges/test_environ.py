"""``gitops/edges/environ.py``: the run's secret values overwritten in the process's initial environment block and
the process made not dumpable, before a build starts. Checked in a real child process (the measures are for its
life), through ``/proc/self/environ`` and ``prctl``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the measures are Linux's")

CHILD = """
import ctypes, json
from gitops.edges.environ import not_dumpable, scrub_environment_block, seal_process
scrubbed = scrub_environment_block(["GITOPS_SECRET_X", "NOT_SET_AT_ALL"])
raw = open("/proc/self/environ", "rb").read()
block = raw.split(b"\\0")
libc = ctypes.CDLL(None)
before = libc.prctl(3, 0, 0, 0, 0)
seal_process(["OTHER_X"])
after = libc.prctl(3, 0, 0, 0, 0)
print(json.dumps({
    "scrubbed": scrubbed,
    "secret": [e.decode("latin-1") for e in block if e.startswith(b"GITOPS_SECRET_X=")],
    "value_left": b"s3cret" in raw,
    "other": [e.decode("latin-1") for e in block if e.startswith(b"KEEP_X=")],
    "dumpable": [before, after],
}))
"""


def test_the_secret_is_overwritten_in_place_and_the_process_is_not_dumpable() -> None:
    env = {**os.environ, "GITOPS_SECRET_X": "s3cret", "KEEP_X": "visible", "OTHER_X": "x"}
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    found = json.loads(done.stdout)
    assert found["scrubbed"] == ["GITOPS_SECRET_X"]
    assert found["secret"] == ["GITOPS_SECRET_X="]  # its value zeroed in place: the entry ends there
    assert found["value_left"] is False
    assert found["other"] == ["KEEP_X=visible"]
    assert found["dumpable"] == [1, 0]
