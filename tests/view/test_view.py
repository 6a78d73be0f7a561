"""darwin view without a browser: the store's episode queries and labels, action markers, the
app's routes (filters, a 404 outside the run, the token, the label form), the exports, and
what `darwin judge calibrate` / `darwin verifier` read from them."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from darwin.actions import Direction, Drag, LongPress, PressBack, Scroll
from darwin.cli.main import main
from darwin.store import RunStore
from darwin.store_rows import EpisodeFilter
from darwin.types import Phase
from darwin.verifiers.judge.calibration import load_cases
from darwin.verifiers.learned.data import load_examples
from darwin.view.app import BindRefused, check_bind, create_app
from darwin.view.export import export_site
from darwin.view.markers import action_marker
from darwin.view.source import SourceError, open_sources

# --------------------------------------------------------------------------- store


def test_episode_page_filters_sorts_and_pages(built_run) -> None:
    with RunStore.for_run_dir(built_run.run_dir) as store:
        rid = built_run.run_id
        page = store.episode_page(rid, EpisodeFilter(task_id="clock_1"))
        assert [e.episode_id for e in page.rows] == ["ep000", "ep003", "ep006", "ep009"] and page.total == 4
        assert store.episode_page(rid, EpisodeFilter(outcome="success")).total == 3  # ep000, ep004, ep008
        assert store.episode_page(rid, EpisodeFilter(outcome="failure", phone="sim-0")).total == 3  # 2, 6, 10
        assert store.episode_page(rid, EpisodeFilter(verifier_kind="rule")).total == 12
        assert store.episode_page(rid, EpisodeFilter(verifier_kind="llm_judge")).total == 0
        assert store.episode_page(rid, EpisodeFilter(termination_reason="success")).total == 3
        assert store.episode_page(rid, EpisodeFilter(episode_ids=frozenset({"ep001", "ep002"}))).total == 2
        second = store.episode_page(rid, offset=5, limit=5)
        assert [e.episode_id for e in second.rows] == [f"ep{i:03d}" for i in range(5, 10)] and second.total == 12
        by_task = store.episode_page(rid, sort="task_id", descending=True, limit=4)
        assert [e.task_id for e in by_task.rows] == ["settings_3"] * 4
        with pytest.raises(ValueError, match="sort by one of"):
            store.episode_page(rid, sort="id; DROP TABLE")
        with pytest.raises(ValueError, match="unknown outcome"):
            store.episode_page(rid, EpisodeFilter(outcome="won"))
        facets = store.episode_facets(rid)
        assert facets.task_ids == sorted(built_run.tasks) and facets.phones == ["sim-0", "sim-1"]
        assert facets.verifier_kinds == ["rule"] and facets.termination_reasons == ["agent_finished", "success"]


def test_a_label_is_stored_replaced_and_filtered_on(built_run) -> None:
    with RunStore.for_run_dir(built_run.run_dir) as store:
        store.record_label("ep001", success=True, note="first look")
        store.record_label("ep001", success=False, note="the alarm is at 7 pm", labeller="ana")
        (label,) = store.labels(run_id=built_run.run_id)
        assert (label.episode_id, label.phase, label.success, label.note, label.labeller) == (
            "ep001",
            Phase.EXECUTION,
            False,
            "the alarm is at 7 pm",
            "ana",
        )
        assert store.episode_page(built_run.run_id, EpisodeFilter(labelled=True)).total == 1
        assert store.episode_page(built_run.run_id, EpisodeFilter(labelled=False)).total == 11
        with pytest.raises(Exception, match="no episode of that id"):
            store.record_label("nope", success=True)


# --------------------------------------------------------------------------- markers


def test_markers_are_placed_in_phone_pixels() -> None:
    press = action_marker(LongPress(x=10, y=20), (1080, 2400))
    assert (press.shape, press.x, press.y) == ("press", 10.0, 20.0)
    drag = action_marker(Drag(x1=1, y1=2, x2=3, y2=4), (1080, 2400))
    assert (drag.shape, drag.x, drag.y, drag.x2, drag.y2) == ("arrow", 1.0, 2.0, 3.0, 4.0)
    left = action_marker(Scroll(x=500, y=100, direction=Direction.LEFT), (1000, 2000))
    assert (left.x2, left.y2) == (350.0, 100.0)  # 15% of the width to the left
    assert action_marker(PressBack(), (1080, 2400)).label == "press_back"
    assert action_marker(None, (1080, 2400), "no action found").label == "parse error: no action found"


# --------------------------------------------------------------------------- app


BASE_URL = "http://127.0.0.1:8765"
"""Where the test client sends its requests: an address the viewer answers as (its Host header)."""


@pytest.fixture
def client(built_run) -> TestClient:
    return TestClient(create_app(open_sources([str(built_run.run_dir)])), base_url=BASE_URL)


def test_pages_render_with_filters_and_without_secrets(client: TestClient, built_run) -> None:
    index = client.get("/")
    assert index.status_code == 200 and "handmade" in index.text
    run = client.get("/runs/0")
    assert run.status_code == 200 and "success per task" in run.text and "explained variance" in run.text
    assert built_run.secret not in run.text and '"model": "m"' in run.text  # experiment.json, redacted
    listing = client.get("/runs/0/episodes", params={"task": "settings_3", "outcome": "failure"})
    rows = re.findall(r'<tr class="(\w+)" data-episode="(ep\d+)"', listing.text)
    assert rows == [("failure", "ep001"), ("failure", "ep007"), ("failure", "ep010")]  # ep004 succeeded
    update_two = client.get("/runs/0/episodes", params={"update": "2"})
    assert re.findall(r'data-episode="(ep\d+)"', update_two.text) == ["ep004", "ep005", "ep006", "ep007"]
    assert client.get("/runs/0/episodes", params={"sort": "bogus"}).status_code == 400
    assert client.get("/runs/0/episodes", params={"update": "x"}).status_code == 400
    assert client.get("/runs/7").status_code == 404


def test_an_episode_page_shows_every_step_with_its_marker_and_the_verdict(client: TestClient) -> None:
    page = client.get("/runs/0/episodes/ep002")
    assert page.status_code == 200
    shapes = re.findall(r'<figure class="step" [^>]*data-shape="(\w+)"', page.text)
    assert shapes == ["point", "arrow", "banner", "banner"]
    assert 'aria-label="click (540, 1200)"' in page.text and "scroll down" in page.text
    assert "the rule says so" in page.text
    assert "<tr><th>trained in update</th><td>1</td></tr>" in page.text and ", seed 2</td>" in page.text
    assert "<pre>step 0</pre>" in page.text  # the thought, split from the raw response
    shots = re.findall(r'<img src="(/runs/0/shots/[0-9a-f]{2}/[0-9a-f]{64}\.png)"', page.text)
    assert len(shots) == 5  # four steps and the final screen
    image = client.get(shots[0])
    assert image.status_code == 200 and image.content.startswith(b"\x89PNG")
    assert client.get("/runs/0/episodes/ep999").status_code == 404
    compare = client.get("/runs/0/compare", params={"a": "ep000", "b": "0:ep003"})
    assert compare.status_code == 200 and 'id="episode-a"' in compare.text and 'id="episode-b"' in compare.text


@pytest.mark.parametrize(
    "path",
    [
        "/runs/0/shots/../run.db",
        "/runs/0/shots/..%2Frun.db",
        "/runs/0/shots/%2e%2e/%2e%2e/etc/passwd",
        "/runs/0/shots/run.db",
        "/runs/0/shots/ab/" + "a" * 64 + ".png",  # well formed, not in the store
        "/runs/0/shots//etc/passwd",
        "/etc/passwd",
        "/static/../run.db",
    ],
)
def test_a_path_outside_the_run_is_a_404(client: TestClient, path: str) -> None:
    assert client.get(path).status_code == 404


def test_a_label_from_the_form_reaches_the_database(client: TestClient, built_run) -> None:
    sent = client.post(
        "/runs/0/episodes/ep005/label", data={"verdict": "success", "note": "ok"}, follow_redirects=False
    )
    assert sent.status_code == 303 and sent.headers["location"] == "/runs/0/episodes/ep005"
    assert "<b>success</b> · ok" in client.get("/runs/0/episodes/ep005").text
    foreign = client.post(
        "/runs/0/episodes/ep005/label", data={"verdict": "failure"}, headers={"Origin": "http://evil.example"}
    )
    assert foreign.status_code == 403
    assert client.post("/runs/0/episodes/ep005/label", data={"verdict": "maybe"}).status_code == 400
    with RunStore.for_run_dir(built_run.run_dir) as store:
        assert [(lab.episode_id, lab.success) for lab in store.labels(run_id=built_run.run_id)] == [("ep005", True)]


def test_a_token_guards_every_request_and_leaves_the_address_bar(built_run) -> None:
    client = TestClient(create_app(open_sources([str(built_run.run_dir)]), token="s3cret"), base_url=BASE_URL)
    assert client.get("/runs/0").status_code == 401
    assert client.get("/runs/0/shots/whatever").status_code == 401
    assert client.get("/?token=wrong").status_code == 401
    first = client.get("/runs/0/episodes?task=clock_1&token=s3cret&outcome=success", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/runs/0/episodes?task=clock_1&outcome=success"
    assert "darwin_view_token=s3cret" in first.headers["set-cookie"] and "HttpOnly" in first.headers["set-cookie"]
    assert client.get(first.headers["location"]).status_code == 200  # the cookie the first visit set
    assert client.get("/?token=s3cret").history[0].headers["location"] == "/"


def test_a_bind_beyond_this_machine_needs_expose_and_a_token(built_run) -> None:
    check_bind("127.0.0.1", token=None, expose=False)
    check_bind("::1", token=None, expose=False)
    check_bind("localhost", token=None, expose=False)
    with pytest.raises(BindRefused, match="without --expose"):
        check_bind("0.0.0.0", token="t", expose=False)
    with pytest.raises(BindRefused, match="without a token"):
        check_bind("192.168.1.5", token=None, expose=True)
    with pytest.raises(BindRefused, match="--allow-host NAME"):
        check_bind("0.0.0.0", token="t", expose=True)  # every request would name a host it refuses
    check_bind("0.0.0.0", token="t", expose=True, allow_hosts=["view.lab.example"])
    check_bind("192.168.1.5", token="t", expose=True)
    check_bind("127.0.0.1", token=None, expose=False, allow_hosts=["localhost:9000"])  # an SSH tunnel's port
    with pytest.raises(BindRefused, match="without --expose"):
        check_bind("127.0.0.1", token=None, expose=False, allow_hosts=["evil.example"])
    with pytest.raises(BindRefused, match="is not a host name"):
        check_bind("127.0.0.1", token=None, expose=False, allow_hosts=["user@localhost"])
    result = CliRunner().invoke(main, ["view", str(built_run.run_dir), "--host", "0.0.0.0"])
    assert result.exit_code != 0 and "refusing to serve runs on 0.0.0.0" in result.output


def test_a_source_that_is_no_run_is_named_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="does not exist. Fix: pass"):
        open_sources([str(tmp_path / "missing")])
    with pytest.raises(SourceError, match="directory without run.db"):
        open_sources([str(tmp_path)])
    result = CliRunner().invoke(main, ["view", str(tmp_path / "missing")])
    assert result.exit_code != 0 and "does not exist" in result.output


# --------------------------------------------------------------------------- exports


def test_exported_labels_are_what_the_judge_and_the_verifier_read(built_run, tmp_path: Path) -> None:
    with RunStore.for_run_dir(built_run.run_dir) as store:
        store.record_label("ep002", success=True, note="done after all")
        store.record_label("ep004", success=False)
    out = tmp_path / "labelled"
    result = CliRunner().invoke(main, ["view", str(built_run.run_dir), "--export-labels", str(out)])
    assert result.exit_code == 0, result.output
    assert "2 labelled trajectories" in result.output and "2 verifier examples" in result.output
    rows = list(csv.DictReader((out / "labels.csv").open(encoding="utf-8")))
    assert [(r["episode_id"], r["label"], r["note"]) for r in rows] == [
        ("ep002", "yes", "done after all"),
        ("ep004", "no", ""),
    ]
    trajectory = out / "trajectories" / "ep002"
    assert sorted(p.name for p in trajectory.iterdir()) == [
        "actions.jsonl",
        "final.png",
        "step_000.png",
        "step_001.png",
        "step_002.png",
        "step_003.png",
    ]
    cases = load_cases(out)
    assert [(c.episode_id, c.label, c.label_kind) for c in cases] == [
        ("ep002", True, "human"),
        ("ep004", False, "human"),
    ]
    judged = cases[0].load()
    assert len(judged.steps) == 4 and judged.final_screenshot is not None
    examples = load_examples(out)
    assert sorted((e.episode_id, e.label, e.source) for e in examples) == [
        ("ep002", True, "run:human"),
        ("ep004", False, "run:human"),
    ]
    from_run = load_cases(built_run.run_dir, labels="human")  # the run itself, labelled by people
    assert [(c.episode_id, c.label) for c in from_run] == [("ep002", True), ("ep004", False)]


def test_the_static_site_links_only_to_files_it_wrote(built_run, tmp_path: Path) -> None:
    sources = open_sources([str(built_run.run_dir)])
    site = tmp_path / "site"
    pages = export_site(sources, site)
    assert pages == 1 + 1 + 1 + 12  # index, run, one page of episodes, each episode
    for html in site.rglob("*.html"):
        text = html.read_text(encoding="utf-8")
        assert built_run.secret not in text
        for link in re.findall(r'(?:href|src)="([^"#]+)"', text):
            if link.startswith("data:"):
                continue
            assert not link.startswith("/"), f"{html}: absolute link {link}"
            assert (html.parent / link).resolve().is_file(), f"{html}: {link} was not written"
    assert not (site / "runs/0/episodes/ep000.html").read_text().count("label-form")


def test_the_benchmark_times_every_page_over_a_database_it_builds(tmp_path: Path) -> None:
    from darwin.bench.view import bench_view

    result = bench_view(tmp_path / "run", episodes=5010, steps=1, long_steps=30, repeats=1)  # page 100 exists
    assert result.steps == 5009 + 30
    assert [name for name, _, _ in result.rows()] == [
        "episode table, first page",
        "episode table, filtered and sorted",
        "episode table, page 100",
        "an episode of 30 steps",
        "run page",
    ]
    with RunStore.for_run_dir(tmp_path / "run") as store:
        (run,) = store.runs()
        assert store.episode_page(run.run_id).total == 5010
        assert len(store.steps("e0000000")) == 30


def test_the_learners_step_scores_are_stored_and_shown_by_update(built_run, client: TestClient) -> None:
    from darwin.types import StepScore

    with RunStore.for_run_dir(built_run.run_dir) as store:
        store.record_step_scores(
            [
                StepScore("ep003", Phase.EXECUTION, 0, 1, 0.25, -0.5, -1.5),
                StepScore("ep003", Phase.EXECUTION, 0, 2, None, 0.125, -1.25),  # replayed, no critic
                StepScore("elsewhere", Phase.EXECUTION, 0, 1, 0.0, 0.0, 0.0),  # another run's: left out
            ]
        )
        assert [(s.update, s.value) for s in store.step_scores("ep003")] == [(1, 0.25), (2, None)]
        assert store.step_scores("elsewhere") == []
    page = client.get("/runs/0/episodes/ep003").text
    assert "update 1: value 0.250 · advantage -0.500 · log-prob -1.50" in page
    assert "update 2: advantage +0.125 · log-prob -1.25" in page


# --------------------------------------------------------------------------- what the pages say


def test_an_unfinished_episode_says_so_and_takes_no_label(client: TestClient, built_run, unfinished) -> None:
    unfinished = unfinished()
    page = client.get(f"/runs/0/episodes/{unfinished}").text
    assert '<span class="unfinished">unfinished</span>: 2 steps stored so far' in page
    assert "None" not in re.sub(r"<pre>.*?</pre>", "", page, flags=re.DOTALL)  # no "steps None" anywhere
    assert 'id="label-form"' not in page and "cannot be labelled" in page
    refused = client.post(f"/runs/0/episodes/{unfinished}/label", data={"verdict": "success"})
    assert refused.status_code == 409 and "unfinished" in refused.text
    with RunStore.for_run_dir(built_run.run_dir) as store:
        assert store.labels(episode_id=unfinished) == []
    compare = client.get("/runs/0/compare", params={"a": unfinished, "b": "ep000"}).text
    assert 'id="label-form"' not in compare
    assert 'id="label-form"' in client.get("/runs/0/episodes/ep003").text  # a finished one takes a label


def test_the_compare_list_offers_finished_episodes_of_the_task_first(client: TestClient, unfinished) -> None:
    unfinished("ep100")
    unfinished("ep101")
    page = client.get("/runs/0/episodes/ep003").text  # clock_1, a failure
    options = re.findall(r'<option value="(ep\d+)"( selected)?>([^<]*)</option>', page)
    assert [o[0] for o in options] == ["ep000", "ep006", "ep009", "ep100", "ep101"]
    assert options[0][1] == " selected" and options[0][2].startswith("success ·")  # the other outcome first
    assert options[0][2].endswith("· 4 steps") and options[-1][2].startswith("unfinished ·")
    assert "None" not in "".join(o[2] for o in options)


def test_export_labels_says_what_it_left_out_and_why(built_run, unfinished, tmp_path: Path) -> None:
    with RunStore.for_run_dir(built_run.run_dir) as store:
        store.record_label("ep002", success=True)
        store.record_label("ep004", success=False)
        store.record_label(unfinished(), success=True)  # as a viewer before issue 73 let one label it
    out = tmp_path / "labelled"
    first = CliRunner().invoke(main, ["view", str(built_run.run_dir), "--export-labels", str(out)])
    assert first.exit_code == 0, first.output
    text = " ".join(first.output.split())
    assert "2 labelled trajectories" in text and "2 verifier examples" in text
    assert "left out of labels.csv: 1 unfinished" in text
    assert [r["episode_id"] for r in csv.DictReader((out / "labels.csv").open(encoding="utf-8"))] == ["ep002", "ep004"]
    again = CliRunner().invoke(main, ["view", str(built_run.run_dir), "--export-labels", str(out)])
    text = " ".join(again.output.split())
    assert "0 verifier examples" in text and "left out of examples.jsonl: 2 duplicates (the same final screen" in text
    assert len(load_examples(out)) == 2


def test_calibrate_names_the_labels_it_used(built_run, openai_server, tmp_path: Path) -> None:
    openai_server.reply = lambda body: '{"reason": "looks done", "answer": "yes"}'
    with RunStore.for_run_dir(built_run.run_dir) as store:
        store.record_label("ep002", success=True)
        store.record_label("ep004", success=False)
    flags = ["--config", "final_state", "--model", "openai/fake-llm", "--api-base", openai_server.api_base]
    flags += ["--api-key-env", "DARWIN_FAKE_LLM_KEY", "--attempts", "1", "--resamples", "50"]
    for labels, expected in (("human", "human labels (2 episodes)"), ("rule", "rule verdicts (12 episodes)")):
        out = tmp_path / f"{labels}.json"
        args = ["judge", "calibrate", str(built_run.run_dir), "--labels", labels, "--out", str(out), *flags]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        assert f"labels: {expected}" in result.output
        assert json.loads(out.read_text())["labels"] == expected


# --------------------------------------------------------------------------- charts


def test_charts_split_costs_by_unit_and_keep_shares_on_zero_to_one(built_run) -> None:
    from darwin.view.pages import COST_TITLES, CURVES, PER_TASK_TITLE, curves

    charts = {c.title: c for c in curves(open_sources([str(built_run.run_dir)])[0].metrics())}
    assert list(charts) == [title for title, *_ in CURVES] + [PER_TASK_TITLE, *COST_TITLES]
    seconds, shares, counts = (charts[t] for t in COST_TITLES)
    assert {t.name for t in seconds.traces} == {
        "rollout_s (rollout)",
        "phone_s (rollout)",
        "learner_s (rollout)",
        "phone_s_per_success (rollout)",
    }
    assert {t.name for t in shares.traces} == {"infra_share (rollout)", "backpressure_share (rollout)"}
    assert {t.name for t in counts.traces} == {"phones (rollout)", "episodes (rollout)", "successes (rollout)"}
    for title in ("success", PER_TASK_TITLE, COST_TITLES[1]):
        assert charts[title].figure()["layout"]["yaxis"]["range"] == [0.0, 1.0], title
    for chart in charts.values():
        xaxis = chart.figure()["layout"]["xaxis"]
        assert xaxis["tickmode"] == "linear" and isinstance(xaxis["dtick"], int) and xaxis["dtick"] >= 1
    assert counts.figure()["layout"]["yaxis"]["dtick"] == 5  # 0..12 episodes: whole numbers


def test_the_docs_name_every_chart_and_the_page_names_those_it_cannot_draw(built_run, client: TestClient) -> None:
    from darwin.view.pages import COST_TITLES, CURVES, PER_TASK_TITLE

    docs = " ".join((Path(__file__).resolve().parents[2] / "docs" / "view.md").read_text(encoding="utf-8").split())
    for title in [t for t, *_ in CURVES] + [PER_TASK_TITLE, *COST_TITLES]:
        assert f"**{title}**" in docs, f"docs/view.md does not name the chart {title!r}"
    assert "schema version 7" in docs and "schema version 6" not in docs
    metrics = built_run.run_dir / "metrics.jsonl"
    metrics.write_text(
        "".join(line for line in metrics.read_text().splitlines(keepends=True) if '"group": "update"' not in line)
    )
    page = client.get("/runs/0").text
    undrawn = re.search(r'<p class="meta" id="undrawn">(.*?)</p>', page, re.DOTALL)
    assert undrawn is not None and "explained variance" in undrawn.group(1) and "value loss" in undrawn.group(1)
    assert 'data-title="explained variance"' not in page and 'data-title="success"' in page
