"""Content-addressed, write-through request cache (SQLite in WAL mode).

Keys are SHA-256 digests of the backend identity (kind, model id, revision, adapter, ...) plus
the request's semantic payload (messages, decoding parameters minus non-semantic fields, label
words). Every completed response is committed before the caller sees it, so a killed run
resumes without repeating completed calls, and saved generations can be re-judged without
regenerating.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.types import Request, Response, sha256_json

SCHEMA_VERSION = 1


def default_home() -> Path:
    """Root for harness state (request cache, built datasets). ``DIALEVAL_HOME`` overrides it."""
    env = os.environ.get("DIALEVAL_HOME")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dialeval-harness"


def default_cache_path() -> Path:
    return default_home() / "requests.sqlite"


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    writes: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "writes": self.writes}


class RequestCache:
    """SQLite key → value store. ``enabled=False`` turns every lookup into a miss and stores nothing."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self.path = Path(path) if path is not None else default_cache_path()
        self.stats = CacheStats()
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        if enabled:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                str(self.path), timeout=60.0, check_same_thread=False, isolation_level=None
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA busy_timeout=60000")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS entries ("
                " key TEXT PRIMARY KEY, namespace TEXT NOT NULL, value BLOB NOT NULL, created REAL NOT NULL)"
            )
            self._conn.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
            row = self._conn.execute("SELECT v FROM meta WHERE k='schema_version'").fetchone()
            if row is None:
                self._conn.execute(
                    "INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                )
            elif int(row[0]) != SCHEMA_VERSION:
                raise RuntimeError(
                    f"request cache {self.path} has schema version {row[0]}, this harness uses {SCHEMA_VERSION}; "
                    "point --cache at a new file or delete the old one"
                )

    @staticmethod
    def make_key(identity: dict[str, Any], payload: dict[str, Any]) -> str:
        return sha256_json({"identity": identity, "payload": payload})

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        if not self.enabled or not keys:
            self.stats.misses += len(keys)
            return {}
        found: dict[str, bytes] = {}
        uniq = list(dict.fromkeys(keys))
        with self._lock:
            assert self._conn is not None
            for i in range(0, len(uniq), 500):
                chunk = uniq[i : i + 500]
                q = f"SELECT key, value FROM entries WHERE key IN ({','.join('?' * len(chunk))})"
                found.update(self._conn.execute(q, chunk).fetchall())
        hits = sum(1 for k in keys if k in found)
        self.stats.hits += hits
        self.stats.misses += len(keys) - hits
        return found

    def put_many(self, rows: Iterable[tuple[str, str, bytes]]) -> None:
        """Insert ``(key, namespace, value)`` rows in one committed transaction."""
        if not self.enabled:
            return
        rows = list(rows)
        if not rows:
            return
        now = time.time()
        with self._lock:
            assert self._conn is not None
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(
                    "INSERT OR REPLACE INTO entries (key, namespace, value, created) VALUES (?, ?, ?, ?)",
                    [(k, ns, v, now) for k, ns, v in rows],
                )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        self.stats.writes += len(rows)

    def count(self, namespace: str | None = None) -> int:
        if not self.enabled:
            return 0
        with self._lock:
            assert self._conn is not None
            if namespace is None:
                return self._conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
            return self._conn.execute(
                "SELECT COUNT(*) FROM entries WHERE namespace=?", (namespace,)
            ).fetchone()[0]

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> RequestCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CachedBackend:
    """Wraps a backend so every request goes through the cache (write-through, per response)."""

    NAMESPACE = "response"

    def __init__(self, backend: Any, cache: RequestCache) -> None:
        self.backend = backend
        self.cache = cache

    def identity(self) -> dict[str, Any]:
        return self.backend.identity()

    def keys(self, requests: Sequence[Request]) -> list[str]:
        ident = self.backend.identity()
        return [RequestCache.make_key(ident, r.payload()) for r in requests]

    def generate(
        self, requests: Sequence[Request], on_result: Callable[[int, Response], None] | None = None
    ) -> list[Response]:
        requests = list(requests)
        keys = self.keys(requests)
        found = self.cache.get_many(keys)
        out: list[Response | None] = [None] * len(requests)
        for i, k in enumerate(keys):
            if k in found:
                out[i] = Response.from_dict(json.loads(found[k]), cached=True)
                if on_result:
                    on_result(i, out[i])
        # Identical requests inside one batch are sent once.
        todo: dict[str, list[int]] = {}
        for i, k in enumerate(keys):
            if out[i] is None:
                todo.setdefault(k, []).append(i)
        if todo:
            uniq_keys = list(todo)
            miss_requests = [requests[todo[k][0]] for k in uniq_keys]

            def store(j: int, resp: Response) -> None:
                k = uniq_keys[j]
                self.cache.put_many(
                    [(k, self.NAMESPACE, json.dumps(resp.to_dict(), ensure_ascii=False).encode())]
                )
                for i in todo[k]:
                    out[i] = resp
                    if on_result:
                        on_result(i, resp)

            self.backend.generate(miss_requests, on_result=store)
        assert all(o is not None for o in out)
        return out  # type: ignore[return-value]
