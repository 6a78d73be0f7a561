"""Serving the viewer: a uvicorn server on a socket bound before it starts (so port 0 gets a
free port whose number is known at once), in the foreground or in a thread.

    >>> from darwin.view.app import create_app
    >>> server = ViewServer(create_app([]), host="127.0.0.1", port=0)
    >>> server.url.startswith("http://127.0.0.1:")
    True
    >>> server.close()
"""

from __future__ import annotations

import socket
import threading
import time

import uvicorn
from fastapi import FastAPI

__all__ = ["ViewServer"]


class ViewServer:
    """``app`` served on ``host:port`` (``port=0``: any free port); :attr:`url` is its address."""

    def __init__(self, app: FastAPI, *, host: str, port: int) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, port))
        self.port = int(self.socket.getsockname()[1])
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.port}/"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
        self._thread: threading.Thread | None = None

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted (Ctrl-C)."""
        self.server.run(sockets=[self.socket])

    def start(self) -> ViewServer:
        """Serve in a background thread; returns once the server accepts requests."""
        self._thread = threading.Thread(target=self.serve_forever, name="darwin-view", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"darwin view did not start on {self.url}")
            time.sleep(0.02)
        return self

    def close(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.socket.close()

    def __enter__(self) -> ViewServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
