"""The ``darwin view`` web app (FastAPI): the pages of :mod:`darwin.view.pages` over one or more
runs, the screenshots from each run's content-addressed store, and the one write it allows:
a person's label of a finished episode.

Safe by default: :func:`check_bind` refuses an address other than the loopback unless the
app has a token, and with a token every request must carry it (``?token=...`` once, which
sets a cookie and redirects to the same address without the token, then the cookie). Every
request must name the viewer in its ``Host`` header and, when it has an ``Origin``, come from
the viewer's own pages (:class:`~darwin.view.origin.SameOrigin`: no DNS rebinding). Every
parameter is checked before it reaches a query: a value out of range is a 4xx, never a 500.
Screenshots are served only by their content-addressed path below the run's screenshot
directory; any other path is a 404.

    >>> app = create_app([])
    >>> sorted(r.path for r in app.routes if r.path.startswith("/runs/{k}"))[:3]
    ['/runs/{k}', '/runs/{k}/compare', '/runs/{k}/episodes']
"""

from __future__ import annotations

import hmac
import io
import ipaddress
import re
import tempfile
import zipfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from urllib.parse import urlencode

from fastapi import FastAPI, Form, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from darwin.store_rows import EpisodeFilter, EpisodeRow
from darwin.view.export import export_labels
from darwin.view.origin import LOOPBACK_NAMES, SameOrigin, parse_host
from darwin.view.pages import Links, NoSuchPage, Renderer, asset, outcome
from darwin.view.source import RunSource

__all__ = ["TOKEN_COOKIE", "BindRefused", "check_bind", "create_app", "served_hosts"]

TOKEN_COOKIE = "darwin_view_token"
_LINKS = Links()
_ASSETS = {"view.css": "text/css", "plotly.min.js": "text/javascript"}
_WILDCARDS = ("0.0.0.0", "::", "")
_NUMBER = re.compile(r"[0-9]{1,9}")
"""A page, update or run number as a parameter gives it: ASCII digits, small enough for any database."""

# The longest value each text parameter can usefully have: the run database's column widths.
_MAX_ID = 128
_MAX_NAME = 256
_MAX_NOTE = 2000
_MAX_LABELLER = 128


class BindRefused(ValueError):
    """An address the viewer will not serve on as asked; the message says why and the fix."""


def _is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, *, token: str | None, expose: bool, allow_hosts: Sequence[str] = ()) -> None:
    """Refuse to serve run data beyond this machine by accident: a non-loopback ``host`` needs
    ``expose`` and a ``token``; an exposed wildcard address (``0.0.0.0``) needs the names people
    open it by (``allow_hosts``); a name beyond the loopback in ``allow_hosts`` needs ``expose``."""
    for given in allow_hosts:
        try:
            name, _ = parse_host(given)
        except ValueError as exc:
            raise BindRefused(f"--allow-host {exc}") from None
        if not expose and not _is_loopback(name):
            raise BindRefused(
                f"refusing to answer as {given!r}, a name other machines can use, without --expose. "
                "Fix: drop --allow-host, or pass --expose, --token SECRET and --host with it"
            )
    if _is_loopback(host):
        return
    if not expose or not token:
        raise BindRefused(
            f"refusing to serve runs on {host}, which other machines can reach, "
            + ("without a token" if expose else "without --expose")
            + ". Fix: keep the default 127.0.0.1 (and use an SSH tunnel), or pass --expose and --token SECRET "
            "(or DARWIN_VIEW_TOKEN); open the page once as http://HOST:PORT/?token=SECRET"
        )
    if host in _WILDCARDS and not allow_hosts:
        raise BindRefused(
            f"serving on every address ({host}) needs the names people will open it by: a request naming "
            "another host is refused (DNS rebinding). Fix: add --allow-host NAME for each (this machine's "
            "name or IP address), or pass that address as --host"
        )


def served_hosts(host: str, allow_hosts: Sequence[str] = ()) -> list[tuple[str, int | None]]:
    """The ``(name, port)`` pairs a viewer listening on ``host`` answers as (``None``: its own
    port): the loopback names, ``host`` unless it is a wildcard, and ``allow_hosts``
    (``NAME`` or ``NAME:PORT``, e.g. ``localhost:9000`` behind an SSH tunnel).

    >>> served_hosts("127.0.0.1", ["localhost:9000"])[-1]
    ('localhost', 9000)
    """
    names: list[tuple[str, int | None]] = [(name, None) for name in LOOPBACK_NAMES]
    if host not in _WILDCARDS:
        names.append((parse_host(f"[{host}]" if ":" in host else host)[0], None))
    names.extend(parse_host(given) for given in allow_hosts)
    return names


def _text(name: str, value: str, limit: int) -> str:
    """``value`` of the text parameter ``name``, refused (400) when no stored value could be it."""
    if len(value) > limit or any(ord(c) < 32 for c in value):
        raise HTTPException(
            400, f"{name} must be at most {limit} characters without control characters; got {len(value)}"
        )
    return value


def _choice(name: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise HTTPException(400, f"{name} {value[:64]!r} is not one of: {', '.join(repr(a) for a in allowed)}")
    return value


def create_app(
    sources: Sequence[RunSource],
    *,
    token: str | None = None,
    hosts: Sequence[tuple[str, int | None]] | None = None,
) -> FastAPI:
    """The web app over ``sources`` (:func:`darwin.view.source.open_sources`), answering as
    ``hosts`` (:func:`served_hosts`; default: the loopback names at the port it listens on)."""
    app = FastAPI(title="darwin view", docs_url=None, redoc_url=None, openapi_url=None)
    renderer = Renderer(sources)

    if token is not None:

        @app.middleware("http")
        async def require_token(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
            given = request.query_params.get("token") or request.cookies.get(TOKEN_COOKIE) or ""
            if not hmac.compare_digest(given.encode(), token.encode()):
                return Response(
                    "this darwin view needs its token: open it once as /?token=SECRET\n", 401, media_type="text/plain"
                )
            if "token" not in request.query_params:
                return await call_next(request)
            if request.method == "GET":  # the cookie carries it now: out of the address bar and the history
                rest = [(key, value) for key, value in request.query_params.multi_items() if key != "token"]
                response: Response = RedirectResponse(
                    request.url.path + (f"?{urlencode(rest)}" if rest else ""),
                    status_code=303,
                    headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"},
                )
            else:
                response = await call_next(request)
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
            return response

    # Added last, so it runs first: a request for another host never meets the token check or a route.
    app.add_middleware(SameOrigin, hosts=[(n, None) for n in LOOPBACK_NAMES] if hosts is None else hosts)

    def source(k: int) -> RunSource:
        if not 0 <= k < len(sources):
            raise HTTPException(404, f"no run {k}")
        return sources[k]

    def episode_of(k: int, episode_id: str) -> tuple[RunSource, EpisodeRow]:
        s = source(k)
        found = None if len(episode_id) > _MAX_ID else s.store.episode(episode_id)
        if found is None or found.run_id != s.run_id:
            raise HTTPException(404, f"run {k} has no episode {episode_id[:_MAX_ID]!r}")
        return s, found

    @app.get("/", response_class=HTMLResponse)
    def index() -> str:
        return renderer.index(_LINKS)

    @app.get("/static/{name}")
    def static(name: str) -> Response:
        if name not in _ASSETS:
            raise HTTPException(404)
        return Response(asset(name), media_type=_ASSETS[name], headers={"Cache-Control": "max-age=3600"})

    @app.get("/runs/{k}", response_class=HTMLResponse)
    def run(k: int) -> str:
        source(k)
        return renderer.run(k, _LINKS)

    @app.get("/runs/{k}/episodes", response_class=HTMLResponse)
    def episodes(
        k: int,
        task: str = "",
        outcome: str = "",
        update: str = "",
        phone: str = "",
        verifier: str = "",
        termination: str = "",
        labelled: str = "",
        sort: str = "started_at",
        desc: str = "",
        page: str = "0",
    ) -> str:
        s = source(k)
        if update and not _NUMBER.fullmatch(update):
            raise HTTPException(400, f"update {update[:64]!r} is not an update number")
        if not _NUMBER.fullmatch(page):
            raise HTTPException(404, f"no page {page[:64]!r}: pages are numbered 0, 1, 2, ...")
        where = EpisodeFilter(
            task_id=_text("task", task, _MAX_NAME) or None,
            outcome=outcome or None,
            phone=_text("phone", phone, _MAX_NAME) or None,
            verifier_kind=_text("verifier", verifier, _MAX_NAME) or None,
            termination_reason=_text("termination", termination, _MAX_NAME) or None,
            episode_ids=s.episodes_of_update(int(update)) if update else None,
            labelled=None if not _choice("labelled", labelled, ("", "yes", "no")) else labelled == "yes",
        )
        query = {
            "task": task,
            "outcome": outcome,
            "update": update,
            "phone": phone,
            "verifier": verifier,
            "termination": termination,
            "labelled": labelled,
            "sort": sort if sort != "started_at" else "",
            "desc": _choice("desc", desc, ("", "1")),
        }
        try:
            return renderer.episodes(k, _LINKS, where, query=query, sort=sort, descending=bool(desc), page=int(page))
        except NoSuchPage as exc:
            raise HTTPException(404, str(exc)) from None
        except ValueError as exc:  # an unknown outcome or sort column, named with the fix
            raise HTTPException(400, str(exc)) from None

    @app.get("/runs/{k}/episodes/{episode_id}", response_class=HTMLResponse)
    def episode(k: int, episode_id: str) -> str:
        s, found = episode_of(k, episode_id)
        same_task = s.store.episode_page(s.run_id, EpisodeFilter(task_id=found.task_id), limit=200).rows
        others = sorted(
            (e for e in same_task if e.episode_id != episode_id),
            # finished ones first (an unfinished one has nothing to compare yet), then the other outcome:
            # a success beside a failure
            key=lambda e: (not e.finished, outcome(e) == outcome(found)),
        )
        return renderer.episode(k, episode_id, _LINKS, others=others[:50]) or ""

    @app.get("/runs/{k}/compare", response_class=HTMLResponse)
    def compare(k: int, a: str, b: str) -> str:
        source(k)
        pairs = [_episode_ref(k, a), _episode_ref(k, b)]
        for kk, episode_id in pairs:
            episode_of(kk, episode_id)
        page = renderer.compare(pairs, _LINKS)
        if page is None:
            raise HTTPException(404, "no such episode in that run")
        return page

    @app.post("/runs/{k}/episodes/{episode_id}/label")
    def label(
        k: int,
        episode_id: str,
        verdict: str = Form(...),
        note: str = Form(""),
        labeller: str = Form(""),
    ) -> RedirectResponse:
        s, found = episode_of(k, episode_id)
        if verdict not in ("success", "failure"):
            raise HTTPException(400, f"verdict {verdict[:64]!r} is neither success nor failure")
        if len(note) > _MAX_NOTE or len(labeller) > _MAX_LABELLER:
            raise HTTPException(400, f"a note is at most {_MAX_NOTE} characters and a name {_MAX_LABELLER}")
        if not found.finished:
            raise HTTPException(
                409,
                f"episode {episode_id} is unfinished: label it once it has ended (its last screen is not known yet)",
            )
        s.store.record_label(episode_id, success=verdict == "success", note=note, labeller=labeller)
        return RedirectResponse(f"/runs/{k}/episodes/{episode_id}", status_code=303)

    @app.get("/runs/{k}/labels.zip")
    def labels_zip(k: int) -> Response:
        s = source(k)
        with tempfile.TemporaryDirectory() as tmp:
            export_labels(s, Path(tmp))
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
                for path in sorted(Path(tmp).rglob("*")):
                    if path.is_file():
                        zf.write(path, path.relative_to(tmp).as_posix())
        return Response(
            buffer.getvalue(),
            media_type="application/zip",
            headers={"Content-Disposition": f'attachment; filename="labels-{s.run_id}.zip"'},
        )

    @app.get("/runs/{k}/shots/{rel_path:path}")
    def shot(k: int, rel_path: str) -> FileResponse:
        path = source(k).screenshot(rel_path)
        if path is None:
            raise HTTPException(404, "no such screenshot in this run")
        return FileResponse(path, media_type="image/png", headers={"Cache-Control": "max-age=86400, immutable"})

    return app


def _episode_ref(k: int, ref: str) -> tuple[int, str]:
    """``EPISODE`` (in run ``k``) or ``K:EPISODE`` (in run ``K``)."""
    run, sep, episode = ref.partition(":")
    if not sep:
        return k, ref
    if not _NUMBER.fullmatch(run):
        raise HTTPException(400, f"episode reference {ref[:64]!r} is not EPISODE or RUN:EPISODE")
    return int(run), episode
