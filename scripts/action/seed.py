"""action.yml's seed step: the ledger the build job handed on beside the code set, into this job's state folder.

Run with ``python -I``. Only regular files of ``<handoff>/state`` are copied (a link, a FIFO or a device is skipped),
under the same relative names; the ledger is sealed by the credential's key, so what the build job could have changed
in these files is not believed by the tool (docs/budget-and-ledger.md, the seal). Prints ``key=<the cache key the
build job restored>`` for the save step (a safe key only; else empty).
"""

import os
import re
import shutil
import stat
import sys


def main(handoff: str, state: str) -> None:
    source = os.path.join(handoff, "state")
    for root, _dirs, files in os.walk(source):  # os.walk never follows a link to a folder
        relative = os.path.relpath(root, source)
        for name in files:
            path = os.path.join(root, name)
            if not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            target = os.path.normpath(os.path.join(state, relative, name))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(path, target, follow_symlinks=False)
    key = ""
    path = os.path.join(handoff, "restored-key")
    try:
        if stat.S_ISREG(os.lstat(path).st_mode):
            with open(path, encoding="utf-8") as handle:
                key = handle.readline(600).strip()
    except (OSError, UnicodeDecodeError):
        pass
    print("key=" + (key if re.fullmatch(r"[A-Za-z0-9._-]{1,512}", key) else ""))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
