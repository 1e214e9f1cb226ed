"""The CI policy: what a CI job adds to ``gitops plan``/``apply``, written once for every CI front end.

A front end (:mod:`gitops.github`, :mod:`gitops.gitlab`) reads its system's inputs and implements
:class:`gitops.app.ci.host.Host` (inputs, log lines and annotations, masks, outputs, summary, comment); the rest is
here: which credentials a run may use and which a change request may not (:mod:`gitops.app.ci.trust`), the refresh
a run without credentials takes, the flow of each command and the step's exit code (:mod:`gitops.app.ci.run`), and
what the run found out (:mod:`gitops.app.ci.report`).
"""
