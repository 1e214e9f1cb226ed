"""The optional extra ``serve``: what ``gitops serve``, ``gitops demo`` and ``gitops watch`` need beyond the core.

plan, apply, drift and the GitHub Action need only the core dependencies (the Action installs exactly those, from
``requirements/action.lock``). The local stand-in (starlette, uvicorn) and the file watcher (watchfiles) come with
the ``serve`` extra (or its packages installed beside the tool); without them these commands stop before anything
else with one message that says what to install (exit code 4, as other usage that cannot run as given), instead of
an ImportError.
"""

from __future__ import annotations

import importlib.util

from gitops.errors import UsageError

#: The import names each command needs from the extra.
NEEDS: dict[str, tuple[str, ...]] = {
    "serve": ("starlette", "uvicorn"),
    "demo": ("starlette", "uvicorn"),
    "watch": ("watchfiles",),
}

#: The extra's packages, as pyproject.toml's ``serve`` extra pins them (tests/cli/test_extras.py keeps the two equal).
#: Named by package, not by ``screeps-gitops[serve]``: the tool is not on PyPI, so that requirement would resolve
#: to "No matching distribution"; the packages install the same way into any environment the tool runs from.
SERVE_PACKAGES = ("starlette>=0.37", "uvicorn[standard]>=0.29", "watchfiles>=0.21")

_QUOTED = " ".join(f"'{p}'" for p in SERVE_PACKAGES)
INSTALL_HINT = (
    f"Install its packages where gitops runs: pip install {_QUOTED} "
    f"(a pipx install: pipx inject screeps-gitops {_QUOTED}); "
    "or reinstall the tool with the extra, from a clone: pip install '.[serve]' "
    "(gitops help commands, 'Installing': from a wheel or a commit)."
)


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


def require_serve_extra(command: str) -> None:
    """Raise :class:`UsageError` naming the extra when a module ``command`` needs is not installed."""
    missing = [m for m in NEEDS[command] if _missing(m)]
    if missing:
        raise UsageError(
            f"gitops {command} needs the optional extra 'serve', which is not installed "
            f"(missing: {', '.join(missing)})",
            hint=INSTALL_HINT,
        )
