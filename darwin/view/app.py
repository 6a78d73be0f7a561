"""The ``darwin view`` web app (FastAPI): the pages of :mod:`darwin.view.pages` over one or more
runs, the screenshots from each run's content-addressed store, and the one write it allows:
a person's label of an episode.

Safe by default: :func:`check_bind` refuses an address other than the loopback unless the
app has a token, and with a token every request must carry it (``?token=...`` once, then a
cookie). A label is accepted only from the app's own pages (the ``Origin`` of the request
must be the app's own). Screenshots are served only by their content-addressed path below
the run's screenshot directory; any other path is a 404.

    >>> app = create_app([])
    >>> sorted(r.path for r in app.routes if r.path.startswith("/runs/{k}"))[:3]
    ['/runs/{k}', '/runs/{k}/compare', '/runs/{k}/episodes']
"""

from __future__ import annotations

import hmac
import io
import ipaddress
import tempfile
import zipfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from fastapi import FastAPI, Form, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from darwin.store_rows import EpisodeFilter
from darwin.view.export import export_labels
from darwin.view.pages import Links, Renderer, asset, outcome
from darwin.view.source import RunSource

__all__ = ["TOKEN_COOKIE", "BindRefused", "check_bind", "create_app"]

TOKEN_COOKIE = "darwin_view_token"
_LINKS = Links()
_ASSETS = {"view.css": "text/css", "plotly.min.js": "text/javascript"}


class BindRefused(ValueError):
    """An address the viewer will not serve on as asked; the message says why and the fix."""


def check_bind(host: str, *, token: str | None, expose: bool) -> None:
    """Refuse to serve run data beyond this machine by accident: a non-loopback ``host`` needs
    ``expose`` and a ``token``."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if loopback:
        return
    if not expose or not token:
        raise BindRefused(
            f"refusing to serve runs on {host}, which other machines can reach, "
            + ("without a token" if expose else "without --expose")
            + ". Fix: keep the default 127.0.0.1 (and use an SSH tunnel), or pass --expose and --token SECRET "
            "(or DARWIN_VIEW_TOKEN); open the page once as http://HOST:PORT/?token=SECRET"
        )


def create_app(sources: Sequence[RunSource], *, token: str | None = None) -> FastAPI:
    """The web app over ``sources`` (:func:`darwin.view.source.open_sources`)."""
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
            response = await call_next(request)
            if "token" in request.query_params:
                response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
            return response

    def source(k: int) -> RunSource:
        if not 0 <= k < len(sources):
            raise HTTPException(404, f"no run {k}")
        return sources[k]

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
        page: int = 0,
    ) -> str:
        s = source(k)
        if update and not update.isdigit():
            raise HTTPException(400, f"update {update!r} is not a number")
        where = EpisodeFilter(
            task_id=task or None,
            outcome=outcome or None,
            phone=phone or None,
            verifier_kind=verifier or None,
            termination_reason=termination or None,
            episode_ids=s.episodes_of_update(int(update)) if update else None,
            labelled=None if not labelled else labelled == "yes",
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
            "desc": desc,
        }
        try:
            return renderer.episodes(k, _LINKS, where, query=query, sort=sort, descending=bool(desc), page=max(page, 0))
        except ValueError as exc:  # an unknown outcome or sort column, named with the fix
            raise HTTPException(400, str(exc)) from None

    @app.get("/runs/{k}/episodes/{episode_id}", response_class=HTMLResponse)
    def episode(k: int, episode_id: str) -> str:
        s = source(k)
        found = s.store.episode(episode_id)
        if found is None or found.run_id != s.run_id:
            raise HTTPException(404, f"run {k} has no episode {episode_id!r}")
        same_task = s.store.episode_page(s.run_id, EpisodeFilter(task_id=found.task_id), limit=200).rows
        others = sorted(
            (e for e in same_task if e.episode_id != episode_id),
            key=lambda e: outcome(e) == outcome(found),  # the other outcome first: a success beside a failure
        )
        return renderer.episode(k, episode_id, _LINKS, others=others[:50]) or ""

    @app.get("/runs/{k}/compare", response_class=HTMLResponse)
    def compare(k: int, a: str, b: str) -> str:
        source(k)
        pairs = [_episode_ref(k, a), _episode_ref(k, b)]
        for kk, _ in pairs:
            source(kk)
        page = renderer.compare(pairs, _LINKS)
        if page is None:
            raise HTTPException(404, "no such episode in that run")
        return page

    @app.post("/runs/{k}/episodes/{episode_id}/label")
    def label(
        request: Request,
        k: int,
        episode_id: str,
        verdict: str = Form(...),
        note: str = Form(""),
        labeller: str = Form(""),
    ) -> RedirectResponse:
        s = source(k)
        origin = request.headers.get("origin")
        if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
            raise HTTPException(403, "a label must come from this viewer's own page")
        if verdict not in ("success", "failure"):
            raise HTTPException(400, f"verdict {verdict!r} is neither success nor failure")
        found = s.store.episode(episode_id)
        if found is None or found.run_id != s.run_id:
            raise HTTPException(404, f"run {k} has no episode {episode_id!r}")
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
    if not run.isdigit():
        raise HTTPException(400, f"episode reference {ref!r} is not EPISODE or RUN:EPISODE")
    return int(run), episode
