"""A run's options (``gitops.app.options``): built once by the front end and frozen (issue 47), each option's choices
and default written once, and read from here by the CLI and by the GitHub Action's inputs, so they cannot drift."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click
import pytest

from gitops.app import options as chosen
from gitops.app.options import DEFAULT_REFRESH, Options
from gitops.app.targets import Targets
from gitops.cli import cli
from gitops.config import model
from gitops.edges.clock import ManualClock, SystemClock
from gitops.errors import UsageError
from gitops.github.inputs import Inputs


def _param(command: str, name: str) -> click.Parameter:
    with click.Context(cli) as ctx:
        found = cli.get_command(ctx, command)
    assert found is not None, command
    (param,) = [p for p in found.params if p.name == name]
    return param


def test_options_refuse_to_change_once_made(tmp_path: Path) -> None:
    options = Options(manifest=tmp_path / "gitops.yaml", env={})
    for name, value in (("refresh", "never"), ("transport", object()), ("state_dir", tmp_path)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(options, name, value)
    assert options.refresh == DEFAULT_REFRESH
    assert options.transport is None
    assert options.state_dir is None


def test_replace_makes_another_and_leaves_the_first_as_it_was(tmp_path: Path) -> None:
    clock = ManualClock(1_800_000_000.0)
    first = Options(manifest=tmp_path / "gitops.yaml", env={"A": "1"}, clock=clock, targets=Targets.of(["s"]))
    second = dataclasses.replace(first, refresh="never")
    assert second is not first
    assert (first.refresh, second.refresh) == (DEFAULT_REFRESH, "never")
    # Everything else is carried over as it is: the same clock, environment, targets and interrupt.
    assert second.clock is clock
    assert second.env == {"A": "1"}
    assert second.targets == Targets(("s",))
    assert second.interrupt is first.interrupt
    assert second.manifest == first.manifest


def test_the_defaults_of_options_made_from_nothing_but_a_manifest(tmp_path: Path) -> None:
    options = Options(manifest=tmp_path / "gitops.yaml", env={})
    assert options.refresh == DEFAULT_REFRESH == "auto"
    assert options.max_wait == chosen.DEFAULT_MAX_WAIT == 60.0
    assert isinstance(options.clock, SystemClock)
    assert not options.targets  # every server and branch
    assert options.verify is None
    assert options.unattended_apply is False
    assert options.deploy_how == "apply"
    # Each run gets its own interrupt (a signal during one run is not another's).
    assert Options(manifest=tmp_path, env={}).interrupt is not options.interrupt


def test_the_choices_are_the_documented_ones() -> None:
    assert chosen.REFRESH_CHOICES == ("always", "auto", "never")
    assert DEFAULT_REFRESH in chosen.REFRESH_CHOICES
    assert chosen.FORMATS == ("text", "json", "markdown")
    assert chosen.DEFAULT_FORMAT in chosen.FORMATS
    # The manifest's default name is the one the config layer finds and writes.
    assert chosen.DEFAULT_MANIFEST == model.DEFAULT_MANIFEST == "gitops.yaml"


def test_the_cli_offers_these_choices_and_defaults() -> None:
    refresh = _param("plan", "refresh")
    assert isinstance(refresh.type, click.Choice)
    assert tuple(refresh.type.choices) == chosen.REFRESH_CHOICES
    assert refresh.default == DEFAULT_REFRESH
    assert _param("plan", "max_wait").default == chosen.DEFAULT_MAX_WAIT
    assert _param("apply", "manifest").default == chosen.DEFAULT_MANIFEST
    fmt = _param("plan", "fmt")
    assert isinstance(fmt.type, click.Choice)
    assert tuple(fmt.type.choices) == chosen.FORMATS
    assert fmt.default == chosen.DEFAULT_FORMAT


def test_the_action_reads_the_same_defaults_and_refuses_another_refresh() -> None:
    inputs = Inputs.from_env({})
    assert inputs.max_wait == chosen.DEFAULT_MAX_WAIT
    assert inputs.manifest == Path(chosen.DEFAULT_MANIFEST)
    assert inputs.refresh is None  # the policy's default (DEFAULT_REFRESH, or never without credentials)
    for choice in chosen.REFRESH_CHOICES:
        assert Inputs.from_env({"GITOPS_REFRESH": choice}).refresh == choice
    with pytest.raises(UsageError) as info:
        Inputs.from_env({"GITOPS_REFRESH": "sometimes"})
    assert "'sometimes'" in info.value.message
    assert "always, auto or never" in info.value.message
