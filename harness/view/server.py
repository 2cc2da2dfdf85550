"""``harness view``: a read-only web app over run directories, on 127.0.0.1.

A small ASGI app (Starlette, served by uvicorn) answers JSON under ``/api`` and serves the page and
its plain-JS assets from this package (``harness/view/assets``; nothing from a CDN, so it works
offline). Every API route is a GET; nothing writes to the runs. The same :class:`Viewer` object
answers the static bundle's data files (:mod:`harness.view.bundle`), so both show the same numbers.

API (all JSON; errors are ``{"error": message}`` with status 400 or 404)::

    GET /api/runs                                   the runs (key, judge, tasks, items, path)
    GET /api/runs/{key}/overview                    provenance, metric tables, meta sections
    GET /api/runs/{key}/facets                      filter values with counts, score range
    GET /api/runs/{key}/samples?task=&dataset=&language=&system=&parse=&score_min=&score_max=
                               &q=&sort=run|disagreement|spread|score|human&order=&page=&page_size=
                                                    (snippets_pending: true until the search index
                                                    is built: then ask /snippets for the texts)
    GET /api/runs/{key}/snippets?rids=1,2,3         the list's texts of those rows
    GET /api/runs/{key}/sample?task=&dataset=&id=   one sample with its transcript
    GET /api/runs/{key}/scatter?task=               judge vs human points per language
    GET /api/compare?a=KEY&b=KEY[&task=]            paired comparison of two runs
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from harness.view.compare import compare
from harness.view.data import Payload, RunFiles
from harness.view.overview import overview
from harness.view.store import MAX_PAGE_SIZE, Query, SampleStore
from harness.webserver import LocalServer

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

ASSETS = Path(str(resources.files("harness.view") / "assets"))


class NotFound(LookupError):
    """A run, sample or page that does not exist (HTTP 404)."""


def _item(o: object) -> object:
    """A NumPy scalar's Python value; anything else as it is."""
    item = getattr(o, "item", None)
    return item() if callable(item) and not isinstance(o, str | bytes) else o


def to_json(obj: object) -> str:
    def default(o: object) -> object:
        value = _item(o)  # numpy scalars
        return value if value is not o else str(o)

    def clean(o: object) -> object:
        if isinstance(o, float):
            return None if math.isnan(o) or math.isinf(o) else o
        if isinstance(o, dict):
            return {str(k): clean(v) for k, v in o.items()}
        if isinstance(o, list | tuple):
            return [clean(v) for v in o]
        value = _item(o)
        return o if value is o else clean(value)

    return json.dumps(clean(obj), ensure_ascii=False, allow_nan=False, default=default)


class Viewer:
    """The runs one viewer shows: one :class:`SampleStore` per run (made on first use) and a small
    cache of comparisons."""

    def __init__(self, runs: list[RunFiles], *, cache_dir: Path | None = None) -> None:
        if not runs:
            raise ValueError("no runs to show")
        self.runs = {r.key: r for r in runs}
        self.cache_dir = cache_dir
        self._stores: dict[str, SampleStore] = {}
        self._lock = threading.Lock()
        self._compared: OrderedDict[tuple[str, str, str | None], Payload] = OrderedDict()
        self._warming: threading.Thread | None = None
        self._closed = False

    def run(self, key: str) -> RunFiles:
        if key not in self.runs:
            raise NotFound(f"no run {key!r} in this viewer (runs: {', '.join(self.runs)})")
        return self.runs[key]

    def store(self, key: str) -> SampleStore:
        run = self.run(key)
        with self._lock:
            if key not in self._stores:
                if run.samples is None:
                    raise NotFound(f"run {key}: no samples.parquet in {run.path}")
                self._stores[key] = SampleStore(run, cache_dir=self.cache_dir)
            return self._stores[key]

    def warm(self) -> threading.Thread:
        """Build every run's indexes in a background thread (the quick ones of every run first)."""

        def work() -> None:
            # every run's filter/sort index first, then the search indexes, then the texts in memory
            stages = ("idx", "search", "text")
            failed: set[str] = set()
            for stage in stages:
                for key, run in self.runs.items():
                    if run.samples is None or self._closed or key in failed:
                        continue
                    try:
                        st = self.store(key)
                        if stage == "text":
                            st.index.load_text()
                        else:
                            st.index.ensure(stage)
                    except Exception:  # noqa: BLE001 - the query that needs it builds it again and says why
                        failed.add(key)

        th = threading.Thread(target=work, name="view-warm", daemon=True)
        th.start()
        self._warming = th
        return th

    def close(self, timeout: float = 10.0) -> None:
        """Interrupt index builds still running and wait for them (before the process exits: a DuckDB
        query left running in a thread at interpreter exit aborts the process)."""
        self._closed = True
        for st in list(self._stores.values()):
            st.index.close()
        if self._warming is not None:
            self._warming.join(timeout)

    # -- the API -------------------------------------------------------------------------------
    def list_runs(self) -> list[Payload]:
        return [r.summary() for r in self.runs.values()]

    def overview(self, key: str) -> Payload:
        return overview(self.run(key))

    def facets(self, key: str) -> Payload:
        return self.store(key).facets()

    def samples(self, key: str, params: dict[str, str]) -> Payload:
        return self.store(key).query(Query.from_params(params), snippets=False)

    def snippets(self, key: str, rids: str) -> Payload:
        try:
            wanted = [int(r) for r in rids.split(",") if r.strip()]
        except ValueError:
            raise ValueError(f"rids={rids!r}: expected row numbers separated by commas") from None
        if len(wanted) > MAX_PAGE_SIZE:
            raise ValueError(f"rids: at most {MAX_PAGE_SIZE} rows at a time")
        found = self.store(key).snippets(wanted)
        return {"snippets": {str(r): list(found.get(r, (None, None))) for r in wanted}}

    def sample(self, key: str, task: str, dataset: str, sample_id: str) -> Payload:
        found = self.store(key).sample(task, dataset, sample_id)
        if found is None:
            raise NotFound(f"run {key}: no sample {sample_id!r} of dataset {dataset!r} in task {task!r}")
        return found

    def scatter(self, key: str, task: str) -> Payload:
        if task not in self.run(key).tasks:
            raise NotFound(f"run {key} has no task {task!r}")
        return self.store(key).scatter(task)

    def compare(self, a: str, b: str, task: str | None = None) -> Payload:
        if a == b:
            raise ValueError("compare needs two different runs")
        k = (a, b, task or None)
        with self._lock:
            if k in self._compared:
                return self._compared[k]
        out = compare(self.run(a), self.run(b), task=task or None)
        with self._lock:
            self._compared[k] = out
            while len(self._compared) > 16:
                self._compared.popitem(last=False)
        return out


def page_html(mode: str) -> str:
    """The single page, told whether it talks to a server or reads a bundle's data files."""
    html = (ASSETS / "index.html").read_text(encoding="utf-8")
    return html.replace("<!--MODE-->", f'<script>window.DIALEVAL_MODE = "{mode}";</script>')


def create_app(viewer: Viewer) -> Starlette:
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    def respond(fn: Callable[[Request], object]) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            try:
                body, status = to_json(fn(request)), 200
            except NotFound as e:
                body, status = to_json({"error": str(e)}), 404
            except (ValueError, FileNotFoundError) as e:
                body, status = to_json({"error": str(e)}), 400
            return Response(body, status_code=status, media_type="application/json; charset=utf-8")

        return endpoint

    def q(request: Request, name: str) -> str:
        value = request.query_params.get(name)
        if not value:
            raise ValueError(f"missing query parameter {name!r}")
        return value

    def params(request: Request) -> dict[str, str]:
        return {k: v for k, v in request.query_params.items()}

    index = page_html("server")
    routes = [
        Route("/", lambda request: HTMLResponse(index)),
        Route("/api/runs", respond(lambda r: viewer.list_runs())),
        Route("/api/runs/{key}/overview", respond(lambda r: viewer.overview(r.path_params["key"]))),
        Route("/api/runs/{key}/facets", respond(lambda r: viewer.facets(r.path_params["key"]))),
        Route("/api/runs/{key}/samples", respond(lambda r: viewer.samples(r.path_params["key"], params(r)))),
        Route(
            "/api/runs/{key}/snippets", respond(lambda r: viewer.snippets(r.path_params["key"], q(r, "rids")))
        ),
        Route(
            "/api/runs/{key}/sample",
            respond(lambda r: viewer.sample(r.path_params["key"], q(r, "task"), q(r, "dataset"), q(r, "id"))),
        ),
        Route(
            "/api/runs/{key}/scatter", respond(lambda r: viewer.scatter(r.path_params["key"], q(r, "task")))
        ),
        Route(
            "/api/compare",
            respond(lambda r: viewer.compare(q(r, "a"), q(r, "b"), r.query_params.get("task"))),
        ),
        Mount("/assets", StaticFiles(directory=ASSETS), name="assets"),
    ]
    return Starlette(routes=routes)


class ViewerServer(LocalServer):
    """uvicorn serving :func:`create_app` on a bound socket, in the foreground (:meth:`run`) or in a
    background thread (``with ViewerServer(...) as srv: srv.url``)."""

    def __init__(self, viewer: Viewer, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(create_app(viewer), host, port, name="viewer")
