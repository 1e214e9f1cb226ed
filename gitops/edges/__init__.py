"""The rim: HTTP client, git and files, the ledger, plan files, the clock. Thin; decisions stay in the core."""
