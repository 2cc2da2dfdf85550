"""The two per-run indexes of the samples browser, held in DuckDB memory and cached as Parquet
under ``$DIALEVAL_HOME/view-index/`` (keyed by the files' paths, sizes and modification times):

* ``idx``: one row per sample with the filter columns and the two derived values that need every
  row of a task × dataset × language group —

  - **disagreement** = |percentile rank of the judge's score − percentile rank of the human mean|
    among the group's samples that have both (average ranks for ties, ``(rank − 1) / (n − 1)``:
    0 = same place, 1 = opposite ends);
  - **spread** = standard deviation of the annotators' labels of the item's human dimension (from
    ``human_distribution``; 0 with one label value, null without labels);

* ``search``: one lower-cased text per sample (id, chatbot, raw output, parse detail and the whole
  transcript) for the text filter, and the start of the rated text and of the message before it
  (the list's snippets).

Both are built once, in a background thread when the viewer opens the run; a query that needs one
waits for it.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Any

from harness.view.items import Transcripts

INDEX_VERSION = "2"
SNIPPET = 220  # characters of the rated text (and of the message before it) in the list
# sqrt(E[x²] − E[x]²) of the {label: share} map m
SPREAD_SQL = """CASE WHEN m IS NOT NULL AND len(map_keys(m)) > 0 THEN sqrt(greatest(0.0,
  list_sum(list_transform(map_entries(m), lambda e: e.value * (e.key::DOUBLE) ^ 2))
  - list_sum(list_transform(map_entries(m), lambda e: e.value * e.key::DOUBLE)) ^ 2)) END"""


def spread_sql(column: str = "human_distribution") -> str:
    return f"(SELECT {SPREAD_SQL} FROM (SELECT TRY_CAST(TRY_CAST({column} AS JSON) AS MAP(VARCHAR, DOUBLE)) AS m))"


def _pct(col: str, part: str) -> str:
    """Average-rank percentile of ``col`` within ``part`` (rank = first of the ties, cume_dist × n =
    the last)."""
    w = f"(PARTITION BY {part} ORDER BY {col})"
    n = f"count(*) OVER (PARTITION BY {part})"
    return f"CASE WHEN {n} > 1 THEN ((rank() OVER {w} + cume_dist() OVER {w} * {n}) / 2 - 1) / ({n} - 1) END"


LIGHT = ("rid", "task", "dataset", "language", "id", "system", "parse_status", "score", "human_rating")
_PART = "task, dataset, language, both_"


def idx_sql(columns: list[str]) -> str:
    have = [c if c in columns else f"NULL AS {c}" for c in LIGHT]
    spread = spread_sql() if "human_distribution" in columns else "NULL::DOUBLE"
    return f"""
SELECT * EXCLUDE (both_), abs(judge_pct - human_pct) AS disagreement FROM (
  SELECT *,
    CASE WHEN both_ THEN {_pct("score", _PART)} END AS judge_pct,
    CASE WHEN both_ THEN {_pct("human_rating", _PART)} END AS human_pct
  FROM (
    SELECT {", ".join(have)}, {spread} AS spread,
      (score IS NOT NULL AND NOT isnan(score) AND human_rating IS NOT NULL) AS both_
    FROM samples
  )
)"""


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
    """Builds (or reads back) ``idx`` and ``search`` for one run; thread-safe."""

    def __init__(
        self, con: Any, samples: Path, columns: list[str], items: Transcripts, cache_dir: Path | None
    ) -> None:
        self.con = con
        self.samples = samples
        self.columns = columns
        self.items = items
        self.cache_dir = cache_dir or default_cache_dir()
        self._locks = {"idx": threading.Lock(), "search": threading.Lock()}
        self.ready = {"idx": False, "search": False}
        self.seconds: dict[str, float] = {}
        self.cached: dict[str, bool] = {}
        self._building: Any = None  # the cursor of a build in progress (interrupted by close())
        self.closed = False

    def _sql(self, name: str) -> str:
        if name == "idx":
            return idx_sql(self.columns)
        own = [f"s.{c}" for c in ("id", "system", "raw_output", "parse_detail") if c in self.columns]
        src = self.items.source()
        if src is None:
            return (
                f"SELECT s.rid, lower(concat_ws(' ', {', '.join(own)})) AS text, NULL::VARCHAR AS snippet, "
                "NULL::VARCHAR AS context_tail FROM samples s"
            )
        i = "i"
        return (
            f"SELECT s.rid, lower(concat_ws(' ', {', '.join(own)}, {self.items.text_expr(i)})) AS text, "
            f"left(coalesce({i}.response, {i}.turns[-1].text), {SNIPPET}) AS snippet, "
            f"left(CASE WHEN {i}.response IS NOT NULL THEN {i}.context[-1].text "
            f"ELSE {i}.turns[-2].text END, {SNIPPET}) AS context_tail "
            f"FROM samples s LEFT JOIN {src} {i} ON {i}.dataset = s.dataset AND {i}.id = s.id"
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
            t = time.perf_counter()
            cur = self._building = self.con.cursor()
            cache = self._cache_file(name)
            self.cached[name] = False
            if cache.is_file():
                try:
                    cur.execute(
                        f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM read_parquet('{_sq(cache)}')"
                    )
                    self.cached[name] = True
                except Exception:  # noqa: BLE001 - a damaged cache file is rebuilt
                    cache.unlink(missing_ok=True)
            if not self.cached[name]:
                cur.execute(f"CREATE OR REPLACE TABLE {name} AS {self._sql(name)}")
                self._write_cache(cur, name, cache)
            self._building = None
            self.seconds[name] = time.perf_counter() - t
            self.ready[name] = True

    def close(self) -> None:
        """Stop a build in progress (the process is exiting)."""
        self.closed = True
        cur = self._building
        if cur is not None:
            try:
                cur.interrupt()
            except Exception:  # noqa: BLE001 - nothing left to stop
                pass

    @staticmethod
    def _write_cache(cur: Any, name: str, cache: Path) -> None:
        tmp = cache.with_name(f".{cache.name}.{os.getpid()}.{threading.get_ident()}")
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cur.execute(f"COPY {name} TO '{_sq(tmp)}' (FORMAT parquet)")
            os.replace(tmp, cache)
        except Exception:  # noqa: BLE001 - no writable cache: the index lives in memory only
            tmp.unlink(missing_ok=True)

    def start(self) -> threading.Thread:
        """Build both indexes in a background thread (``idx`` first)."""

        def work() -> None:
            for name in ("idx", "search"):
                try:
                    self.ensure(name)
                except Exception:  # noqa: BLE001 - the query that needs it will build it again and say why
                    return

        th = threading.Thread(target=work, name=f"view-index-{self.samples.parent.name}", daemon=True)
        th.start()
        return th
