"""Which requests ``darwin view`` answers: only those addressed to it by a name it serves.

A browser keeps a page from reading another site's answers by the site's *name*, not by its
address. A web page on ``evil.example`` that makes its name resolve to 127.0.0.1 (DNS
rebinding) would otherwise read the viewer's pages and post labels as a page of the same
site. So :class:`SameOrigin` answers a request only when its ``Host`` header names an
address the viewer serves (the loopback names and, with ``--expose``, the names given) at the
port it listens on, and its ``Origin``, when a browser sends one, is that same address over
``http``. Everything else gets a 421 (wrong ``Host``) or a 403 (foreign ``Origin``) before any
route runs.

It also answers ``HEAD`` as ``GET`` without the body (same status and headers).

    >>> parse_host("LocalHost:8765"), parse_host("[::1]"), parse_host("view.lab.example")
    (('localhost', 8765), ('::1', None), ('view.lab.example', None))
    >>> parse_host("evil.example:http")
    Traceback (most recent call last):
    ...
    ValueError: 'evil.example:http' is not a host name with an optional port (NAME, NAME:PORT or [IPV6]:PORT)
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["LOOPBACK_NAMES", "SameOrigin", "parse_host"]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
"""The names a browser on this machine reaches a loopback viewer by; always served."""

_HTTP_PORT = 80


def parse_host(text: str) -> tuple[str, int | None]:
    """``NAME``, ``NAME:PORT`` or ``[IPV6]:PORT`` (a ``Host`` header's form) as a lower-case name
    without brackets and the port (``None`` when not given). Raises ``ValueError`` on anything
    else (a user part, a path, a port that is not a number)."""
    bad = ValueError(f"{text!r} is not a host name with an optional port (NAME, NAME:PORT or [IPV6]:PORT)")
    if not text or any(c in text for c in "@/?#\\ \t\r\n\x00"):
        raise bad
    try:
        parts = urlsplit("//" + text)
        port = parts.port
    except ValueError:
        raise bad from None
    if not parts.hostname:
        raise bad
    return parts.hostname.lower(), port


class SameOrigin:
    """ASGI middleware: refuse a request whose ``Host`` is not one of ``hosts`` at the port the
    connection came in on (``(name, port)`` pairs; a ``None`` port is the listening one), or whose
    ``Origin`` is not ``http://`` + that same host; answer ``HEAD`` like ``GET`` without a body."""

    def __init__(self, app: ASGIApp, hosts: Iterable[tuple[str, int | None]]) -> None:
        self.app = app
        self.hosts = frozenset((name.lower().strip("[]"), port) for name, port in hosts)

    def _served(self, name: str, port: int, listening: int | None) -> bool:
        return (name, port) in self.hosts or ((name, None) in self.hosts and port in (listening, None))

    def refusal(self, scope: Scope) -> PlainTextResponse | None:
        """Why ``scope``'s request is not answered (a 4xx response), or ``None`` when it is."""
        headers = Headers(scope=scope)
        server = scope.get("server")
        listening = None if server is None else int(server[1])
        host = headers.get("host", "")
        try:
            name, port = parse_host(host)
        except ValueError:
            return PlainTextResponse(f"this darwin view needs a Host header naming it, not {host!r}\n", 400)
        port = _HTTP_PORT if port is None else port
        if not self._served(name, port, listening):
            served = ", ".join(sorted(f"[{n}]" if ":" in n else n for n, _ in self.hosts))
            return PlainTextResponse(
                f"this darwin view answers only as {served} on port {listening}, not as {host!r} "
                "(a page on another site that points its name at this machine sends such requests). "
                "Fix: open it by one of those names, or start it with --allow-host NAME[:PORT]\n",
                421,
            )
        origin = headers.get("origin")
        if origin is not None:
            parts = urlsplit(origin)
            try:
                same = (
                    parts.scheme == "http"
                    and parts.hostname is not None
                    and (parts.hostname.lower(), parts.port or _HTTP_PORT) == (name, port)
                    and parts.path in ("", "/")
                    and not parts.username
                )
            except ValueError:  # a port that is not a number
                same = False
            if not same:
                return PlainTextResponse(
                    f"a request from {origin!r} is refused: only this viewer's own pages (http://{host}) may call it\n",
                    403,
                )
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        head = scope["method"] == "HEAD"
        if head:
            scope = {**scope, "method": "GET"}

            async def send_headers_only(message: Message) -> None:
                if message["type"] == "http.response.body":
                    message = {**message, "body": b""}
                await send(message)

            target: Send = send_headers_only
        else:
            target = send
        refused = self.refusal(scope)
        if refused is not None:
            await refused(scope, receive, target)
            return
        await self.app(scope, receive, target)
