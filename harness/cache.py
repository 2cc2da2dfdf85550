"""Content-addressed, write-through request cache (SQLite in WAL mode).

Keys are SHA-256 digests of the backend identity (kind, model id, revision, adapter, ...) plus
the request's semantic payload (messages, decoding parameters minus non-semantic fields, label
words). Every completed response is committed before the caller sees it, so a killed run
resumes without repeating completed calls, and saved generations can be re-judged without
regenerating.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from harness.types import JSONObject, Request, Response, sha256_json

if TYPE_CHECKING:
    from harness.backends.base import Backend

SCHEMA_VERSION = 2  # 2: a checksum per value (1: none; migrated on first open)
COLUMNS = ("key", "namespace", "value", "created", "checksum")
#: files up to this size get SQLite's ``PRAGMA quick_check`` on every open (about 0.2 s per 150 MB);
#: larger ones are checked by ``harness cache check`` (a corrupt page still fails cleanly when read)
QUICK_CHECK_MAX_BYTES = 512 * 2**20

log = logging.getLogger(__name__)


class CacheError(ValueError):
    """The request cache file cannot be used (not a SQLite file, corrupt, another schema)."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path, self.problem = path, problem
        super().__init__(
            f"request cache {path}: {problem}; run with another cache file (--cache OTHER.sqlite) or none "
            f"(--no-cache), or check and repair this one (harness cache check {path}; harness cache repair {path})"
        )


def value_checksum(key: str, namespace: str, value: bytes) -> str:
    """SHA-256 over a row's key, namespace and value: a changed value, or a value moved to another
    key, no longer matches."""
    h = hashlib.sha256(_utf8(str(key)) + b"\x00" + _utf8(str(namespace)) + b"\x00")
    h.update(value)
    return h.hexdigest()


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")  # text read from a damaged file may hold bad bytes


def _text(raw: bytes) -> str:
    """SQLite TEXT -> str; bytes that are not UTF-8 (a damaged file) survive as surrogates, so the
    row's checksum fails instead of the read raising."""
    return raw.decode("utf-8", "surrogateescape")


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
    # values whose checksum did not match, or that did not decode: counted as misses (and warned about)
    rejected: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "writes": self.writes, "rejected": self.rejected}


class RequestCache:
    """SQLite key → value store. ``enabled=False`` turns every lookup into a miss and stores nothing.

    Opening checks that the file is a SQLite database with this cache's schema (and, up to
    :data:`QUICK_CHECK_MAX_BYTES`, SQLite's quick integrity check); any problem is a
    :class:`CacheError` naming the file and the way out. A file of schema 1 (no checksums) is
    migrated in place once: its rows get their checksum then (they were used as they were before).
    Every value read is checked against its checksum; a mismatch is a miss plus a warning, and the
    fresh value replaces it."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self.path = Path(path) if path is not None else default_cache_path()
        self.stats = CacheStats()
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        if enabled:
            self._conn = open_cache(self.path)

    @staticmethod
    def make_key(identity: Mapping[str, object], payload: Mapping[str, object]) -> str:
        return sha256_json({"identity": identity, "payload": payload})

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The stored values of ``keys`` (absent keys are misses). A value whose checksum does not
        match is left out — a miss, counted in ``stats.rejected`` — with a warning."""
        if not self.enabled or not keys:
            self.stats.misses += len(keys)
            return {}
        found: dict[str, bytes] = {}
        bad: list[str] = []
        uniq = list(dict.fromkeys(keys))
        with self._lock, self._errors():
            assert self._conn is not None
            for i in range(0, len(uniq), 500):
                chunk = uniq[i : i + 500]
                q = f"SELECT key, namespace, value, checksum FROM entries WHERE key IN ({','.join('?' * len(chunk))})"
                for key, namespace, value, checksum in self._conn.execute(q, chunk):
                    value = _as_bytes(value)
                    if checksum == value_checksum(key, namespace, value):
                        found[key] = value
                    else:
                        bad.append(key)
        if bad:
            self.reject(bad, "its checksum does not match (the value was changed after it was written)")
        hits = sum(1 for k in keys if k in found)
        self.stats.hits += hits
        self.stats.misses += len(keys) - hits
        return found

    def reject(self, keys: Sequence[str], why: str, *, were_hits: bool = False) -> None:
        """Count cached values that cannot be used (a caller that could not decode one reports it
        here, ``were_hits=True``) and warn once per call; the caller recomputes them, which replaces
        the rows."""
        self.stats.rejected += len(keys)
        if were_hits:
            self.stats.hits -= len(keys)
            self.stats.misses += len(keys)
        log.warning(
            "request cache %s: %d cached value(s) ignored, recomputed: %s (first key %s); "
            "`harness cache check %s` lists them",
            self.path,
            len(keys),
            why,
            keys[0][:16],
            self.path,
        )

    def put_many(self, rows: Iterable[tuple[str, str, bytes]]) -> None:
        """Insert ``(key, namespace, value)`` rows (each with its checksum) in one committed transaction."""
        if not self.enabled:
            return
        rows = list(rows)
        if not rows:
            return
        now = time.time()
        with self._lock, self._errors():
            assert self._conn is not None
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(
                    "INSERT OR REPLACE INTO entries (key, namespace, value, created, checksum) VALUES (?, ?, ?, ?, ?)",
                    [(k, ns, v, now, value_checksum(k, ns, v)) for k, ns, v in rows],
                )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        self.stats.writes += len(rows)

    def count(self, namespace: str | None = None) -> int:
        if not self.enabled:
            return 0
        with self._lock, self._errors():
            assert self._conn is not None
            if namespace is None:
                return self._conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
            return self._conn.execute(
                "SELECT COUNT(*) FROM entries WHERE namespace=?", (namespace,)
            ).fetchone()[0]

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """A SQLite error while in use (a page corrupted since the file was opened) is a CacheError."""
        try:
            yield
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
            raise CacheError(self.path, _db_error(e)) from None

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

    def __init__(self, backend: Backend, cache: RequestCache) -> None:
        self.backend = backend
        self.cache = cache

    def identity(self) -> JSONObject:
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
        undecodable: list[str] = []
        for i, k in enumerate(keys):
            if k in found:
                try:
                    resp = Response.from_dict(json.loads(found[k]), cached=True)
                except (ValueError, TypeError, KeyError, AttributeError):  # JSON / UTF-8 / shape
                    undecodable.append(k)
                    del found[k]
                    continue
                out[i] = resp
                if on_result:
                    on_result(i, resp)
        if undecodable:  # every occurrence was counted as a hit
            bad = set(undecodable)
            self.cache.reject(
                [k for k in keys if k in bad],
                "the value is not a response this harness can read",
                were_hits=True,
            )
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
        return out  # type: ignore[return-value]  # all filled (asserted above)


# -- opening, checking and repairing a cache file ---------------------------------------------------
def _connect(path: Path, *, read_only: bool = False) -> sqlite3.Connection:
    if read_only:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60.0)
    else:
        conn = sqlite3.connect(str(path), timeout=60.0, check_same_thread=False, isolation_level=None)
    conn.text_factory = _text
    return conn


def open_cache(path: Path) -> sqlite3.Connection:
    """Open (or create) a cache file: WAL mode, schema check (migrating schema 1), quick check."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CacheError(path, f"cannot create its folder ({e.strerror or e})") from None
    if path.exists() and not path.is_file():
        raise CacheError(path, "is not a file")
    conn = None
    try:
        conn = _connect(path)
        conn.execute("PRAGMA busy_timeout=60000")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        _ensure_schema(path, conn)
        if path.stat().st_size <= QUICK_CHECK_MAX_BYTES:
            problems = [r[0] for r in conn.execute("PRAGMA quick_check(5)").fetchall()]
            if problems != ["ok"]:
                raise CacheError(path, "SQLite integrity check failed: " + "; ".join(problems))
        return conn
    except (sqlite3.DatabaseError, UnicodeDecodeError) as e:  # SQLite's message may quote damaged bytes
        if conn is not None:
            conn.close()
        raise CacheError(path, _db_error(e)) from None
    except BaseException:
        if conn is not None:
            conn.close()
        raise


def _ensure_schema(path: Path, conn: sqlite3.Connection) -> None:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables:  # a new file (or an empty SQLite database)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, namespace TEXT NOT NULL, "
            "value BLOB NOT NULL, created REAL NOT NULL, checksum TEXT)"
        )
        conn.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
        conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        return
    if "entries" not in tables or "meta" not in tables:
        raise CacheError(
            path, f"is a SQLite database but not a request cache (tables: {', '.join(sorted(tables))})"
        )
    columns = [r[1] for r in conn.execute("PRAGMA table_info(entries)")]
    row = conn.execute("SELECT v FROM meta WHERE k='schema_version'").fetchone()
    version = str(row[0]) if row else "?"
    if version == "1" and columns == list(COLUMNS[:4]):
        _migrate_v1(path, conn)
        return
    if version != str(SCHEMA_VERSION):
        raise CacheError(
            path, f"has schema version {version}; this harness reads {SCHEMA_VERSION} (and migrates 1)"
        )
    if columns != list(COLUMNS):
        raise CacheError(path, f"table 'entries' has columns {columns}, expected {list(COLUMNS)}")


def _migrate_v1(path: Path, conn: sqlite3.Connection) -> None:
    """Schema 1 -> 2, in one transaction: add the checksum column and fill it for every row."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if [r[1] for r in conn.execute("PRAGMA table_info(entries)")] == list(
            COLUMNS[:4]
        ):  # not done meanwhile
            log.warning(
                "request cache %s: adding a checksum to every value (one-time migration to schema 2)", path
            )
            conn.execute("ALTER TABLE entries ADD COLUMN checksum TEXT")
            rows = conn.execute("SELECT key, namespace, value FROM entries").fetchall()
            conn.executemany(
                "UPDATE entries SET checksum=? WHERE key=?",
                [(value_checksum(k, ns, _as_bytes(v)), k) for k, ns, v in rows],
            )
            conn.execute("UPDATE meta SET v=? WHERE k='schema_version'", (str(SCHEMA_VERSION),))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _db_error(e: Exception) -> str:
    if isinstance(e, UnicodeDecodeError):
        return "database disk image is malformed (its schema holds bytes that are not UTF-8)"
    return str(e)


def _as_bytes(value: object) -> bytes:
    return bytes(value) if isinstance(value, bytes | memoryview) else _utf8(str(value))


class CacheRepair(TypedDict):
    """What :func:`repair_cache` did: rows kept and dropped, and where the old file went."""

    kept: int
    dropped: int
    moved_to: str


@dataclass
class CacheReport:
    """What :func:`check_cache` found in a cache file."""

    path: Path
    problem: str | None = None  # the file cannot be opened as a request cache at all
    sqlite: list[str] | None = None  # PRAGMA integrity_check messages (["ok"] when fine)
    rows: int = 0
    bad_checksum: list[str] = field(default_factory=list)
    undecodable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.problem is None and self.sqlite == ["ok"] and not self.bad_checksum and not self.undecodable
        )


def _undecodable(namespace: str, value: bytes) -> bool:
    """A ``response`` value that is not a readable response (other namespaces are opaque bytes)."""
    if namespace != CachedBackend.NAMESPACE:
        return False
    try:
        Response.from_dict(json.loads(value))
    except (ValueError, TypeError, KeyError, AttributeError):
        return True
    return False


def check_cache(path: str | os.PathLike[str]) -> CacheReport:
    """Open ``path`` read-only and check it: SQLite's full integrity check, the schema, and every
    row's checksum (and, for responses, that the value decodes). Never modifies the file."""
    path = Path(path)
    report = CacheReport(path, bad_checksum=[], undecodable=[])
    if not path.is_file():
        report.problem = "no such file"
        return report
    try:
        conn = _connect(path, read_only=True)
    except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
        report.problem = _db_error(e)
        return report
    try:
        report.sqlite = [r[0] for r in conn.execute("PRAGMA integrity_check(20)").fetchall()]
        _check_readable_schema(path, conn)
        has_sum = "checksum" in [r[1] for r in conn.execute("PRAGMA table_info(entries)")]
        query = f"SELECT key, namespace, value, {'checksum' if has_sum else 'NULL'} FROM entries"
        for key, namespace, value, checksum in conn.execute(query):
            report.rows += 1
            value = _as_bytes(value)
            if has_sum and checksum != value_checksum(key, namespace, value):
                report.bad_checksum.append(key)
            elif _undecodable(namespace, value):
                report.undecodable.append(key)
    except (sqlite3.DatabaseError, UnicodeDecodeError, CacheError) as e:
        report.problem = e.problem if isinstance(e, CacheError) else _db_error(e)
    finally:
        conn.close()
    return report


def _check_readable_schema(path: Path, conn: sqlite3.Connection) -> None:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "entries" not in tables:
        raise CacheError(
            path,
            f"is a SQLite database but not a request cache (tables: {', '.join(sorted(tables)) or 'none'})",
        )
    columns = [r[1] for r in conn.execute("PRAGMA table_info(entries)")]
    if columns not in (list(COLUMNS), list(COLUMNS[:4])):
        raise CacheError(path, f"table 'entries' has columns {columns}, expected {list(COLUMNS)}")


def repair_cache(path: str | os.PathLike[str]) -> CacheRepair:
    """Move ``path`` aside (``<name>.bad-<time>``) and write a fresh cache in its place holding every
    row that can still be read, whose checksum matches (rows of schema 1 have none: kept) and whose
    response decodes. Returns ``{"kept", "dropped", "moved_to"}``."""
    path = Path(path)
    if not path.is_file():
        raise CacheError(path, "no such file")
    good: list[tuple[str, str, bytes, float]] = []
    dropped = 0
    try:
        src = _connect(path, read_only=True)
        try:
            _check_readable_schema(path, src)
            has_sum = "checksum" in [r[1] for r in src.execute("PRAGMA table_info(entries)")]
            keys = [r[0] for r in src.execute("SELECT key FROM entries")]
            for i in range(0, len(keys), 500):  # chunks: a corrupt page loses its rows, not the rest
                chunk = keys[i : i + 500]
                q = f"SELECT key, namespace, value, created, {'checksum' if has_sum else 'NULL'} FROM entries WHERE key IN ({','.join('?' * len(chunk))})"
                try:
                    rows = src.execute(q, chunk).fetchall()
                except (sqlite3.DatabaseError, UnicodeDecodeError):
                    dropped += len(chunk)
                    continue
                for key, namespace, value, created, checksum in rows:
                    value = _as_bytes(value)
                    if (has_sum and checksum != value_checksum(key, namespace, value)) or _undecodable(
                        namespace, value
                    ):
                        dropped += 1
                    else:
                        good.append((key, namespace, value, float(created)))
        finally:
            src.close()
    except (sqlite3.DatabaseError, UnicodeDecodeError, CacheError):
        pass  # not a readable cache at all: nothing to keep
    moved = path.with_name(f"{path.name}.bad-{time.strftime('%Y%m%dT%H%M%S')}")
    fresh = path.with_name(f".{path.name}.repair-{os.getpid()}")
    fresh.unlink(missing_ok=True)
    conn = open_cache(fresh)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT OR REPLACE INTO entries (key, namespace, value, created, checksum) VALUES (?, ?, ?, ?, ?)",
            [(k, ns, v, c, value_checksum(k, ns, v)) for k, ns, v, c in good],
        )
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    os.replace(path, moved)
    for suffix in ("-wal", "-shm"):  # the old file's WAL belongs to it, not to the fresh one
        side = path.with_name(path.name + suffix)
        if side.exists():
            os.replace(side, moved.with_name(moved.name + suffix))
    for suffix in ("", "-wal", "-shm"):
        side = fresh.with_name(fresh.name + suffix)
        if side.exists():
            os.replace(side, path.with_name(path.name + suffix))
    return {"kept": len(good), "dropped": dropped, "moved_to": str(moved)}
