"""The stand-in as the official server looks to a client, in a process of its own, for the network benchmark.

Token authentication only, a branch list without modules (the official server's list carries names, flags and a
timestamp, not the code), and nothing that says whether it reads compressed bodies (no ``Accept-Encoding`` in its
answers: a client must find out, as with the official server). Every token is unlimited, so that the benchmark never
meets a rate limit. ``python bench/official_standin.py DATA_DIR USERS`` prints ``http://127.0.0.1:PORT`` and serves
until its standard input closes. User ``u0`` ... have tokens ``bench-token-0`` ...
"""

from __future__ import annotations

import sys
from pathlib import Path

from gitops.standin.testing import running_standin


def token_of(user: int) -> str:
    return f"bench-token-{user:04d}-0123456789abcdef0123"


def accounts(users: int) -> dict[str, object]:
    return {
        "users": [
            {
                "username": f"u{n}",
                "email": f"u{n}@example.invalid",
                "password": f"password-{n}",
                "tokens": [{"value": token_of(n), "full": True}],
            }
            for n in range(users)
        ]
    }


def main() -> None:
    data, users = Path(sys.argv[1]), int(sys.argv[2])
    pem = Path(sys.argv[3]) if len(sys.argv) > 3 else None
    data.mkdir(parents=True, exist_ok=True)
    with running_standin(accounts(users), data / "standin.sqlite3", tls=pem) as service:
        service.list_without_modules()
        service.app.advertise_encodings = False
        for n in range(users):
            service.grant_unlimited(token_of(n))
        print(service.url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
