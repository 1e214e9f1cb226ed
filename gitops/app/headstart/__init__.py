"""The fast start of a plan, behind one object (:class:`gitops.app.headstart.start.HeadStart`).

A no-op deploy mostly waits: for imports, for its ledgers, for the servers' round trips. The head start fills
that wait without changing what is asked or decided, so that ``make_plan`` gives the same plan with or without
it. ``localread``: the local code read by a forked child, begun as soon as the manifest is loaded; ``sidereads``:
a first contact's reads sent ahead on side connections; ``start``: the object that ties them to the session (early
connections, the branch list sent ahead and read without the HTTP client, bodies deflated ahead). This package
file imports nothing, so that a command can begin the local read before it imports the rest.
"""
