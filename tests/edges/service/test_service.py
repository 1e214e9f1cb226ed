"""``gitops/edges/service/__init__.py``: the game client's package gives its names from the modules that own them,
so that importers need not know which module that is."""

from __future__ import annotations

from gitops.core.tokens import TokenInfo
from gitops.edges import service
from gitops.edges.service import client, failures, observer


def test_each_name_is_the_owning_modules_own() -> None:
    assert service.ServiceClient is client.ServiceClient
    assert service.ReadOnlyClient is client.ReadOnlyClient
    assert service.Observer is observer.Observer
    assert service.DeferredObserver is observer.DeferredObserver
    assert service.transport_detail is failures.transport_detail
    assert service.proxy_variable is failures.proxy_variable
    assert service.TokenInfo is TokenInfo


def test_it_exports_exactly_its_names() -> None:
    assert sorted(service.__all__) == sorted(
        [
            "DeferredObserver",
            "Observer",
            "ReadOnlyClient",
            "ServiceClient",
            "TokenInfo",
            "proxy_variable",
            "transport_detail",
        ]
    )
    assert all(hasattr(service, name) for name in service.__all__)
