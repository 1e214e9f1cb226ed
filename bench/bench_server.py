"""Requests per second of the stand-in for GET and POST /api/user/code with a 100-module branch.

Starts ``gitops serve --testing`` as a separate process on a free loopback port (so the client does not share the
server's interpreter), lifts the token's rate limits as the no-rate-limit page would, uploads the branch once, then
sends requests one after another from one keep-alive client for a fixed time per endpoint.

Usage: .venv/bin/python bench/bench_server.py [--seconds 5] [--modules 100] [--module-size 1000]
                                             [--client http.client|httpx] [--json]
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

TOKEN = "bench0123456789abcdef0123456789ab"
HEADERS = {"X-Token": TOKEN, "Content-Type": "application/json; charset=utf-8"}
ACCOUNTS = f"users:\n  - username: bench\n    tokens:\n      - value: {TOKEN}\n        full: true\n"


def _modules(count: int, size: int) -> dict[str, str]:
    line = "module.exports.run = function (creep) { creep.say('hello'); };\n"
    body = (line * (size // len(line) + 1))[:size]
    modules = {f"role.worker{i:03d}": f"// module {i}\n{body}" for i in range(count - 1)}
    modules["main"] = "module.exports.loop = function () {};\n"
    return modules


Send = Callable[[str, str, bytes | None], tuple[int, bytes]]


def _http_client(url: str) -> tuple[Send, Callable[[], None]]:
    """The standard library's client: little overhead of its own, so the figure is mostly the server's."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)

    def send(method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        conn.request(method, path, body=body, headers=HEADERS)
        response = conn.getresponse()
        return response.status, response.read()

    return send, conn.close


def _httpx_client(url: str) -> tuple[Send, Callable[[], None]]:
    """httpx, as the tool's own client uses it (slower per request on the client side)."""
    client = httpx.Client(base_url=url, headers=HEADERS, timeout=30)

    def send(method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        response = client.request(method, path, content=body)
        return response.status_code, response.content

    return send, client.close


def _measure(name: str, seconds: float, call: Callable[[], tuple[int, bytes]]) -> dict[str, float | str | int]:
    for _ in range(20):  # warm up the connection and the server
        call()
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        status, body = call()
        latencies.append(time.perf_counter() - t0)
        if status != 200:
            raise SystemExit(f"{name}: HTTP {status}: {body[:200]!r}")
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "endpoint": name,
        "requests": len(latencies),
        "per_second": round(len(latencies) / elapsed, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 2),
        "p99_ms": round(latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="time spent on each endpoint (default 5)")
    parser.add_argument("--modules", type=int, default=100, help="modules in the branch (default 100)")
    parser.add_argument("--module-size", type=int, default=1000, help="characters per module (default 1000)")
    parser.add_argument(
        "--client", choices=["http.client", "httpx"], default="http.client", help="HTTP client (default http.client)"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-standin-") as tmp:
        accounts = Path(tmp) / "accounts.yaml"
        accounts.write_text(ACCOUNTS, encoding="utf-8")
        command = [sys.executable, "-m", "gitops", "serve", "--port", "0", "--testing"]
        command += ["--accounts", str(accounts), "--data", str(Path(tmp) / "standin.sqlite3")]
        server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert server.stdout is not None
            first = server.stdout.readline()
            found = re.search(r"listening on (\S+)", first)
            if found is None:
                raise SystemExit(f"gitops serve did not start: {first!r}")
            url = found.group(1)
            results = _run(url, args.seconds, _modules(args.modules, args.module_size), args.client)
        finally:
            server.terminate()
            server.wait(timeout=30)

    if args.json:
        summary = {"modules": args.modules, "module_size": args.module_size, "client": args.client, "results": results}
        print(json.dumps(summary, indent=2))
        return
    print(
        f"stand-in on loopback, one {args.client} client, keep-alive, one request at a time; "
        f"branch of {args.modules} modules of ~{args.module_size} characters"
    )
    for r in results:
        print(
            f"  {r['endpoint']:<22} {r['per_second']:>8} requests/s   "
            f"p50 {r['p50_ms']} ms   p99 {r['p99_ms']} ms   ({r['requests']} requests, "
            f"{r.get('response_bytes', r.get('request_bytes'))} bytes of JSON each)"
        )


def _run(url: str, seconds: float, modules: dict[str, str], client: str) -> list[dict[str, float | str | int]]:
    upload = json.dumps({"branch": "default", "modules": modules}).encode()
    path = "/api/user/code?branch=default"
    send, close = (_httpx_client if client == "httpx" else _http_client)(url)
    try:
        # The token's limits would stop the benchmark after 60 GETs: lift them, as "Proceed" on the page does.
        status, body = send("POST", "/api/auth/noratelimit", json.dumps({"token": TOKEN}).encode())
        if json.loads(body).get("ok") != 1:
            raise SystemExit(f"could not lift the token's rate limits: {status} {body!r}")
        status, body = send("POST", "/api/user/code", upload)
        if json.loads(body).get("ok") != 1:
            raise SystemExit(f"the upload failed: {status} {body!r}")
        status, body = send("GET", path, None)
        if json.loads(body).get("modules") != modules:
            raise SystemExit("the download does not match the upload")
        get = _measure("GET /api/user/code", seconds, lambda: send("GET", path, None))
        get["response_bytes"] = len(body)
        post = _measure("POST /api/user/code", seconds, lambda: send("POST", "/api/user/code", upload))
        post["request_bytes"] = len(upload)
    finally:
        close()
    return [get, post]


if __name__ == "__main__":
    main()
