"""Helpers for the stand-in's tests: a client per stand-in, and one valid request for every limited endpoint."""

from __future__ import annotations

from typing import Any

import httpx

from gitops.standin.testing import StandIn

JSON_TYPE = "application/json; charset=utf-8"

#: One valid request (method, path, httpx keyword arguments) for each endpoint of the limit table.
SAMPLE_REQUESTS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "GET /api/game/room-terrain": ("GET", "/api/game/room-terrain", {"params": {"room": "W1N1", "encoded": "1"}}),
    "POST /api/game/map-stats": ("POST", "/api/game/map-stats", {"json": {"rooms": ["W1N1"], "statName": "owner0"}}),
    "GET /api/user/code": ("GET", "/api/user/code", {}),
    "POST /api/user/code": ("POST", "/api/user/code", {"json": {"branch": "default", "modules": {"main": "x"}}}),
    "POST /api/user/set-active-branch": (
        "POST",
        "/api/user/set-active-branch",
        {"json": {"branch": "default", "activeName": "activeWorld"}},
    ),
    "GET /api/user/memory": ("GET", "/api/user/memory", {}),
    "POST /api/user/memory": ("POST", "/api/user/memory", {"json": {"path": "a", "value": 1}}),
    "GET /api/user/memory-segment": ("GET", "/api/user/memory-segment", {"params": {"segment": "0"}}),
    "POST /api/user/memory-segment": ("POST", "/api/user/memory-segment", {"json": {"segment": 0, "data": "x"}}),
    "POST /api/user/console": ("POST", "/api/user/console", {"json": {"expression": "Game.time"}}),
    "GET /api/game/market/orders-index": ("GET", "/api/game/market/orders-index", {}),
    "GET /api/game/market/orders": ("GET", "/api/game/market/orders", {"params": {"resourceType": "energy"}}),
    "GET /api/game/market/my-orders": ("GET", "/api/game/market/my-orders", {}),
    "GET /api/game/market/stats": ("GET", "/api/game/market/stats", {"params": {"resourceType": "energy"}}),
    "GET /api/game/user/money-history": ("GET", "/api/game/user/money-history", {}),
}


def client(standin: StandIn, token: str | None = None) -> httpx.Client:
    """An HTTP client for the stand-in, sending ``token`` in ``X-Token`` when given."""
    headers = {"X-Token": token} if token else {}
    return httpx.Client(base_url=standin.url, headers=headers, timeout=30)


def send(http: httpx.Client, endpoint: str, **extra: Any) -> httpx.Response:
    """Send the sample request of ``endpoint`` (extra httpx arguments override the sample's)."""
    method, path, kwargs = SAMPLE_REQUESTS[endpoint]
    return http.request(method, path, **{**kwargs, **extra})


def window(response: httpx.Response) -> tuple[int, int, int]:
    """(limit, remaining, reset) from the ``X-RateLimit-*`` headers."""
    h = response.headers
    return int(h["x-ratelimit-limit"]), int(h["x-ratelimit-remaining"]), int(h["x-ratelimit-reset"])


def has_window(response: httpx.Response) -> bool:
    return any(name in response.headers for name in ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"))
