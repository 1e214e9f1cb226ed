"""``gitops/edges/service/__init__.py``: the game client's package gives its names from the modules that own them,
so that importers need not know which module that is."""

from __future__ import annotations

import sys

from gitops.edges import service


def test_each_name_is_the_owning_modules_own() -> None:
    assert len(service.__all__) == 7
    for name in service.__all__:
        value = getattr(service, name)
        owner = value.__module__
        assert owner != service.__name__, name  # given from the module that defines it
        assert getattr(sys.modules[owner], name) is value, name


def test_the_client_and_its_observers_are_among_them() -> None:
    assert {"ServiceClient", "ReadOnlyClient", "Observer", "DeferredObserver"} <= set(service.__all__)
    assert service.ServiceClient.__module__ == "gitops.edges.service.client"
