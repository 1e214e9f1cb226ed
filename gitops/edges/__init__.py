"""The rim: HTTP client, git and files, the ledger, plan files, the clock, the build's processes.

Everything here touches the world outside the process, and nothing here decides: the rules live in the pure core,
which the edges feed with facts and whose decisions they carry out. A new server quirk, a file format or a process
to run belongs here; a new rule about what to deploy belongs in :mod:`gitops.core`.
"""
