"""Start one command, wait for it, and write what it cost: ``python -S -E bench/launch.py FIGURES COMMAND...``.

Why a launcher: on Linux a process's peak RSS (``ru_maxrss``) starts at the resident size of the process that
forked it, because ``exec`` records the replaced address space's high-water mark. A benchmark process holding a
server client and 4.5 MB answers (~80 MB) would so lend its own size to every command it spawns, whatever their
real peak. This launcher (run without site, ~8 MB) spawns the command itself and reports the figures of ``wait4``:
wall seconds from spawn to exit, CPU user and system seconds and peak RSS (KiB) of the command and the children it
waited for. FIGURES gets one JSON object; the launcher exits with the command's exit code (128 + N for signal N).
Only ``os``, ``sys``, ``time`` and ``json`` are imported, to keep the launcher small.
"""

import json
import os
import sys
import time


def main() -> int:
    figures, argv = sys.argv[1], sys.argv[2:]
    start = time.perf_counter()
    pid = os.posix_spawnp(argv[0], argv, os.environ)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    result = {"wall": wall, "user": usage.ru_utime, "sys": usage.ru_stime, "maxrss_kib": usage.ru_maxrss, "code": code}
    with open(figures, "w", encoding="utf-8") as out:
        json.dump(result, out)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
