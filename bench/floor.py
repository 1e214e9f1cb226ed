"""The floor of the side-by-side benchmark: the least a deploy with gitops' guarantees can cost.

It does only what ``gitops apply`` must do on the private server, with nothing else: read every ``.js`` file under
ROOT, sign in, ask ``GET /api/user/branches`` (on the private server it carries each branch's modules: that is the
check of what the server holds), and upload with ``POST /api/user/code`` only when the branch differs. No manifest
validation, no ledger, no plan, no output beyond one line.

- ``--libs stdlib``: the standard library only (``http.client``, ``json``); the floor of Python itself.
- ``--libs card``: first imports the libraries that every gitops run loads before its first request and that the
  design card keeps (click for the command line, PyYAML for the manifest, httpx for HTTP, with orjson), reads the
  URL from the manifest with PyYAML, and talks through httpx. Whatever gitops does beyond this costs more.

Usage: BENCH_USER=... BENCH_PASSWORD=... python floor.py --libs stdlib|card MANIFEST ROOT BRANCH
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any


def read_modules(root: str) -> dict[str, str]:
    modules: dict[str, str] = {}
    for folder, _dirs, files in os.walk(root):
        for name in files:
            if name.endswith(".js"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as handle:
                    modules[os.path.relpath(path, root).replace(os.sep, "/")[:-3]] = handle.read()
    return modules


Call = Callable[..., Any]  # call(method, path, body=None, token=None) -> the answer's JSON


def deploy(call: Call, user: str, password: str, branch: str, modules: dict[str, str]) -> bool:
    """Sign in, check the branch through the branch list, upload only when it differs; whether it uploaded."""
    token = call("POST", "/api/auth/signin", {"email": user, "password": password})["token"]
    listed = call("GET", "/api/user/branches", token=token)["list"]
    held = next((b.get("modules") for b in listed if b.get("branch") == branch), None)
    if held == modules:
        return False
    call("POST", "/api/user/code", {"branch": branch, "modules": modules}, token)
    return True


def headers(token: str | None) -> dict[str, str]:
    auth = {} if token is None else {"X-Token": token, "X-Username": token}
    return {"Content-Type": "application/json", **auth}


def stdlib(url: str, user: str, password: str, branch: str, modules: dict[str, str]) -> bool:
    import http.client
    import json
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=30)

    def call(method: str, path: str, body: Any = None, token: str | None = None) -> Any:
        conn.request(method, path, None if body is None else json.dumps(body).encode(), headers(token))
        answer = conn.getresponse()
        data = answer.read()
        if answer.status != 200:
            raise SystemExit(f"{method} {path}: HTTP {answer.status}")
        return json.loads(data)

    return deploy(call, user, password, branch, modules)


def card(manifest: str, user: str, password: str, branch: str, modules: dict[str, str]) -> bool:
    import click  # noqa: F401  (loaded by every gitops run before its first request)
    import httpx
    import orjson
    import yaml

    with open(manifest, encoding="utf-8") as handle:
        url = next(iter(yaml.safe_load(handle)["servers"].values()))["url"]
    with httpx.Client(base_url=url, timeout=30) as http:

        def call(method: str, path: str, body: Any = None, token: str | None = None) -> Any:
            content = None if body is None else orjson.dumps(body)
            answer = http.request(method, path, content=content, headers=headers(token))
            if answer.status_code != 200:
                raise SystemExit(f"{method} {path}: HTTP {answer.status_code}")
            return orjson.loads(answer.content)

        return deploy(call, user, password, branch, modules)


def main() -> None:
    if len(sys.argv) != 6 or sys.argv[1] != "--libs" or sys.argv[2] not in ("stdlib", "card"):
        raise SystemExit("usage: floor.py --libs stdlib|card MANIFEST ROOT BRANCH")
    libs, manifest, root, branch = sys.argv[2:]
    user, password = os.environ["BENCH_USER"], os.environ["BENCH_PASSWORD"]
    modules = read_modules(root)
    if libs == "stdlib":
        with open(manifest, encoding="utf-8") as handle:
            # The URL without a YAML parser: the benchmark's manifest has one `url:` line.
            url = next(line.split(":", 1)[1].strip() for line in handle if line.strip().startswith("url:"))
        uploaded = stdlib(url, user, password, branch, modules)
    else:
        uploaded = card(manifest, user, password, branch, modules)
    print(f"{'uploaded' if uploaded else 'unchanged'}: {len(modules)} modules")


if __name__ == "__main__":
    main()
