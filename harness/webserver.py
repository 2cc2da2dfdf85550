"""The local web servers of ``harness view`` and ``harness annotate``: a bound socket and uvicorn
serving an ASGI app on it, in the foreground or in a background thread.

:func:`bind` listens before the app starts (port 0: a free port chosen by the OS), so the caller
knows the address — and can print it — before the first request; a taken port is an error that
says how to go on. :class:`LocalServer` runs uvicorn on that socket: :meth:`LocalServer.run` serves
until Ctrl-C, ``with LocalServer(app) as srv:`` serves from a thread until the block ends.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import ASGIApp


def bind(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A listening socket (port 0: a free port chosen by the OS); a taken port is a clear error."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise OSError(
            f"cannot listen on {host}:{port} ({e.strerror or e}); pick another --port, or 0 for a free one"
        ) from None
    sock.listen(128)
    return sock


def url_of(sock: socket.socket) -> str:
    """``http://host:port/`` of a bound socket (IPv6 hosts in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}/"


class LocalServer:
    """uvicorn serving ``app`` on a socket bound at construction, in the foreground (:meth:`run`) or
    in a background thread (``with LocalServer(app) as srv: srv.url``). ``name`` names the thread
    and the error when the server does not start."""

    def __init__(self, app: ASGIApp, host: str = "127.0.0.1", port: int = 0, *, name: str = "server") -> None:
        import uvicorn

        self.name = name
        self.sock = bind(host, port)
        self.url = url_of(self.sock)
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    def run(self) -> None:
        """Serve until Ctrl-C (or ``server.should_exit``)."""
        self.server.run(sockets=[self.sock])

    def __enter__(self) -> LocalServer:
        self._thread = threading.Thread(target=self.run, name=f"harness-{self.name}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the {self.name} server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.sock.close()
