"""Renderers: what a plan, a drift report, the deployment state and a rehearsal look like to people and machines.

Each reads a value the use cases made (frozen, already decided) and returns text: terminal text, Markdown for pull
requests and job summaries, and versioned JSON for scripts. No renderer does I/O or decides anything, so the CLI
and the GitHub Action show the same thing, and a new output is a new renderer, not a change to the use cases.
"""
