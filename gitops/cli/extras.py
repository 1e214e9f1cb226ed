"""The optional extra ``serve``: what ``gitops serve``, ``gitops demo`` and ``gitops watch`` need beyond the core.

plan, apply, drift and the GitHub Action need only the core dependencies (the Action installs exactly those, from
``requirements/action.lock``). The local stand-in (starlette, uvicorn) and the file watcher (watchfiles) come with
``pip install 'screeps-gitops[serve]'``; without them these commands stop before anything else with one message
that says what to install (exit code 4, as other usage that cannot run as given), instead of an ImportError.
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

INSTALL = "pip install 'screeps-gitops[serve]'"


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
            hint=f"Install it with: {INSTALL} (or pipx install 'screeps-gitops[serve]', or "
            "pipx inject screeps-gitops 'screeps-gitops[serve]' for an existing pipx install).",
        )
