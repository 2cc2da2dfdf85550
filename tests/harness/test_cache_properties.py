"""Property-based tests (hypothesis) of the request cache: any bytes stored come back
unchanged; any corruption of the file is either harmless or a :class:`CacheError` naming it; a
changed value is never returned."""

from __future__ import annotations

import json
import sqlite3
import tempfile
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cache import CacheError, RequestCache, check_cache

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)  # one cache file, fresh keys
ROWS = st.dictionaries(
    st.text(min_size=1, max_size=12),
    st.tuples(st.text(max_size=8), st.binary(max_size=64)),
    min_size=1,
    max_size=12,
)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    path = tmp_path_factory.mktemp("cache") / "c.sqlite"
    with RequestCache(path) as cache:
        yield cache


def _fresh(rows: dict) -> dict:
    """The example's rows under keys no other example used."""
    tag = uuid.uuid4().hex
    return {f"{tag}:{k}": v for k, v in rows.items()}


@SETTINGS
@given(rows=ROWS)
def test_values_come_back_unchanged(shared, rows):
    rows = _fresh(rows)
    shared.put_many((k, ns, v) for k, (ns, v) in rows.items())
    assert shared.get_many(list(rows)) == {k: v for k, (_, v) in rows.items()}


@SETTINGS
@given(rows=ROWS, pick=st.integers(0, 11), new=st.binary(max_size=64), move=st.booleans())
def test_a_changed_value_is_never_returned(shared, rows, pick, new, move):
    rows = _fresh(rows)
    keys = list(rows)
    key, other = keys[pick % len(keys)], keys[(pick + 1) % len(keys)]
    shared.put_many((k, ns, v) for k, (ns, v) in rows.items())
    value = rows[other][1] if move else new  # another row's value, or new bytes
    con = sqlite3.connect(shared.path)
    con.execute("UPDATE entries SET value=? WHERE key=?", (value, key))
    con.commit()
    con.close()
    before = shared.stats.rejected
    got = shared.get_many(keys)
    assert all(got[k] == rows[k][1] for k in got)  # what is returned is what was written for that key
    if value == rows[key][1]:
        assert got[key] == value
    else:
        assert key not in got and shared.stats.rejected == before + 1


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(offset=st.integers(0, 2**16), junk=st.binary(min_size=1, max_size=600), truncate=st.booleans())
def test_a_corrupted_file_is_harmless_or_a_clear_error(offset, junk, truncate):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.sqlite"
        rows = {f"k{i}": ("response", json.dumps({"text": f"reply {i} " * 20}).encode()) for i in range(150)}
        with RequestCache(path) as cache:
            cache.put_many((k, ns, v) for k, (ns, v) in rows.items())
        data = bytearray(path.read_bytes())
        at = offset % len(data)
        data = data[:at] if truncate else data[:at] + junk + data[at + len(junk) :]
        path.write_bytes(bytes(data))
        try:
            with RequestCache(path) as cache:
                got = cache.get_many(list(rows))
        except CacheError as e:
            assert str(e).startswith(f"request cache {path}: ") and "harness cache repair" in str(e)
            return
        finally:
            assert check_cache(path).rows >= 0  # the check never raises, whatever the file holds
        assert all(got[k] == rows[k][1] for k in got)  # whatever is read is what was written
