"""``harness view --bundle OUT RUN ...``: the viewer as a static site — no server, the data as files
the page reads — for a static Hugging Face Space (``OUT/README.md`` carries the Space header) or any
web host, and for opening ``OUT/index.html`` straight from disk.

The data files are JavaScript (``dialevalPut(name, data)``) loaded with ``<script>`` tags, because a
page opened from ``file://`` may not ``fetch`` files. They are written by the same :class:`Viewer`
that answers the server's API, so both show the same numbers::

    OUT/index.html, OUT/assets/*             the page (package assets, nothing from a CDN)
    OUT/data/runs.js                         the runs
    OUT/data/<run>/overview.js, facets.js    overview page, filter values
    OUT/data/<run>/manifest.js               chunk sizes, tasks
    OUT/data/<run>/index-<k>.js              light rows (filters, sort keys, snippets, search text)
    OUT/data/<run>/rows-<k>.js               every column of each sample and its transcript
    OUT/data/<run>/scatter-<t>.js            judge-vs-human points of task t
    OUT/data/compare/<a>__<b>.js             run b against baseline a

The samples browser filters, sorts and pages in the browser over the index files, with the same
rules as the server (derived values come precomputed from DuckDB).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.view.data import Payload, RunFiles
from harness.view.server import ASSETS, Viewer, page_html, to_json

MARKER = ".dialeval-bundle"
INDEX_ROWS = 20_000
DETAIL_ROWS = 500
_DICT_COLUMNS = ("task", "dataset", "language", "system", "parse_status")


@dataclass
class BundleResult:
    path: Path
    runs: list[str]
    files: int = 0
    bytes: int = 0
    comparisons: list[str] = field(default_factory=list)


class _Writer:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.files = 0
        self.bytes = 0

    def put(self, name: str, data: object) -> None:
        path = self.root / "data" / f"{name}.js"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = f"dialevalPut({to_json(name)}, {to_json(data)});\n"
        path.write_text(text, encoding="utf-8")
        self.files += 1
        self.bytes += len(text.encode("utf-8"))


def _prepare(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ValueError(f"--bundle {out}: a file is in the way (give a directory)")
    if out.is_dir() and any(out.iterdir()):
        if not (out / MARKER).is_file():
            raise ValueError(
                f"--bundle {out}: the directory is not empty and is not a viewer bundle; refusing to overwrite it "
                "(give a new or empty directory)"
            )
        for name in ("data", "assets"):
            shutil.rmtree(out / name, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text(
        "written by `harness view --bundle`; rewritten by the next one\n", encoding="utf-8"
    )


def _space_card(runs: list[RunFiles], title: str) -> str:
    lines = [
        "---",
        f"title: {title}",
        "sdk: static",
        "app_file: index.html",
        "pinned: false",
        "tags:",
        "- dialeval-harness",
        "- llm-as-a-judge",
        "---",
        "",
        f"# {title}",
        "",
        "Static viewer of dialeval-harness runs (`harness view --bundle`): run overview, samples browser, "
        "run comparison. Open `index.html`.",
        "",
        "| run | judge | tasks |",
        "|---|---|---|",
        *(f"| {r.run_id} | `{r.judge}` | {', '.join(r.tasks)} |" for r in runs),
        "",
    ]
    return "\n".join(lines)


def _index_chunk(rows: list[tuple[object, ...]], names: list[str]) -> Payload:
    cols: dict[str, Any] = {n: [r[i] for r in rows] for i, n in enumerate(names)}
    dicts: dict[str, list[Any]] = {}
    for name in _DICT_COLUMNS:
        if name in cols:
            values = list(dict.fromkeys(cols[name]))
            code = {v: i for i, v in enumerate(values)}
            cols[name] = [code[v] for v in cols[name]]
            dicts[name] = values
    cols["dicts"] = dicts
    return cols


def write_run(viewer: Viewer, key: str, w: _Writer, progress: Any = None) -> None:
    run = viewer.run(key)
    w.put(f"{key}/overview", viewer.overview(key))
    if run.samples is None:
        return
    store = viewer.store(key)
    store.index.ensure("idx")
    store.index.ensure("search")
    w.put(f"{key}/facets", store.facets())
    cur = store.con.cursor()
    names = [
        "rid",
        "task",
        "dataset",
        "language",
        "id",
        "system",
        "parse_status",
        "score",
        "human_rating",
        "spread",
        "disagreement",
        "judge_pct",
        "human_pct",
        "snippet",
        "context_tail",
        "text",
    ]
    sel = ", ".join(f"s.{n}" if n not in ("snippet", "context_tail", "text") else f"t.{n}" for n in names)
    n = int(cur.execute("SELECT count(*) FROM idx").fetchall()[0][0])
    n_chunks = max(1, -(-n // INDEX_ROWS))
    for k in range(n_chunks):
        rows = cur.execute(
            f"SELECT {sel} FROM idx s LEFT JOIN {store.index.search_sql()} t USING (rid) WHERE s.rid >= ? AND s.rid < ? ORDER BY s.rid",
            [k * INDEX_ROWS, (k + 1) * INDEX_ROWS],
        ).fetchall()
        w.put(f"{key}/index-{k}", _index_chunk(rows, names))
    for k in range(-(-n // DETAIL_ROWS)):
        rids = list(range(k * DETAIL_ROWS, min(n, (k + 1) * DETAIL_ROWS)))
        details = store.rows(rids, light=False)
        items = store.items.fetch(list(dict.fromkeys((str(r["dataset"]), str(r["id"])) for r in details)))
        chunk = {}
        for r in details:
            item = items.get((str(r["dataset"]), str(r["id"])))
            note = None
            if item is None:
                item, note = store.items.fetch_one(r)
            chunk[str(r["rid"])] = {"sample": r, "item": item, "item_note": note, "derived_ready": True}
        w.put(f"{key}/rows-{k}", chunk)
        if progress is not None:
            progress(len(rids))
    for i, task in enumerate(run.tasks):
        w.put(f"{key}/scatter-{i}", store.scatter(task))
    w.put(
        f"{key}/manifest",
        {
            "index_chunks": n_chunks,
            "index_rows": INDEX_ROWS,
            "detail_rows": DETAIL_ROWS,
            "tasks": run.tasks,
            "n": n,
        },
    )


def write_bundle(
    runs: list[RunFiles], out: str | Path, *, title: str | None = None, show_progress: bool = False
) -> BundleResult:
    """Write the static viewer of ``runs`` into ``out`` (created; a previous bundle there is replaced)."""
    out = Path(out)
    _prepare(out)
    viewer = Viewer(runs)
    shutil.copytree(ASSETS, out / "assets", ignore=shutil.ignore_patterns("index.html"))
    (out / "index.html").write_text(page_html("bundle"), encoding="utf-8")
    title = title or ("dialeval run " + runs[0].run_id if len(runs) == 1 else f"dialeval: {len(runs)} runs")
    (out / "README.md").write_text(_space_card(runs, title), encoding="utf-8")
    w = _Writer(out)
    w.put("runs", viewer.list_runs())
    total = sum(_n_rows(r) for r in runs)
    bar = _progress(show_progress, total)
    with bar as p:
        task = p.add_task("bundle", total=total) if p else None
        for key in viewer.runs:
            write_run(viewer, key, w, (lambda k: p.advance(task, k)) if p else None)
    compared = []
    with_samples = [k for k, r in viewer.runs.items() if r.samples is not None]
    for a in with_samples:
        for b in with_samples:
            if a != b and set(viewer.runs[a].tasks) & set(viewer.runs[b].tasks):
                w.put(f"compare/{a}__{b}", viewer.compare(a, b))
                compared.append(f"{a}__{b}")
    return BundleResult(path=out, runs=list(viewer.runs), files=w.files, bytes=w.bytes, comparisons=compared)


def _n_rows(run: RunFiles) -> int:
    if run.samples is None:
        return 0
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(run.samples).metadata.num_rows)


def _progress(show: bool, total: int) -> Any:
    from contextlib import nullcontext

    if not show:
        return nullcontext(None)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("[bold]writing samples"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
