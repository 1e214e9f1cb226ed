"""Renderers: terminal text, Markdown and JSON of a plan."""
