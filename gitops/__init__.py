"""screeps-gitops: make a Screeps server's code match a Git repository, within the token's rate limits."""

__version__ = "0.3.0"
