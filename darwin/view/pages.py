"""The viewer's pages as data, then HTML: each ``*_page`` function reads a :class:`RunSource`
and renders one Jinja2 template. The web app (:mod:`darwin.view.app`) and the static export
(:mod:`darwin.view.export`) render the same pages; they differ only in their :class:`Links`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, select_autoescape

from darwin.actions import parse_action
from darwin.algos.evaluation import wilson_interval
from darwin.store_rows import EpisodeFilter, EpisodeRow, StoredStep
from darwin.types import Phase, StepScore
from darwin.view.markers import ActionMarker, action_marker
from darwin.view.source import MetricPoint, RunSource

__all__ = ["CURVES", "PAGE_SIZE", "Chart", "Links", "NoSuchPage", "Renderer", "Trace", "asset", "curves", "step_views"]

PAGE_SIZE = 50
"""Episodes per page of the episode table."""

DEFAULT_DEVICE_SIZE = (1080, 2400)
"""The phone size assumed for episodes stored without one (SimPhone's)."""

SHARE_RANGE = (0.0, 1.0)
"""The y range of a chart of shares (success rates, cost shares): the whole of 0..1, so two runs' charts compare."""

# (chart title, y axis title, [(metrics.jsonl group, key), ...], y range): the training curves of
# a run page, before the success per task and the three cost charts.
CURVES: tuple[tuple[str, str, tuple[tuple[str, str], ...], tuple[float, float] | None], ...] = (
    ("success", "share of episodes", (("rollout", "success"), ("eval", "success")), SHARE_RANGE),
    ("episode return", "mean return", (("update", "episode_return_mean"),), None),
    ("KL", "KL divergence", (("update", "approx_kl"), ("update", "kl_to_reference")), None),
    ("entropy", "nats per token", (("update", "entropy"),), None),
    ("explained variance", "explained variance", (("update", "explained_variance"),), None),
    ("clip fraction", "share of tokens", (("update", "clip_fraction"), ("update", "value_clip_fraction")), None),
    ("value loss", "value loss", (("update", "value_loss"),), None),
)
PER_TASK_TITLE = "success per task (training episodes)"
COST_TITLES = ("cost: time (seconds)", "cost: shares of phone time", "cost: counts")
"""The cost charts, one per unit: ``cost/*_s`` and ``cost/*_s_per_*`` keys, ``cost/*_share`` keys, the rest."""
_THOUGHT = re.compile(r"Thought:\s*(.*?)\s*(?:Action:|$)", re.DOTALL)


def plotly_js() -> bytes:
    """Plotly's browser bundle, as the ``plotly`` package ships it (no CDN)."""
    return resources.files("plotly").joinpath("package_data", "plotly.min.js").read_bytes()


def asset(name: str) -> bytes:
    """A file the pages load: ``view.css``, or ``plotly.min.js`` from the ``plotly`` package."""
    if name == "plotly.min.js":
        return plotly_js()
    return resources.files("darwin.view").joinpath("static", name).read_bytes()


class NoSuchPage(LookupError):
    """A page of the episode table past its last one; the message names the pages there are."""


@dataclass(frozen=True)
class Links:
    """Where each page is: the web app's routes (``static=False``) or the static export's files,
    relative to a page ``depth`` folders below the export's root."""

    static: bool = False
    depth: int = 0

    def _root(self) -> str:
        return "../" * self.depth if self.static else "/"

    def index(self) -> str:
        return self._root() + ("index.html" if self.static else "")

    def run(self, k: int) -> str:
        return self._root() + (f"runs/{k}/index.html" if self.static else f"runs/{k}")

    def episodes(self, k: int, page: int = 0, **query: str) -> str:
        if self.static:
            return self._root() + f"runs/{k}/episodes/page-{page}.html"
        params = urlencode([(key, value) for key, value in {**query, "page": str(page)}.items() if value != ""])
        return self._root() + f"runs/{k}/episodes?{params}"

    def episode(self, k: int, episode_id: str) -> str:
        return self._root() + f"runs/{k}/episodes/{episode_id}" + (".html" if self.static else "")

    def shot(self, k: int, rel_path: str) -> str:
        return self._root() + f"runs/{k}/shots/{rel_path}"

    def asset(self, name: str) -> str:
        return self._root() + f"static/{name}"

    def label(self, k: int, episode_id: str) -> str:
        return self._root() + f"runs/{k}/episodes/{episode_id}/label"


@dataclass(frozen=True)
class StepView:
    """One step as the episode page shows it, with the learner's numbers for it by update."""

    step: StoredStep
    marker: ActionMarker
    thought: str | None
    device_size: tuple[int, int]
    scores: tuple[StepScore, ...] = ()


def step_views(
    steps: Sequence[StoredStep], device_size: tuple[int, int] | None, scores: Sequence[StepScore] = ()
) -> list[StepView]:
    """Each step with the marker of its action (a parse error is a banner), the model's
    thought when its response has a ``Thought:`` part (UI-TARS's format) and its scores."""
    size = device_size or DEFAULT_DEVICE_SIZE
    by_step: dict[tuple[Phase, int], list[StepScore]] = {}
    for score in scores:
        by_step.setdefault((score.phase, score.step), []).append(score)
    out = []
    for s in steps:
        action = None if s.action_json is None else parse_action(s.action_json)
        reason = None if s.parse_error is None else s.parse_error.reason
        match = None if s.response_text is None else _THOUGHT.search(s.response_text)
        thought = match.group(1) if match else None
        out.append(
            StepView(s, action_marker(action, size, reason), thought, size, tuple(by_step.get((s.phase, s.step), ())))
        )
    return out


@dataclass(frozen=True)
class Trace:
    """One line of a chart: a ``metrics.jsonl`` key's values by update."""

    name: str
    x: tuple[int, ...]
    y: tuple[float, ...]


@dataclass(frozen=True)
class Chart:
    """One chart of the run page: its title (drawn by the page, above Plotly's toolbar), the
    unit of its y axis, its lines and, for shares, the fixed y range."""

    title: str
    y_title: str
    traces: tuple[Trace, ...]
    y_range: tuple[float, float] | None = None
    y_counts: bool = False
    """Whole numbers (episodes, phones): integer ticks on the y axis too."""

    def figure(self) -> dict[str, Any]:
        """The Plotly figure (``data`` and ``layout``): updates on integer ticks, the legend
        below the x axis's title, a share's axis on 0..1 with its markers not cut at the edges."""
        xs = [x for t in self.traces for x in t.x]
        yaxis: dict[str, Any] = {
            "title": {"text": self.y_title},
            "automargin": True,
            "zeroline": False,
            "exponentformat": "e",  # 1e-4, not 100μ
        }
        if self.y_range is not None:
            yaxis["range"] = list(self.y_range)
        if self.y_counts:
            ys = [y for t in self.traces for y in t.y]
            span = math.ceil(max(ys)) - math.floor(min(ys))
            yaxis |= {"tickmode": "linear", "tick0": 0, "dtick": integer_step(span, most=5), "tickformat": "d"}
        return {
            "data": [
                {
                    "name": t.name,
                    "x": list(t.x),
                    "y": list(t.y),
                    "type": "scatter",
                    "mode": "lines+markers",
                    "cliponaxis": self.y_range is None,
                }
                for t in self.traces
            ],
            "layout": {
                "height": 320,
                "margin": {"l": 10, "r": 10, "t": 30, "b": 10},
                "xaxis": {
                    "title": {"text": "update"},
                    "tickmode": "linear",
                    "tick0": 0,
                    "dtick": integer_step(max(xs) - min(xs)),
                    "tickformat": "d",
                    "automargin": True,
                },
                "yaxis": yaxis,
                "showlegend": True,
                "legend": {
                    "orientation": "h",
                    "x": 0,
                    "xanchor": "left",
                    "y": 0,
                    "yanchor": "bottom",
                    "yref": "container",
                },
            },
        }


def integer_step(span: int, most: int = 8) -> int:
    """The step between ticks on an axis of whole numbers ``span`` long (updates, counts): 1, 2 or 5 times a
    power of ten, giving at most ``most`` steps.

    >>> [integer_step(s) for s in (0, 3, 8, 9, 30, 1000)]
    [1, 1, 1, 2, 5, 200]
    """
    for power in range(0, 19):
        for mantissa in (1, 2, 5):
            step = mantissa * 10**power
            if span <= step * most:
                return step
    return 10**19


def curves(points: Sequence[MetricPoint]) -> list[Chart]:
    """The run page's charts: :data:`CURVES`, the success per task and the cost in each of its
    units (only those the run's ``metrics.jsonl`` has values for)."""
    series: dict[tuple[str, str], tuple[list[int], list[float]]] = {}
    for p in points:
        for key, value in p.values.items():
            if not math.isfinite(value):  # Plotly draws no NaN; a gap says the same
                continue
            xs, ys = series.setdefault((p.group, key), ([], []))
            xs.append(p.step)
            ys.append(value)

    def chart(
        title: str,
        y_title: str,
        keys: Sequence[tuple[str, str]],
        y_range: tuple[float, float] | None = None,
        y_counts: bool = False,
    ) -> Chart | None:
        traces = tuple(
            Trace(f"{key.removeprefix('cost/')} ({group})", tuple(series[group, key][0]), tuple(series[group, key][1]))
            for group, key in keys
            if (group, key) in series
        )
        return Chart(title, y_title, traces, y_range, y_counts) if traces else None

    per_task = sorted(k for k in series if k[0] == "rollout" and k[1].startswith("success_by_task/"))
    cost = sorted(k for k in series if k[1].startswith("cost/"))
    seconds = [k for k in cost if k[1].endswith("_s") or "_s_per_" in k[1]]
    shares = [k for k in cost if k[1].endswith("_share")]
    counts = [k for k in cost if k not in seconds and k not in shares]
    charts = [chart(title, y_title, keys, y_range) for title, y_title, keys, y_range in CURVES]
    charts.append(chart(PER_TASK_TITLE, "share of episodes", per_task, SHARE_RANGE))
    charts.append(chart(COST_TITLES[0], "seconds", seconds))
    charts.append(chart(COST_TITLES[1], "share", shares, SHARE_RANGE))
    charts.append(chart(COST_TITLES[2], "count", counts, y_counts=True))
    return [c for c in charts if c is not None]


def outcome(e: EpisodeRow) -> Literal["success", "failure", "unverified", "unfinished"]:
    if not e.finished:
        return "unfinished"
    return "unverified" if e.success is None else ("success" if e.success else "failure")


class Renderer:
    """Renders the viewer's pages from :class:`RunSource` s with one set of :class:`Links`."""

    def __init__(self, sources: Sequence[RunSource]) -> None:
        self.sources = list(sources)
        self.env = Environment(
            loader=PackageLoader("darwin.view", "templates"),
            autoescape=select_autoescape(["html"]),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.globals["outcome"] = outcome

    def _render(self, template: str, links: Links, **context: Any) -> str:
        return self.env.get_template(template).render(links=links, **context)

    def index(self, links: Links) -> str:
        rows = [(k, s, s.store.success_by_task(s.run_id)) for k, s in enumerate(self.sources)]
        return self._render("index.html", links, runs=rows)

    def run(self, k: int, links: Links) -> str:
        source = self.sources[k]
        evaluations = []
        for label, ev in source.evaluations().items():
            low, high = wilson_interval(ev.successes, ev.episodes) if ev.episodes else (float("nan"),) * 2
            evaluations.append((label, ev, low, high))
        charts = curves(source.metrics())
        drawn = {c.title for c in charts}
        return self._render(
            "run.html",
            links,
            k=k,
            source=source,
            charts=charts,
            figures=[c.figure() for c in charts],
            undrawn=[title for title, *_ in CURVES if title not in drawn],
            evaluations=evaluations,
            by_task=source.store.success_by_task(source.run_id),
            config=source.config(),
            phone_events=source.store.phone_events(source.run_id),
        )

    def episodes(
        self,
        k: int,
        links: Links,
        where: EpisodeFilter,
        *,
        query: Mapping[str, str],
        sort: str = "started_at",
        descending: bool = False,
        page: int = 0,
    ) -> str:
        source = self.sources[k]
        listing = source.store.episode_page(
            source.run_id, where, sort=sort, descending=descending, offset=page * PAGE_SIZE, limit=PAGE_SIZE
        )
        pages = max(1, -(-listing.total // PAGE_SIZE))
        if not 0 <= page < pages:
            raise NoSuchPage(f"no page {page}: these episodes fill page{'s 0 to' if pages > 1 else ''} {pages - 1}")
        labelled = {lab.episode_id for lab in source.store.labels(run_id=source.run_id)} if listing.rows else set()
        return self._render(
            "episodes.html",
            links,
            k=k,
            source=source,
            listing=listing,
            page=page,
            pages=pages,
            facets=source.store.episode_facets(source.run_id),
            updates=sorted(set(source.update_of().values())),
            update_of=source.update_of(),
            labelled=labelled,
            query=dict(query),
            sort=sort,
            descending=descending,
        )

    def episode_context(self, k: int, episode_id: str) -> dict[str, Any] | None:
        source = self.sources[k]
        episode = source.store.episode(episode_id)
        if episode is None or episode.run_id != source.run_id:
            return None
        steps = source.store.steps(episode_id)
        phases = [p for p in Phase if any(s.phase == p for s in steps)]
        views = step_views(steps, episode.device_size, source.store.step_scores(episode_id))
        return {
            "k": k,
            "source": source,
            "episode": episode,
            "task": source.store.task(episode.task_id),
            "phases": [(p, [v for v in views if v.step.phase == p]) for p in phases],
            "verdicts": source.store.verdicts(episode_id),
            "labels": source.store.labels(episode_id=episode_id),
            "trained_update": source.update_of().get(episode_id),
            "device_size": episode.device_size or DEFAULT_DEVICE_SIZE,
        }

    def episode(self, k: int, episode_id: str, links: Links, *, others: Sequence[EpisodeRow] = ()) -> str | None:
        context = self.episode_context(k, episode_id)
        return None if context is None else self.render_episode(context, links, others=others)

    def render_episode(self, context: dict[str, Any], links: Links, *, others: Sequence[EpisodeRow] = ()) -> str:
        return self._render("episode.html", links, others=others, c=context, **context)

    def compare(self, pairs: Sequence[tuple[int, str]], links: Links) -> str | None:
        contexts = [self.episode_context(k, e) for k, e in pairs]
        if any(c is None for c in contexts):
            return None
        return self._render("compare.html", links, sides=contexts)
