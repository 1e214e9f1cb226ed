"""Standard output that a closed pipe cannot cut short: ``gitops apply --yes | head -1``.

When the reader of standard output goes away (``head`` has its line, a pager is quit), the next write fails with
``EPIPE``. click's answer is to exit 1 at once, silently: an apply could stop between two uploads, and nobody
would learn whether the deploy happened. Here the first failed write switches what is left of standard output to
standard error, with one line that says so, and the command carries on to its own end and exit code. The
descriptor is pointed at ``/dev/null`` so that nothing buffered fails again at exit.
"""

from __future__ import annotations

import io
import os
import sys
from typing import TextIO


class PipeSafeStdout(io.TextIOBase):
    """``sys.stdout`` that turns into standard error once its pipe is closed (see the module)."""

    def __init__(self, stream: TextIO, fallback: TextIO) -> None:
        self._stream = stream
        self._fallback = fallback
        self._closed_pipe = False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._stream.encoding

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return self._stream.errors

    @property
    def buffer(self) -> object:
        """The binary stream beneath, for click's bytes (shell completion's answer); not guarded."""
        return (self._fallback if self._closed_pipe else self._stream).buffer

    def isatty(self) -> bool:
        return not self._closed_pipe and self._stream.isatty()

    def fileno(self) -> int:
        return (self._fallback if self._closed_pipe else self._stream).fileno()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not self._closed_pipe:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._switch()
        return self._fallback.write(text)

    def flush(self) -> None:
        if not self._closed_pipe:
            try:
                self._stream.flush()
                return
            except BrokenPipeError:
                self._switch()
        self._fallback.flush()

    def _switch(self) -> None:
        self._closed_pipe = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass
        self._fallback.write(
            "gitops: standard output was closed (the pipe's reader ended); the rest of the output follows here, "
            "and the command runs to its end.\n"
        )


def protect_stdout() -> None:
    """Make ``sys.stdout`` survive a closed pipe (for the ``gitops`` script's process; once)."""
    if not isinstance(sys.stdout, PipeSafeStdout) and sys.stdout is not None and sys.stderr is not None:
        sys.stdout = PipeSafeStdout(sys.stdout, sys.stderr)
