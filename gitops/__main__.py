"""``python -m gitops``: the same entry point as the ``gitops`` script.

For environments where the script is not on ``PATH`` (a virtual environment not activated, a CI step that runs the
interpreter directly); everything else is :func:`gitops.cli.main`'s, exit codes included.
"""

from gitops.cli import main

main()
