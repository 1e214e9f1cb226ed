"""The use cases: plan and apply, called by the CLI and the GitHub Action alike."""
