"""The two per-run indexes of the samples browser, written once per run as Parquet sidecar files
under ``$DIALEVAL_HOME/view-index/`` (keyed by the input files' paths, sizes and modification times)
and reused by every later viewer of the run:

* ``idx`` (held in DuckDB memory, a few dozen bytes per sample): the filter columns and the values
  that need every row of a task × dataset × language group —

  - **disagreement** = |percentile rank of the judge's score − percentile rank of the human mean|
    among the group's samples that have both (average ranks for ties, ``(rank − 1) / (n − 1)``:
    0 = same place, 1 = opposite ends), computed with one sort in numpy;
  - **spread** = standard deviation of the annotators' labels of the item's human dimension (from
    ``human_distribution``; 0 with one label value, null without labels);

* ``search`` (read from disk by row number): one lower-cased text per sample (id, chatbot, raw
  output, parse detail and the whole transcript) for the text filter, and the start of the rated
  text and of the message before it (the list's snippets). Its rows are in run order in small row
  groups, so the snippets of one page read a few row groups of it, never the dataset files.

Both are built in a background thread when the viewer opens the run (``idx`` first: well under a
second of CPU per million samples), which then loads the search texts into memory; a query that
needs an index waits for it. Until ``search`` exists a page's snippets come from the dataset files
(:meth:`harness.view.items.Transcripts.fetch`), and a text search scans the sidecar until the texts
are in memory.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from harness.view.items import Transcripts

INDEX_VERSION = "3"
SNIPPET = 220  # characters of the rated text (and of the message before it) in the list
SEARCH_ROW_GROUP = 2048  # rows per row group of the search sidecar: a page's snippets read ≤ 50 of them
# sqrt(E[x²] − E[x]²) of the {label: share} map m
SPREAD_SQL = """CASE WHEN m IS NOT NULL AND len(map_keys(m)) > 0 THEN sqrt(greatest(0.0,
  list_sum(list_transform(map_entries(m), lambda e: e.value * (e.key::DOUBLE) ^ 2))
  - list_sum(list_transform(map_entries(m), lambda e: e.value * e.key::DOUBLE)) ^ 2)) END"""
NAMES = ("idx", "search")


def spread_sql(column: str = "human_distribution") -> str:
    return f"(SELECT {SPREAD_SQL} FROM (SELECT TRY_CAST(TRY_CAST({column} AS JSON) AS MAP(VARCHAR, DOUBLE)) AS m))"


LIGHT = ("rid", "task", "dataset", "language", "id", "system", "parse_status", "score", "human_rating")
_GROUP = ("task", "dataset", "language")


def light_sql(columns: list[str]) -> str:
    """The ``idx`` columns that come straight from ``samples`` (with ``spread``)."""
    numeric = ("score", "human_rating")
    have = [c if c in columns else f"NULL::{'DOUBLE' if c in numeric else 'VARCHAR'} AS {c}" for c in LIGHT]
    spread = spread_sql() if "human_distribution" in columns else "NULL::DOUBLE"
    return f"SELECT {', '.join(have)}, {spread} AS spread FROM samples"


def percentile_ranks(values: np.ndarray, groups: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Average-rank percentile ``(rank − 1) / (n − 1)`` of ``values`` within each group (rows where
    ``mask``; NaN elsewhere and in groups of one)."""
    out = np.full(len(values), np.nan)
    where = np.flatnonzero(mask)
    if len(where) == 0:
        return out
    v, g = values[where], groups[where]
    by_value = np.argsort(v, kind="stable")
    order = by_value[np.argsort(g[by_value], kind="stable")]  # by group, then by value
    gs, vs = g[order], v[order]
    n = len(order)
    pos = np.arange(n)
    new_g = np.ones(n, dtype=bool)
    new_g[1:] = gs[1:] != gs[:-1]
    new_v = new_g.copy()
    new_v[1:] |= vs[1:] != vs[:-1]
    g_start = pos[new_g]
    g_size = np.diff(np.append(g_start, n))
    g_of = np.cumsum(new_g) - 1
    v_start = pos[new_v]
    v_end = np.append(v_start[1:], n)
    v_of = np.cumsum(new_v) - 1
    avg = (v_start[v_of] + v_end[v_of] - 1) / 2.0 - g_start[g_of]  # 0-based average rank in the group
    size = g_size[g_of]
    with np.errstate(invalid="ignore", divide="ignore"):
        out[where[order]] = np.where(size > 1, avg / np.maximum(size - 1, 1), np.nan)
    return out


def derive(table: Any) -> Any:
    """``table`` (the :func:`light_sql` rows, pyarrow) with ``judge_pct``, ``human_pct`` and
    ``disagreement``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    codes = np.zeros(table.num_rows, dtype=np.int64)
    for name in _GROUP:
        col = pc.fill_null(table[name].cast(pa.string()), "\x00").combine_chunks().dictionary_encode()
        codes = codes * (len(col.dictionary) + 1) + col.indices.to_numpy(zero_copy_only=False)
    score = table["score"].cast(pa.float64()).to_numpy()
    human = table["human_rating"].cast(pa.float64()).to_numpy()
    both = ~np.isnan(score) & ~np.isnan(human)
    judge_pct = percentile_ranks(score, codes, both)
    human_pct = percentile_ranks(human, codes, both)
    for name, values in (
        ("judge_pct", judge_pct),
        ("human_pct", human_pct),
        ("disagreement", np.abs(judge_pct - human_pct)),
    ):
        table = table.append_column(name, pa.array(values, from_pandas=True))
    return table


def _sq(p: Path) -> str:
    return str(p).replace("'", "''")


def _stamp(paths: list[Path]) -> str:
    parts = []
    for p in paths:
        st = p.stat()
        parts.append(f"{p.resolve()}|{st.st_size}|{st.st_mtime_ns}")
    return hashlib.sha256("\n".join([INDEX_VERSION, *parts]).encode()).hexdigest()[:24]


def default_cache_dir() -> Path:
    from harness.cache import default_home

    return default_home() / "view-index"


class RunIndex:
    """Builds (or finds) ``idx`` and ``search`` for one run; thread-safe."""

    def __init__(
        self, con: Any, samples: Path, columns: list[str], items: Transcripts, cache_dir: Path | None
    ) -> None:
        self.con = con
        self.samples = samples
        self.columns = columns
        self.items = items
        self.cache_dir = cache_dir or default_cache_dir()
        self._locks = {n: threading.Lock() for n in NAMES}
        self.ready = dict.fromkeys(NAMES, False)
        self.seconds: dict[str, float] = {}
        self.cpu_seconds: dict[str, float] = {}
        self.cached: dict[str, bool] = {}
        self._building: Any = None  # the cursor of a build in progress (interrupted by close())
        self.closed = False
        self.search_file: Path | None = None  # the search sidecar (or its in-memory table) once ready
        self._text_lock = threading.Lock()
        self.text_loaded = False
        # a search sidecar written earlier is usable at once: nothing of it is loaded up front
        cache = self._cache_file("search")
        if cache.is_file() and self._use_cache(con.cursor(), "search", cache):
            self.ready["search"] = self.cached["search"] = True
            self.seconds["search"] = self.cpu_seconds["search"] = 0.0

    def text_sql(self) -> str:
        """SQL of ``rid, text`` for the text filter: the in-memory copy once loaded, else the sidecar."""
        return "search_text" if self.text_loaded else self.search_sql()

    def load_text(self) -> None:
        """Hold the search texts in memory (about 400 bytes a sample): a search then scans memory
        (~0.1 s of CPU per million samples) instead of decompressing the sidecar (~0.7 s)."""
        self.ensure("search")
        with self._text_lock:
            if self.text_loaded or self.closed:
                return
            t, cpu = time.perf_counter(), time.process_time()
            cur = self._building = self.con.cursor()
            cur.execute(f"CREATE OR REPLACE TABLE search_text AS SELECT rid, text FROM {self.search_sql()}")
            self._building = None
            self.seconds["text"] = time.perf_counter() - t
            self.cpu_seconds["text"] = time.process_time() - cpu
            self.text_loaded = True

    def search_sql(self) -> str:
        """SQL of the ``search`` rows (``rid, text, snippet, context_tail``); builds it if needed."""
        self.ensure("search")
        if self.search_file is None:
            return "search_mem"
        return f"read_parquet('{_sq(self.search_file)}')"

    def _search_sql(self) -> str:
        own = [f"s.{c}" for c in ("id", "system", "raw_output", "parse_detail") if c in self.columns]
        src = self.items.source()
        if src is None:
            return (
                f"SELECT s.rid, lower(concat_ws(' ', {', '.join(own)})) AS text, NULL::VARCHAR AS snippet, "
                "NULL::VARCHAR AS context_tail FROM samples s ORDER BY s.rid"
            )
        i = "i"
        return (
            f"SELECT s.rid, lower(concat_ws(' ', {', '.join(own)}, {self.items.text_expr(i)})) AS text, "
            f"left(coalesce({i}.response, {i}.turns[-1].text), {SNIPPET}) AS snippet, "
            f"left(CASE WHEN {i}.response IS NOT NULL THEN {i}.context[-1].text "
            f"ELSE {i}.turns[-2].text END, {SNIPPET}) AS context_tail "
            f"FROM samples s LEFT JOIN {src} {i} ON {i}.dataset = s.dataset AND {i}.id = s.id ORDER BY s.rid"
        )

    def _cache_file(self, name: str) -> Path:
        inputs = [self.samples] + (list(self.items.files) if name == "search" else [])
        return self.cache_dir / f"{_stamp(inputs)}.{name}.parquet"

    def ensure(self, name: str = "idx") -> None:
        """Build the index ``name`` ("idx" or "search") unless it is there; callers wait for the build."""
        if self.ready[name]:
            return
        with self._locks[name]:
            if self.ready[name]:
                return
            if self.closed:
                raise RuntimeError("the viewer is shutting down")
            t, cpu = time.perf_counter(), time.process_time()
            cur = self._building = self.con.cursor()
            cache = self._cache_file(name)
            self.cached[name] = cache.is_file() and self._use_cache(cur, name, cache)
            if not self.cached[name]:
                self._build(cur, name, cache)
            self._building = None
            self.seconds[name] = time.perf_counter() - t
            self.cpu_seconds[name] = time.process_time() - cpu
            self.ready[name] = True

    def _use_cache(self, cur: Any, name: str, cache: Path) -> bool:
        try:
            if name == "idx":
                cur.execute(f"CREATE OR REPLACE TABLE idx AS SELECT * FROM read_parquet('{_sq(cache)}')")
            else:
                cur.execute(f"SELECT rid FROM read_parquet('{_sq(cache)}') LIMIT 1").fetchall()
                self.search_file = cache
            return True
        except Exception:  # noqa: BLE001 - a damaged cache file is rebuilt
            cache.unlink(missing_ok=True)
            return False

    def _build(self, cur: Any, name: str, cache: Path) -> None:
        if name == "idx":
            table = derive(cur.sql(light_sql(self.columns)).to_arrow_table())
            cur.register("idx_arrow", table)
            try:
                cur.execute("CREATE OR REPLACE TABLE idx AS SELECT * FROM idx_arrow")
            finally:
                cur.unregister("idx_arrow")
            self._write(cur, "SELECT * FROM idx", cache, "")
            return
        if self._write(cur, self._search_sql(), cache, f", ROW_GROUP_SIZE {SEARCH_ROW_GROUP}"):
            self.search_file = cache
        else:  # no writable cache: the index lives in memory
            cur.execute(f"CREATE OR REPLACE TABLE search_mem AS {self._search_sql()}")

    @staticmethod
    def _write(cur: Any, sql: str, cache: Path, options: str) -> bool:
        """``COPY`` the rows of ``sql`` to ``cache`` (atomically); False when it cannot be written."""
        import duckdb

        tmp = cache.with_name(f".{cache.name}.{os.getpid()}.{threading.get_ident()}")
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cur.execute(f"COPY ({sql}) TO '{_sq(tmp)}' (FORMAT parquet{options})")
            os.replace(tmp, cache)
            return True
        except (OSError, duckdb.IOException, duckdb.PermissionException):
            tmp.unlink(missing_ok=True)
            return False

    def close(self) -> None:
        """Stop a build in progress (the process is exiting)."""
        self.closed = True
        cur = self._building
        if cur is not None:
            try:
                cur.interrupt()
            except Exception:  # noqa: BLE001 - nothing left to stop
                pass

    def start(self) -> threading.Thread:
        """Build both indexes in a background thread (``idx`` first)."""

        def work() -> None:
            try:
                for name in NAMES:
                    self.ensure(name)
                self.load_text()
            except Exception:  # noqa: BLE001 - the query that needs it will build it again and say why
                return

        th = threading.Thread(target=work, name=f"view-index-{self.samples.parent.name}", daemon=True)
        th.start()
        return th
