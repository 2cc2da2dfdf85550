"""The annotator's web app of ``harness annotate``: one private page per annotator, over a :class:`Project`.

A small ASGI app (Starlette, served by uvicorn, the stack of ``harness view``) answers JSON under
``/api/{token}/...`` and serves the page and its plain-JS assets from this package
(``harness/annotate/assets``; nothing from a CDN, so it works offline). The token in the URL is the
only way in: every API call resolves it to one annotator (:meth:`Project.annotator_for`) and reads or
writes that annotator's queue only. Every submission is committed by the store before the answer
leaves, so a killed server loses nothing it acknowledged.

API (all JSON; errors are ``{"error": message}`` with status 400, 403, 404, 405 or 413)::

    GET  /a/{token}                the annotator page (HTML)
    GET  /assets/{file}            one file of harness/annotate/assets (nothing else is served)
    GET  /api/{token}/form         the form: task, dataset, level, guideline (+ guideline_html), fields
    GET  /api/{token}/next         {"item": the next item or null when the queue is done, "progress": ...}
    POST /api/{token}/submit       {"item_id", "submission_id", "labels": {dimension: value},
                                    "skip": false, "flag": null | "comment"} -> {"progress": ...}
                                   (the same submission_id again is a no-op answered 200)
    POST /api/{token}/undo         {"item": the reopened item with its earlier labels, or null, "progress": ...}
    GET  /api/{token}/progress     {"done", "skipped", "flagged", "total"}

The store's calls run off the event loop (:class:`StoreCalls`): writes (submit, undo) on one thread,
in order, through the served :class:`Project`; reads (token, next item, progress) on a few threads,
each with its own connection to the same SQLite file, which in WAL mode sees every committed write
and never waits for the writer. The event loop stays free to read and refuse request bodies. A body over :data:`MAX_BODY` bytes is refused with
413 from its Content-Length, or, without one, as soon as the stream passes the cap (it is never read whole).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from harness.annotate.store import AnnotationError, Project, Submission
from harness.webserver import LocalServer

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

ASSETS = Path(str(resources.files("harness.annotate") / "assets"))
MAX_BODY = 64 * 1024
"""The largest request body accepted (bytes): a submission with a long flag comment is a few KiB."""
READERS = 4
"""Threads (each with its own connection) that answer the read-only calls."""

T = TypeVar("T")

# The page sends the token in its path only; these headers keep it out of Referer headers and caches,
# and keep the page from loading anything but its own assets.
SECURITY_HEADERS = {
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
}


class BadRequest(Exception):
    """A request the web layer refuses before it reaches the store (not JSON, too large)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _error_status(e: AnnotationError | BadRequest) -> int:
    status = getattr(e, "status", 400)
    return status if isinstance(status, int) and 400 <= status < 500 else 400


def guideline_html(markdown: str) -> str:
    """The guideline rendered from markdown (raw HTML in it is shown as text, never run)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown)


def page_html() -> str:
    return (ASSETS / "annotate.html").read_text(encoding="utf-8")


def asset_files() -> dict[str, Path]:
    """The files the server may send: the regular files directly inside the assets folder, by name."""
    return {p.name: p for p in ASSETS.iterdir() if p.is_file() and not p.name.startswith(".")}


MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}


async def read_body(request: Request, limit: int = MAX_BODY) -> bytes:
    """The request body, refused (without reading it all) when it is larger than ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise BadRequest(400, f"Content-Length {declared!r} is not a number") from None
        if size > limit:
            raise BadRequest(413, f"request body of {size} bytes; at most {limit} bytes are accepted")
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise BadRequest(413, f"request body over {limit} bytes; at most {limit} bytes are accepted")
        chunks.append(chunk)
    return b"".join(chunks)


class StoreCalls:
    """The project's calls, run off the event loop: writes on one thread through ``project`` (so a
    submission's idempotence check and its insert never interleave with another write), reads on
    ``readers`` threads, each with its own :meth:`Project.open` of the same file."""

    def __init__(self, project: Project, readers: int = READERS) -> None:
        self.project = project
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="annotate-write")
        self._readers = ThreadPoolExecutor(max_workers=readers, thread_name_prefix="annotate-read")
        self._local = threading.local()
        self._opened: list[Project] = []
        self._lock = threading.Lock()

    def _reader(self) -> Project:
        mine: Project | None = getattr(self._local, "project", None)
        if mine is None:
            mine = Project.open(self.project.path)
            self._local.project = mine
            with self._lock:
                self._opened.append(mine)
        return mine

    async def read(self, fn: Callable[[Project], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._readers, lambda: fn(self._reader()))

    async def write(self, fn: Callable[[Project], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._writer, lambda: fn(self.project))

    def close(self) -> None:
        """Wait for the calls under way, then close the readers' connections (not the project's)."""
        self._writer.shutdown(wait=True)
        self._readers.shutdown(wait=True)
        with self._lock:
            for p in self._opened:
                p.close()
            self._opened.clear()


def create_app(project: Project) -> Starlette:
    """The annotator app over one project (every route; JSON errors for every refusal)."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.responses import FileResponse, HTMLResponse, Response
    from starlette.routing import Route

    store = StoreCalls(project)
    files = asset_files()
    page = page_html()
    form_json: dict[str, object] = dict(project.form.to_json())
    form_json["guideline_html"] = guideline_html(project.form.guideline)

    def send(payload: object, status: int = 200) -> Response:
        body = json.dumps(payload, ensure_ascii=False, allow_nan=False)
        return Response(
            body, status_code=status, media_type="application/json; charset=utf-8", headers=SECURITY_HEADERS
        )

    def error(message: str, status: int) -> Response:
        return send({"error": message}, status)

    def api(handler: Callable[[Request, str], Any]) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            try:
                token = request.path_params["token"]
                annotator = await store.read(lambda p: p.annotator_for(token))
                return send(await handler(request, annotator))
            except (AnnotationError, BadRequest) as e:
                return error(str(e), _error_status(e))

        return endpoint

    async def form(request: Request, annotator: str) -> object:
        return form_json

    async def next_item(request: Request, annotator: str) -> object:
        def work(p: Project) -> dict[str, object]:
            item = p.next_item(annotator)
            return {
                "item": None if item is None else item.to_json(),
                "progress": p.progress(annotator).to_json(),
            }

        return await store.read(work)

    async def submit(request: Request, annotator: str) -> object:
        raw = await read_body(request)
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise BadRequest(400, f"the body is not JSON: {e}") from None
        sub = Submission.from_json(data)
        progress = await store.write(lambda p: p.submit(annotator, sub))
        return {"progress": progress.to_json()}

    async def undo(request: Request, annotator: str) -> object:
        await read_body(request)  # nothing expected; a huge body is still refused

        def work(p: Project) -> dict[str, object]:
            item = p.undo(annotator)
            return {
                "item": None if item is None else item.to_json(),
                "progress": p.progress(annotator).to_json(),
            }

        return await store.write(work)

    async def progress(request: Request, annotator: str) -> object:
        return (await store.read(lambda p: p.progress(annotator))).to_json()

    async def annotator_page(request: Request) -> Response:
        token = request.path_params["token"]
        try:
            await store.read(lambda p: p.annotator_for(token))
        except AnnotationError as e:
            return error(str(e), _error_status(e))
        return HTMLResponse(page, headers=SECURITY_HEADERS)

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        path = files.get(name)
        if path is None:
            return error(f"no asset {name!r}", 404)
        media = MEDIA_TYPES.get(path.suffix, "application/octet-stream")
        return FileResponse(path, media_type=media, headers={"X-Content-Type-Options": "nosniff"})

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        reason = {404: "no such page", 405: f"method {request.method} not allowed here"}.get(
            status, exc.detail if isinstance(exc, HTTPException) else "server error"
        )
        return error(f"{reason}: {request.url.path}", status)

    routes = [
        Route("/a/{token}", annotator_page),
        Route("/assets/{name:path}", asset),
        Route("/api/{token}/form", api(form)),
        Route("/api/{token}/next", api(next_item)),
        Route("/api/{token}/submit", api(submit), methods=["POST"]),
        Route("/api/{token}/undo", api(undo), methods=["POST"]),
        Route("/api/{token}/progress", api(progress)),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error})
    app.state.store = store
    return app


class AnnotationServer(LocalServer):
    """uvicorn serving :func:`create_app` on a bound socket, in the foreground (:meth:`run`) or in a
    background thread (``with AnnotationServer(project) as srv: srv.url``)."""

    def __init__(self, project: Project, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = create_app(project)
        super().__init__(self.app, host, port, name="annotation")

    def page_url(self, token: str) -> str:
        """The private address of one annotator's page."""
        return f"{self.url}a/{token}"

    def run(self) -> None:
        """Serve until Ctrl-C (or :attr:`server.should_exit`); returns normally on Ctrl-C."""
        try:
            super().run()
        except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it shut down on: the normal way to stop
            pass
        finally:
            self.app.state.store.close()
            self.sock.close()


def serve(
    project: Project, host: str = "127.0.0.1", port: int = 0, *, ready: Callable[[str], None] | None = None
) -> None:
    """Serve the annotator pages of ``project`` on ``host:port`` until Ctrl-C (blocking; prints nothing).

    ``ready`` is called with the base URL (``http://host:port/``) once the socket is bound, before the
    first request is answered: the caller prints each annotator's address (``URL + "a/" + token``)
    from it, which also works for ``port=0`` (a free port chosen by the OS). A port already taken is
    an :class:`OSError` that says so."""
    server = AnnotationServer(project, host=host, port=port)
    if ready is not None:
        ready(server.url)
    server.run()


def main(argv: list[str] | None = None) -> None:
    """``python -m harness.annotate.server PROJECT.sqlite [--host H] [--port N]``: serve one project file
    and print its base URL on the first line (what the kill-and-restart tests and the serving bench use)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m harness.annotate.server", description=main.__doc__)
    parser.add_argument("project", type=Path, help="the project's SQLite file")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    project = Project.open(args.project)
    serve(project, args.host, args.port, ready=lambda url: print(url, flush=True))


if __name__ == "__main__":
    main()
