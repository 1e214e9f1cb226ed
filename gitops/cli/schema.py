"""``gitops schema``: the manifest's JSON Schema, derived from its one definition (``gitops/config/model.py``).

A module of its own: the schema needs the validator (pydantic, about 77 ms), which ``gitops validate`` of a manifest
already validated (the manifest cache) never imports.
"""

from __future__ import annotations

import json

import click

from gitops.config.validation import manifest_json_schema


@click.command("schema")
def schema() -> None:
    """Print the manifest's JSON Schema (the content of schemas/gitops.schema.json).

    Regenerate the committed file with: gitops schema > schemas/gitops.schema.json
    """
    click.echo(json.dumps(manifest_json_schema(), indent=2, ensure_ascii=False))
