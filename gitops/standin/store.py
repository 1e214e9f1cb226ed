"""The stand-in's state in one SQLite file: branches and their code, memory, segments, rate-limit windows, grants.

Every change is one ``BEGIN IMMEDIATE`` transaction with ``synchronous=FULL``, so an answer is only sent after its
change is on disk: a restart with the same file loses nothing that was acknowledged, and no reader ever sees a
branch half-written. Each thread gets its own connection (the server's event loop writes; test helpers read).
Tokens are stored only by their fingerprint (``gitops.standin.accounts.fingerprint``), never by value.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

#: 2: rate-limit windows reset at epoch milliseconds (1 kept whole seconds, rounded up, which let a 429's wait
#: exceed the window by up to a second).
SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS branches (
    user TEXT NOT NULL,
    name TEXT NOT NULL,
    id TEXT NOT NULL,
    modules BLOB NOT NULL,          -- the wire form of the modules map: compact ASCII JSON, as bytes
    active_world INTEGER NOT NULL DEFAULT 0,
    active_sim INTEGER NOT NULL DEFAULT 0,
    timestamp INTEGER NOT NULL,     -- epoch milliseconds of the last change
    PRIMARY KEY (user, name)
);
CREATE TABLE IF NOT EXISTS memory (
    user TEXT NOT NULL, shard TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (user, shard)
);
CREATE TABLE IF NOT EXISTS segments (
    user TEXT NOT NULL, shard TEXT NOT NULL, segment INTEGER NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (user, shard, segment)
);
CREATE TABLE IF NOT EXISTS windows (
    token TEXT NOT NULL, key TEXT NOT NULL, count INTEGER NOT NULL,
    reset_at INTEGER NOT NULL,      -- epoch milliseconds (schema 1: epoch seconds)
    PRIMARY KEY (token, key)
);
CREATE TABLE IF NOT EXISTS unlimited (token TEXT PRIMARY KEY, until REAL NOT NULL);
"""

ActiveName = Literal["activeWorld", "activeSim"]
_ACTIVE_COLUMN: dict[str, str] = {"activeWorld": "active_world", "activeSim": "active_sim"}


class StoreError(Exception):
    """The data file cannot be used (not SQLite, from a newer version, not writable)."""


@dataclass(frozen=True, slots=True)
class Branch:
    """A branch as the store holds it; ``modules_json`` is the wire map, already serialised (ASCII bytes), so
    that a download sends it without decoding and encoding it again."""

    id: str
    name: str
    modules_json: bytes
    active_world: bool
    active_sim: bool
    timestamp: int

    def modules(self) -> dict[str, object]:
        result: dict[str, object] = json.loads(self.modules_json)
        return result


def dump_json(value: object) -> str:
    """Compact ASCII JSON: lone surrogates and any other text survive SQLite and HTTP unchanged."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True)


def dump_modules(modules: object) -> bytes:
    """A modules map as the store keeps it."""
    return dump_json(modules).encode("ascii")


def new_id() -> str:
    """A 24-hex-digit id, shaped like the real server's object ids."""
    return secrets.token_hex(12)


class Store:
    """All state of the stand-in. Safe to use from several threads (one connection per thread)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        try:
            conn = self._conn()
            conn.executescript(_SCHEMA)
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None:
                conn.execute("INSERT INTO meta (key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) > SCHEMA_VERSION:
                raise StoreError(f"{path} was written by a newer version of the stand-in (schema {row[0]})")
            elif int(row[0]) == 1:
                with self._write(conn):
                    conn.execute("UPDATE windows SET reset_at = reset_at * 1000")
                    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(SCHEMA_VERSION),))
        except sqlite3.DatabaseError as exc:
            self.close()
            raise StoreError(f"{path} is not a usable SQLite file: {exc}") from exc

    # -- connections and transactions -----------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            # Autocommit mode: transactions are opened explicitly, so each write is exactly one transaction.
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
            with self._lock:  # before the first statement: on a file that is not SQLite, close() must close it
                self._all.append(conn)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA busy_timeout=30000")
            self._local.conn = conn
        return conn

    @contextmanager
    def _write(self, conn: sqlite3.Connection | None = None) -> Iterator[sqlite3.Connection]:
        conn = conn or self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        """Close every connection (the file stays)."""
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()
        self._local = threading.local()

    # -- branches -------------------------------------------------------------------------------------------

    def ensure_user(self, user: str, now_ms: int) -> None:
        """A user without branches gets ``default`` (``main: ""``), active for the world and the simulation."""
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM branches WHERE user = ? LIMIT 1", (user,)).fetchone() is None:
                conn.execute(
                    "INSERT INTO branches (user, name, id, modules, active_world, active_sim, timestamp)"
                    " VALUES (?, 'default', ?, ?, 1, 1, ?)",
                    (user, new_id(), dump_modules({"main": ""}), now_ms),
                )

    def ensure_default(self, user: str, now_ms: int) -> None:
        """Create ``default`` (``main: ""``, not active) when the user has no branch of that name, as the private
        server's ``GET /api/user/branches`` does before it answers."""
        if self._conn().execute("SELECT 1 FROM branches WHERE user = ? AND name = 'default'", (user,)).fetchone():
            return
        with self._write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO branches (user, name, id, modules, timestamp) VALUES (?, 'default', ?, ?, ?)",
                (user, new_id(), dump_modules({"main": ""}), _next_timestamp(conn, user, now_ms)),
            )

    def branches(self, user: str) -> list[Branch]:
        rows = self._conn().execute(
            "SELECT id, name, modules, active_world, active_sim, timestamp FROM branches WHERE user = ? ORDER BY name",
            (user,),
        )
        return [Branch(r[0], r[1], bytes(r[2]), bool(r[3]), bool(r[4]), r[5]) for r in rows]

    def branch(self, user: str, selector: str) -> Branch | None:
        """The branch named ``selector``; ``$activeWorld``/``$activeSim`` pick the branch with that flag."""
        sql, args = _select(user, selector)
        if sql is None:
            return None
        row = (
            self._conn()
            .execute(
                # The clause is one of the constants of _select(); values are bound parameters.
                f"SELECT id, name, modules, active_world, active_sim, timestamp FROM branches WHERE {sql}",  # noqa: S608
                args,
            )
            .fetchone()
        )
        if row is None:
            return None
        return Branch(row[0], row[1], bytes(row[2]), bool(row[3]), bool(row[4]), row[5])

    def put_code(self, user: str, selector: str, modules_json: bytes, now_ms: int) -> int | None:
        """Replace every module of the branch and return its new timestamp; ``None`` if it does not exist (a branch
        is never created here)."""
        sql, args = _select(user, selector)
        if sql is None:
            return None
        with self._write() as conn:
            stamp = _next_timestamp(conn, user, now_ms)
            cur = conn.execute(
                f"UPDATE branches SET modules = ?, timestamp = ? WHERE {sql}",  # noqa: S608 (a constant clause)
                (modules_json, stamp, *args),
            )
            return stamp if cur.rowcount > 0 else None

    def clone_branch(
        self, user: str, source: str | None, new_name: str, default_json: bytes, now_ms: int, max_branches: int | None
    ) -> int | None:
        """Create or overwrite ``new_name`` from ``source`` (or ``default_json`` when ``source`` is absent or
        unknown), as the real server does, and return its timestamp. ``None`` when a new branch would exceed
        ``max_branches`` (``None``: no limit)."""
        with self._write() as conn:
            exists = conn.execute("SELECT 1 FROM branches WHERE user = ? AND name = ?", (user, new_name)).fetchone()
            if exists is None and max_branches is not None:
                (count,) = conn.execute("SELECT COUNT(*) FROM branches WHERE user = ?", (user,)).fetchone()
                if count >= max_branches:
                    return None
            modules_json = default_json
            if source:
                row = conn.execute(
                    "SELECT modules FROM branches WHERE user = ? AND name = ?", (user, source)
                ).fetchone()
                if row is not None:
                    modules_json = row[0]
            now_ms = _next_timestamp(conn, user, now_ms)
            if exists is None:
                conn.execute(
                    "INSERT INTO branches (user, name, id, modules, timestamp) VALUES (?, ?, ?, ?, ?)",
                    (user, new_name, new_id(), modules_json, now_ms),
                )
            else:
                conn.execute(
                    "UPDATE branches SET modules = ?, timestamp = ? WHERE user = ? AND name = ?",
                    (modules_json, now_ms, user, new_name),
                )
            return now_ms

    def set_active(self, user: str, branch: str, which: ActiveName) -> bool:
        """Make ``branch`` the one active branch for ``which``; ``False`` if it does not exist."""
        column = _ACTIVE_COLUMN[which]
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM branches WHERE user = ? AND name = ?", (user, branch)).fetchone() is None:
                return False
            # One statement clears the flag everywhere and sets it on the branch; the column name is a constant.
            conn.execute(f"UPDATE branches SET {column} = (name = ?) WHERE user = ?", (branch, user))  # noqa: S608
            return True

    def delete_branch(self, user: str, branch: str) -> bool:
        """Delete ``branch`` unless it is active; ``True`` if a branch was deleted."""
        with self._write() as conn:
            cur = conn.execute(
                "DELETE FROM branches WHERE user = ? AND name = ? AND active_world = 0 AND active_sim = 0",
                (user, branch),
            )
            return cur.rowcount > 0

    # -- memory and segments --------------------------------------------------------------------------------

    def memory(self, user: str, shard: str) -> object:
        row = self._conn().execute("SELECT data FROM memory WHERE user = ? AND shard = ?", (user, shard)).fetchone()
        return json.loads(row[0]) if row is not None else {}

    def set_memory(self, user: str, shard: str, data: object) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO memory (user, shard, data) VALUES (?, ?, ?)"
                " ON CONFLICT (user, shard) DO UPDATE SET data = excluded.data",
                (user, shard, dump_json(data)),
            )

    def segment(self, user: str, shard: str, segment: int) -> str | None:
        row = (
            self._conn()
            .execute("SELECT data FROM segments WHERE user = ? AND shard = ? AND segment = ?", (user, shard, segment))
            .fetchone()
        )
        return None if row is None else str(row[0])

    def set_segment(self, user: str, shard: str, segment: int, data: str) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO segments (user, shard, segment, data) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (user, shard, segment) DO UPDATE SET data = excluded.data",
                (user, shard, segment, data),
            )

    # -- rate-limit windows and unlimited grants ------------------------------------------------------------

    def windows(self) -> dict[tuple[str, str], tuple[int, int]]:
        """Every stored window: (token fingerprint, limit key) -> (count, reset in epoch milliseconds)."""
        rows = self._conn().execute("SELECT token, key, count, reset_at FROM windows")
        return {(r[0], r[1]): (int(r[2]), int(r[3])) for r in rows}

    def save_windows(self, token: str, windows: dict[str, tuple[int, int]]) -> None:
        """Store the windows of one token (limit key -> (count, reset)) in one transaction."""
        with self._write() as conn:
            conn.executemany(
                "INSERT INTO windows (token, key, count, reset_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (token, key) DO UPDATE SET count = excluded.count, reset_at = excluded.reset_at",
                [(token, key, count, reset) for key, (count, reset) in windows.items()],
            )

    def grants(self) -> dict[str, float]:
        """Every unlimited grant: token fingerprint -> epoch second when it ends."""
        return {r[0]: float(r[1]) for r in self._conn().execute("SELECT token, until FROM unlimited")}

    def save_grant(self, token: str, until: float) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO unlimited (token, until) VALUES (?, ?)"
                " ON CONFLICT (token) DO UPDATE SET until = excluded.until",
                (token, until),
            )


def _next_timestamp(conn: sqlite3.Connection, user: str, now_ms: int) -> int:
    """The modification time of a change: now, but always later than every earlier change of the user's branches,
    so that a changed branch never keeps its timestamp (a manual clock in tests may stand still between changes)."""
    (latest,) = conn.execute("SELECT MAX(timestamp) FROM branches WHERE user = ?", (user,)).fetchone()
    return now_ms if latest is None else max(now_ms, int(latest) + 1)


def _select(user: str, selector: str) -> tuple[str | None, tuple[str, ...]]:
    """The WHERE clause for a branch selector, as the real server reads it (``$name`` selects by active flag)."""
    if selector.startswith("$"):
        column = _ACTIVE_COLUMN.get(selector[1:])
        if column is None:
            return None, ()
        return f"user = ? AND {column} = 1", (user,)
    return "user = ? AND name = ?", (user, selector)
