"""What a run needs from outside (flags, environment, clock, transport), and each option's choices and default.

The CLI (``gitops.cli.common``) and the GitHub Action's inputs (``gitops.github.inputs.Inputs``) both read the
choices and defaults from here, so that they cannot drift apart. The use cases take everything from outside through
:class:`Options` (the clock and the HTTP transport included), which is how the tests inject the stand-in's clock and
a transport that produces faults.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gitops.app.targets import Targets
from gitops.edges.clock import Clock, SystemClock, Waiting
from gitops.edges.interrupts import Interrupt

if TYPE_CHECKING:
    from gitops.core.health import VerifyOverrides

Refresh = Literal["always", "auto", "never"]
#: ``--refresh``: always download every branch; auto: skip branches this tool uploaded recently; never: the ledger.
REFRESH_CHOICES: tuple[Refresh, ...] = ("always", "auto", "never")
DEFAULT_REFRESH: Refresh = "auto"

#: ``--max-wait``: the longest wait (seconds) after a 429 before retrying.
DEFAULT_MAX_WAIT = 60.0

Format = Literal["text", "json", "markdown"]
#: ``gitops plan --format``.
FORMATS: tuple[Format, ...] = ("text", "json", "markdown")
DEFAULT_FORMAT: Format = "text"

#: The manifest's file name when none is given.
DEFAULT_MANIFEST = "gitops.yaml"


@dataclass(frozen=True)
class Options:
    """Everything a run needs from outside: flags, environment, clock, and (for tests) the HTTP transport.

    Built once by the front end and frozen: a run that needs another value (the CI policy's ``refresh: never`` when
    no credentials are given) makes another with :func:`dataclasses.replace` before its session opens, so no part
    of a run sees the options change under it."""

    manifest: Path
    env: Mapping[str, str]
    ref: str | None = None
    refresh: Refresh = DEFAULT_REFRESH
    max_wait: float = DEFAULT_MAX_WAIT
    state_dir: Path | None = None
    clock: Clock = field(default_factory=SystemClock)
    transport: Any = None
    on_wait: Callable[[float, str], None] | None = None
    log: Callable[[str], None] | None = None
    #: Around every wait that may last (a server's answer, a retry's pause, another run's lock): shows signs of life
    #: (``gitops.render.progress.Progress.waiting``); ``None`` shows nothing.
    waiting: Waiting | None = None
    #: ``--server``/``--branch``: the session sees only these (:func:`gitops.app.targets.select`).
    targets: Targets = field(default_factory=Targets)
    #: ``--no-verify`` and the overrides of ``verify:`` (ticks, time limit); ``None``: none, the manifest's
    #: ``verify:`` as written (:mod:`gitops.core.health` is then not imported before the plan needs it).
    verify: VerifyOverrides | None = None
    #: ``apply --yes`` (no saved plan, nothing to confirm): what applying will need is prepared while the servers
    #: are read, instead of after the plan is shown: the compression probe when it is due (:mod:`gitops.app.headstart`)
    #: and the deflate of the upload bodies (:class:`gitops.app.headstart.start.HeadStart`).
    unattended_apply: bool = False
    #: SIGINT/SIGTERM during a verification's watch (``edges/interrupts.py``): the front end installs its handlers.
    interrupt: Interrupt = field(default_factory=Interrupt)
    #: How the deploys of this run are recorded in the history: ``rollback`` for ``gitops rollback``.
    deploy_how: Literal["apply", "rollback"] = "apply"
