"""darwin view under hostile requests: a DNS-rebinding page (a foreign Host with its own
Origin), a foreign or wrong-scheme Origin, out-of-range and malformed parameters on every
route, and HEAD. Nothing may answer 5xx, and a refused label is never written."""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import unquote

import httpx
import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from darwin.store import RunStore
from darwin.view.app import create_app, served_hosts
from darwin.view.server import ViewServer
from darwin.view.source import open_sources

BASE_URL = "http://127.0.0.1:8765"


@pytest.fixture
def server(built_run) -> Iterator[ViewServer]:
    """The viewer on a real socket (the port a request arrives on is the one it listens on)."""
    with ViewServer(create_app(open_sources([str(built_run.run_dir)])), host="127.0.0.1", port=0) as served:
        yield served


def labels_of(built_run) -> list[tuple[str, bool]]:
    with RunStore.for_run_dir(built_run.run_dir) as store:
        return [(lab.episode_id, lab.success) for lab in store.labels(run_id=built_run.run_id)]


def test_a_dns_rebinding_page_and_foreign_origins_are_refused(server: ViewServer, built_run) -> None:
    port = server.port
    label = {"verdict": "failure", "note": "written by another site"}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        refused = {
            # The rebinding pair: evil.example resolves to 127.0.0.1, and its page calls itself.
            "rebound GET": http.get("/runs/0", headers={"Host": f"evil.example:{port}"}),
            "rebound GET with its Origin": http.get(
                "/runs/0", headers={"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
            ),
            "rebound label": http.post(
                "/runs/0/episodes/ep001/label",
                data=label,
                headers={"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"},
            ),
            "wrong-scheme Origin, GET": http.get("/runs/0", headers={"Origin": f"https://127.0.0.1:{port}"}),
            "wrong-scheme Origin, label": http.post(
                "/runs/0/episodes/ep001/label", data=label, headers={"Origin": f"https://127.0.0.1:{port}"}
            ),
            "another port's Origin": http.post(
                "/runs/0/episodes/ep001/label", data=label, headers={"Origin": f"http://127.0.0.1:{port + 1}"}
            ),
            "another site's Origin": http.post(
                "/runs/0/episodes/ep001/label", data=label, headers={"Origin": "http://evil.example"}
            ),
            "an opaque Origin": http.post("/runs/0/episodes/ep001/label", data=label, headers={"Origin": "null"}),
            "another port in Host": http.get("/", headers={"Host": f"127.0.0.1:{port + 1}"}),
            "a user part in Host": http.get("/", headers={"Host": f"evil.example@127.0.0.1:{port}"}),
            "a bad port in Host": http.get("/", headers={"Host": "127.0.0.1:http"}),
            "rebound HEAD": http.head("/", headers={"Host": f"evil.example:{port}"}),
        }
        for what, response in refused.items():
            assert 400 <= response.status_code < 500, (what, response.status_code, response.text)
            assert "handmade" not in response.text, what  # no page of the run leaked
        assert refused["rebound GET"].status_code == 421 and "evil.example" in refused["rebound GET"].text
        assert refused["wrong-scheme Origin, label"].status_code == 403
        assert labels_of(built_run) == []

        # The names this machine's browser uses, and the viewer's own form, still work.
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", f"[::1]:{port}"):
            assert http.get("/runs/0", headers={"Host": host}).status_code == 200, host
        own = http.post(
            "/runs/0/episodes/ep001/label",
            data={"verdict": "success"},
            headers={"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"},
        )
        assert own.status_code == 303 and labels_of(built_run) == [("ep001", True)]
        mixed = http.post(  # an Origin naming a served host other than the one the request names
            "/runs/0/episodes/ep001/label",
            data={"verdict": "failure"},
            headers={"Host": f"localhost:{port}", "Origin": f"http://127.0.0.1:{port}"},
        )
        assert mixed.status_code == 403 and labels_of(built_run) == [("ep001", True)]


def test_an_exposed_viewer_answers_only_as_the_names_given(built_run) -> None:
    hosts = served_hosts("0.0.0.0", ["view.lab.example", "localhost:9000"])
    app = create_app(open_sources([str(built_run.run_dir)]), token="s3cret", hosts=hosts)
    with ViewServer(app, host="127.0.0.1", port=0) as served, httpx.Client(base_url=served.url, timeout=30) as http:
        port = served.port
        cookie = {"Cookie": "darwin_view_token=s3cret"}
        assert http.get("/", headers={"Host": f"view.lab.example:{port}", **cookie}).status_code == 200
        assert http.get("/", headers={"Host": "localhost:9000", **cookie}).status_code == 200  # the tunnel's port
        assert http.get("/", headers={"Host": "localhost:9001", **cookie}).status_code == 421
        assert http.get("/", headers={"Host": f"view.lab.example.evil.example:{port}", **cookie}).status_code == 421
        assert http.get("/", headers={"Host": f"0.0.0.0:{port}", **cookie}).status_code == 421
        # The Host check comes first: a rebinding page learns nothing, not even that a token is needed.
        assert http.get("/", headers={"Host": f"evil.example:{port}"}).status_code == 421


@pytest.mark.parametrize("page", ["99999999999999999999", "-1", "abc", "%00", "1.5", "%C2%B2", "1", "1000000"])
def test_a_page_out_of_range_is_a_404(built_run, page: str) -> None:
    client = TestClient(create_app(open_sources([str(built_run.run_dir)])), base_url=BASE_URL)
    response = client.get(f"/runs/0/episodes?page={page}")
    assert response.status_code == 404, response.text  # twelve episodes fill page 0 only
    assert client.get("/runs/0/episodes?page=0").status_code == 200


def test_head_answers_like_get_without_a_body(server: ViewServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        page = http.get("/runs/0/episodes/ep002").text
        shot = re.findall(r'<img src="/(runs/0/shots/[^"]+)"', page)[0]
        for path in ("", "runs/0", "runs/0/episodes", "runs/0/episodes/ep002", "static/view.css", shot, "runs/9"):
            got, head = http.get(path), http.head(path)
            assert head.status_code == got.status_code, path
            assert head.content == b"" and head.headers.get("content-type") == got.headers.get("content-type"), path
        assert http.head("runs/0/episodes/ep002/label").status_code == 405  # as a GET of the label route


# The values a hostile walk puts in each parameter, as they go on the wire (percent-encoded).
HOSTILE = (
    "99999999999999999999",
    "-1",
    "-0",
    "1e9",
    "0x10",
    "1.5",
    "nan",
    "abc",
    "",
    "%20",
    "%00",
    "%ff%fe",
    "%C2%B2",  # ² is a digit to str.isdigit, not to int()
    "%D9%A3",  # an Arabic-Indic three
    "%0d%0aSet-Cookie:%20x=1",
    "%3Cscript%3Ealert(1)%3C/script%3E",
    "'%20OR%201=1--",
    "..%2F..%2Frun.db",
    "%2e%2e",
    "0:%00",
    "99999999999999999999:ep000",
    "A" * 5000,
)
# A valid value for each required path, query and form parameter a route has (the others are
# left out unless attacked): a new route with one not named here fails the walk until it is added.
VALID = {
    "k": "0",
    "episode_id": "ep001",
    "name": "view.css",
    "a": "ep000",
    "b": "ep003",
    "verdict": "failure",
    "note": "ok",
    "labeller": "ana",
    "page": "0",
}


def test_no_route_answers_a_hostile_walk_with_a_server_error(built_run) -> None:
    app = create_app(open_sources([str(built_run.run_dir)]))
    client = TestClient(app, base_url=BASE_URL, raise_server_exceptions=False)
    shot = re.findall(r'<img src="/runs/0/shots/([^"]+)"', client.get("/runs/0/episodes/ep002").text)[0]
    valid = {**VALID, "rel_path": shot}
    routes = [r for r in app.routes if isinstance(r, APIRoute)]
    assert len(routes) >= 9
    failures = []
    requests = 0
    for route in routes:
        path_names = [p.name for p in route.dependant.path_params]
        query_names = [p.name for p in route.dependant.query_params]
        form_names = [p.name for p in route.dependant.body_params]
        params = [*route.dependant.path_params, *route.dependant.query_params, *route.dependant.body_params]
        missing = [p.name for p in params if p.field_info.is_required() and p.name not in valid]
        assert not missing, f"{route.path}: add a valid value for {missing} to VALID"
        route_methods = route.methods or set()
        methods = sorted(route_methods | ({"HEAD"} if "GET" in route_methods else set()))
        for target in [*path_names, *query_names, *form_names]:
            for value in HOSTILE:

                def fill(name: str, target: str = target, value: str = value) -> str:
                    return value if name == target else valid.get(name, "")

                path = route.path_format
                for name in path_names:
                    path = path.replace("{" + name + "}", fill(name))
                query = "&".join(f"{n}={fill(n)}" for n in query_names if fill(n) != "")
                url = path + (f"?{query}" if query else "")
                for method in methods:
                    form = {n: unquote(fill(n)) for n in form_names} if method == "POST" else None
                    response = client.request(method, url, data=form)
                    requests += 1
                    if response.status_code >= 500:
                        failures.append(f"{method} {url[:120]} {form and {k: v[:40] for k, v in form.items()}}")
    assert requests > 500
    assert failures == [], f"{len(failures)} server errors:\n" + "\n".join(failures[:20])
