"""Server-side queries over one run's ``samples.parquet`` with DuckDB: filters, text search, sorting,
pagination, facets, one sample, and the points of the judge-vs-human scatter plots.

Nothing is loaded up front: ``samples`` is a DuckDB view over the Parquet file (its row number
``rid`` is the stable row key), so the first page of a 1M-row run reads a few column chunks. Sorting
by disagreement or human spread and the text filter use the per-run indexes of
:mod:`harness.view.index` (built in the background when the run is opened, cached on disk); once
the filter index is there every query runs on it, in memory.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.view.data import Payload, RunFiles
from harness.view.index import LIGHT, SNIPPET, RunIndex, spread_sql
from harness.view.items import Transcripts

PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
SCATTER_POINTS = 1500  # per language
FACETS = ("task", "dataset", "language", "system", "parse_status")
SORTS = ("run", "disagreement", "spread", "score", "human")
_DERIVED_SORTS = {"disagreement", "spread"}
_JSON_COLUMNS = ("extra", "human_labels", "judge_labels", "human_distribution")
SEARCHES_KEPT = 8  # the matches of the last few text searches, kept for paging and sorting through them


@dataclass
class Query:
    """One request of the samples browser; :meth:`from_params` checks every field."""

    task: list[str] = field(default_factory=list)
    dataset: list[str] = field(default_factory=list)
    language: list[str] = field(default_factory=list)
    system: list[str] = field(default_factory=list)
    parse: str | None = None  # "ok", "failed" or one parse_status
    score_min: float | None = None
    score_max: float | None = None
    q: str | None = None
    sort: str = "run"
    order: str = "asc"
    page: int = 1
    page_size: int = PAGE_SIZE

    @classmethod
    def from_params(cls, params: Mapping[str, object]) -> Query:
        def many(name: str) -> list[str]:
            raw = params.get(name)
            vals = raw if isinstance(raw, list) else ([] if raw in (None, "") else str(raw).split(","))
            return [str(v) for v in vals if str(v) != ""]

        def num(name: str) -> float | None:
            raw = params.get(name)
            if raw in (None, ""):
                return None
            try:
                v = float(str(raw))
            except (TypeError, ValueError):
                raise ValueError(f"{name}={raw!r} is not a number") from None
            if math.isnan(v):
                raise ValueError(f"{name} is NaN")
            return v

        def integer(name: str, default: int, lo: int, hi: int) -> int:
            raw = params.get(name)
            if raw in (None, ""):
                return default
            try:
                v = int(str(raw))
            except ValueError:
                raise ValueError(f"{name}={raw!r} is not an integer") from None
            if not lo <= v <= hi:
                raise ValueError(f"{name}={v} is out of range [{lo}, {hi}]")
            return v

        sort = str(params.get("sort") or "run")
        if sort not in SORTS:
            raise ValueError(f"sort={sort!r}: expected one of {', '.join(SORTS)}")
        default_order = "desc" if sort in _DERIVED_SORTS else "asc"
        order = str(params.get("order") or default_order)
        if order not in ("asc", "desc"):
            raise ValueError(f"order={order!r}: expected asc or desc")
        q = str(params.get("q") or "").strip() or None
        return cls(
            task=many("task"),
            dataset=many("dataset"),
            language=many("language"),
            system=many("system"),
            parse=str(params.get("parse")) if params.get("parse") not in (None, "") else None,
            score_min=num("score_min"),
            score_max=num("score_max"),
            q=q,
            sort=sort,
            order=order,
            page=integer("page", 1, 1, 10**9),
            page_size=integer("page_size", PAGE_SIZE, 1, MAX_PAGE_SIZE),
        )


def _loads(value: object) -> object:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _clean(v: object) -> object:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


class _Quiet:
    """A DuckDB connection whose cursors print no progress bar (a per-connection setting) into the
    terminal of `harness view` while an index builds."""

    def __init__(self, con: Any) -> None:
        self._con = con

    def cursor(self) -> Any:
        cur = self._con.cursor()
        cur.execute("SET enable_progress_bar = false")
        return cur

    def execute(self, *args: Any) -> Any:
        return self.cursor().execute(*args)


class SampleStore:
    """Queries over one run (see the module docstring). Safe to share between threads: every call
    runs on its own DuckDB cursor."""

    def __init__(self, run: RunFiles, *, cache_dir: Path | None = None, threads: int | None = None) -> None:
        import duckdb

        if run.samples is None:
            raise FileNotFoundError(f"{run.path}: no samples.parquet — the run wrote no per-sample rows")
        self.run = run
        threads = threads or min(4, os.cpu_count() or 1)
        self.con = _Quiet(duckdb.connect(":memory:", config={"threads": threads}))
        path = str(run.samples).replace("'", "''")
        self.con.execute(
            "CREATE VIEW samples AS SELECT * EXCLUDE (file_row_number), file_row_number AS rid "
            f"FROM read_parquet('{path}', file_row_number=true)"
        )
        self.columns = [r[0] for r in self.con.execute("DESCRIBE samples").fetchall()]
        self.items = Transcripts(self.con, run)
        self.index = RunIndex(self.con, run.samples, self.columns, self.items, cache_dir)
        self._facets: Payload | None = None
        self._searches: OrderedDict[str, str] = OrderedDict()
        self._search_lock = threading.Lock()
        self._search_seq = 0

    def start_index(self) -> None:
        self.index.start()

    # -- facets ---------------------------------------------------------------------------------
    def facets(self) -> Payload:
        """Distinct values with counts of the filter fields, the score range and the row count."""
        if self._facets is not None:
            return self._facets
        cur = self.con.cursor()
        src = "idx" if self.index.ready["idx"] else "samples"
        out: Payload = {}
        for col in FACETS:
            if col not in self.columns:
                out[col] = []
                continue
            rows = cur.execute(
                f'SELECT "{col}", count(*) FROM {src} GROUP BY 1 ORDER BY 2 DESC, 1 NULLS LAST'
            ).fetchall()
            out[col] = [{"value": v, "n": int(n)} for v, n in rows]
        n, lo, hi, failed = cur.execute(
            f"SELECT count(*), min(score), max(score), count(*) FILTER (WHERE parse_status <> 'ok') FROM {src}"
        ).fetchall()[0]
        out |= {"n": int(n), "score_min": _clean(lo), "score_max": _clean(hi), "parse_failures": int(failed)}
        out["transcripts"] = {"available": self.items.available, "notes": self.items.notes}
        self._facets = out
        return out

    # -- the samples browser --------------------------------------------------------------------
    def _where(self, q: Query) -> tuple[str, list[object]]:
        conds: list[str] = []
        params: list[object] = []
        for col in ("task", "dataset", "language", "system"):
            vals = getattr(q, col)
            if vals:
                conds.append(f"s.{col} IN ({', '.join('?' for _ in vals)})")
                params += vals
        if q.parse == "ok":
            conds.append("s.parse_status = 'ok'")
        elif q.parse == "failed":
            conds.append("s.parse_status <> 'ok'")
        elif q.parse:
            conds.append("s.parse_status = ?")
            params.append(q.parse)
        if q.score_min is not None:
            conds.append("s.score >= ?")
            params.append(q.score_min)
        if q.score_max is not None:
            conds.append("s.score <= ?")
            params.append(q.score_max)
        if q.q:
            conds.append(f"s.rid IN (SELECT rid FROM {self._matches(q.q.lower())})")
        return (" WHERE " + " AND ".join(conds)) if conds else "", params

    def _matches(self, text: str) -> str:
        """The table of the rows whose search text contains ``text`` (one scan of the search
        sidecar per new text; the last :data:`SEARCHES_KEPT` are kept for paging and sorting)."""
        with self._search_lock:
            if text in self._searches:
                self._searches.move_to_end(text)
                return self._searches[text]
            self._search_seq += 1
            name = f"matches_{self._search_seq}"
        self.con.cursor().execute(
            f"CREATE OR REPLACE TABLE {name} AS SELECT rid FROM {self.index.text_sql()} WHERE contains(text, ?)",
            [text],
        )
        with self._search_lock:
            self._searches[text] = name
            while len(self._searches) > SEARCHES_KEPT:
                self.con.cursor().execute(f"DROP TABLE IF EXISTS {self._searches.popitem(last=False)[1]}")
        return name

    def query(self, q: Query, *, snippets: bool = True) -> Payload:
        """One page: ``{total, page, page_size, pages, rows, derived_ready, snippets_pending}``.

        The rows' snippets come from the search index; before it is built they are read from the
        dataset files (``snippets=True``) or left out (``snippets=False``, ``snippets_pending``: ask
        :meth:`snippets` for them), so a first page never waits on the transcripts."""
        if q.sort in _DERIVED_SORTS:
            self.index.ensure("idx")
        src = "idx" if self.index.ready["idx"] else "samples"
        where, params = self._where(q)
        cur = self.con.cursor()
        total = int(cur.execute(f"SELECT count(*) FROM {src} s{where}", params).fetchall()[0][0])
        key = {"run": "rid", "score": "score", "human": "human_rating"}.get(q.sort, q.sort)
        order = f"s.{key} {q.order.upper()} NULLS LAST, s.rid"
        rids = [
            r[0]
            for r in cur.execute(
                f"SELECT s.rid FROM {src} s{where} ORDER BY {order} LIMIT ? OFFSET ?",
                [*params, q.page_size, (q.page - 1) * q.page_size],
            ).fetchall()
        ]
        rows = self.rows(rids, light=True)
        pending = False
        if self.index.ready["search"] or snippets:
            found = self.snippets(rids)
            for r in rows:
                r["snippet"], r["context_tail"] = found.get(r["rid"], (None, None))
        else:
            pending = bool(rows) and self.items.available
        return {
            "total": total,
            "page": q.page,
            "page_size": q.page_size,
            "pages": max(1, math.ceil(total / q.page_size)),
            "rows": rows,
            "derived_ready": self.index.ready["idx"],
            "snippets_pending": pending,
        }

    def rows(self, rids: list[int], light: bool) -> list[dict[str, Any]]:
        """The samples ``rids`` in that order: the list's columns (``light``; from the in-memory index
        once built) or every column. Only the row groups holding them are read."""
        if not rids:
            return []
        cur = self.con.cursor()
        wanted = ", ".join(str(int(r)) for r in rids)
        if light and self.index.ready["idx"]:
            cols = [*LIGHT, "spread", "disagreement", "judge_pct", "human_pct"]
            found = cur.execute(f"SELECT {', '.join(cols)} FROM idx WHERE rid IN ({wanted})").fetchall()
        else:
            names = LIGHT_COLUMNS if light else ["rid", *(c for c in self.columns if c != "rid")]
            cols = [c for c in names if c in self.columns]
            spread = spread_sql("s.human_distribution") if "human_distribution" in self.columns else "NULL"
            found = cur.execute(
                f"SELECT {', '.join(f's.{c}' for c in cols)}, {spread} AS spread FROM samples s "
                f"WHERE s.rid BETWEEN {min(rids)} AND {max(rids)} AND s.rid IN ({wanted})"
            ).fetchall()
            cols = [*cols, "spread"]
        by_rid = {r[0]: dict(zip(cols, r, strict=True)) for r in found}
        if not light and self.index.ready["idx"]:
            derived = cur.execute(
                f"SELECT rid, disagreement, judge_pct, human_pct FROM idx WHERE rid IN ({wanted})"
            ).fetchall()
            for rid, dis, jp, hp in derived:
                if rid in by_rid:
                    by_rid[rid] |= {"disagreement": dis, "judge_pct": jp, "human_pct": hp}
        rows = [by_rid[r] for r in rids if r in by_rid]
        for r in rows:
            for k in _JSON_COLUMNS:
                if k in r:
                    r[k] = _loads(r[k])
            for k, v in list(r.items()):
                r[k] = _clean(v)
        return rows

    def snippets(self, rids: list[int]) -> dict[int, tuple[str | None, str | None]]:
        """{rid: (the start of the rated text, of the message before it)}: from the search index when
        it is built (a few row groups of it), else from the item files (the rows' own items only)."""
        if not rids:
            return {}
        cur = self.con.cursor()
        if self.index.ready["search"]:
            found = cur.execute(
                f"SELECT rid, snippet, context_tail FROM {self.index.search_sql()} WHERE rid = ANY(?)",
                [[int(r) for r in rids]],
            ).fetchall()
            return {rid: (_short(a), _short(b)) for rid, a, b in found}
        if not self.items.available:
            return {}
        src = "idx" if self.index.ready["idx"] else "samples"
        keys = cur.execute(
            f"SELECT rid, dataset, id FROM {src} WHERE rid IN ({', '.join(str(int(r)) for r in rids)})"
        ).fetchall()
        items = self.items.fetch(list(dict.fromkeys((str(ds), str(i)) for _, ds, i in keys)))
        return {rid: _snippet(items.get((str(ds), str(i)))) for rid, ds, i in keys}

    # -- one sample -------------------------------------------------------------------------------
    def sample(self, task: str, dataset: str, sample_id: str) -> Payload | None:
        """Every column of one sample, its derived values and its transcript (``None``: no such sample)."""
        src = "idx" if self.index.ready["idx"] else "samples"
        found = (
            self.con.cursor()
            .execute(
                f"SELECT rid FROM {src} WHERE task = ? AND dataset = ? AND id = ? ORDER BY rid LIMIT 1",
                [task, dataset, sample_id],
            )
            .fetchall()
        )
        if not found:
            return None
        (row,) = self.rows([found[0][0]], light=False)
        item, note = self.items.fetch_one(row)
        return {"sample": row, "item": item, "item_note": note, "derived_ready": self.index.ready["idx"]}

    # -- judge vs human scatter ---------------------------------------------------------------------
    def scatter(self, task: str, max_points: int = SCATTER_POINTS) -> Payload:
        """Per language: up to ``max_points`` (human mean, judge score, human spread, dataset, id),
        a deterministic sample (by a hash of dataset and id) when there are more."""
        if self.index.ready["idx"]:
            src, spread = "idx", "spread"
        else:
            src, spread = "samples", spread_sql() if "human_distribution" in self.columns else "NULL"
        rows = (
            self.con.cursor()
            .execute(
                f"""SELECT language, n, dataset, id, human_rating, score, {spread} AS spread
                FROM (SELECT *, count(*) OVER (PARTITION BY language) AS n,
                        row_number() OVER (PARTITION BY language ORDER BY hash(dataset, id), rid) AS k
                      FROM {src} WHERE task = ? AND score IS NOT NULL AND NOT isnan(score)
                        AND human_rating IS NOT NULL)
                WHERE k <= ? ORDER BY language, k""",
                [task, max_points],
            )
            .fetchall()
        )
        langs: dict[str, Payload] = {}
        points: dict[str, list[list[object]]] = {}
        for lang, n, ds, sid, h, s, sp in rows:
            if lang not in langs:
                points[lang] = []
                langs[lang] = {"language": lang, "n": int(n), "points": points[lang]}
            points[lang].append([_clean(h), _clean(s), _clean(sp), ds, sid])
        return {"task": task, "max_points": max_points, "languages": list(langs.values())}


LIGHT_COLUMNS = [
    "rid",
    "task",
    "dataset",
    "language",
    "id",
    "system",
    "score",
    "human_rating",
    "parse_status",
]


def _short(t: object, width: int = SNIPPET) -> str | None:
    if t is None:
        return None
    s = " ".join(str(t).split())
    return s if len(s) < width else s[: width - 1] + "…"


def _snippet(item: dict[str, Any] | None) -> tuple[str | None, str | None]:
    """(the rated text, the message before it), shortened, for the list."""
    if not item:
        return None, None
    short = _short
    if item.get("response") is not None:
        ctx = item.get("context") or []
        return short(item["response"]), short(ctx[-1]["text"]) if ctx else None
    turns = item.get("turns") or []
    if turns:
        return short(turns[-1]["text"]), short(turns[-2]["text"]) if len(turns) > 1 else None
    return None, None
