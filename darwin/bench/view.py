"""``darwin bench view``: how fast ``darwin view`` answers over a large run database.

It writes a run database of ``episodes`` episodes (``steps`` steps each, with verdicts and
screenshots from a pool of distinct screens; the tables and indexes are the run store's own),
serves it with ``darwin view``'s app on a local port, and times real HTTP requests: the
episode table's first page, a filtered and sorted page, a deep page, an episode of
``long_steps`` steps and the run page. Figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
from sqlalchemy import create_engine, insert

from darwin.database import DB_FILENAME, utcnow
from darwin.store import RunStore
from darwin.store_schema import EpisodeModel, StepModel, VerdictModel
from darwin.types import Task, VerifierSpec
from darwin.view.app import create_app
from darwin.view.server import ViewServer
from darwin.view.source import open_sources

__all__ = ["ViewBenchResult", "bench_view", "build_database"]

TASKS = ("clock_1", "settings_3", "amazon_0", "booking.com_0", "chrome_clear_tabs", "clock_4", "settings_dark_theme")


@dataclass(frozen=True)
class ViewBenchResult:
    """Median seconds per request (over ``repeats``) and the database's size."""

    episodes: int
    steps: int
    build_s: float
    timings: dict[str, float]

    def rows(self) -> list[tuple[str, str, str]]:
        targets = {"episode table, first page": "< 1 s", "an episode of 30 steps": "< 1 s"}
        return [(name, f"{1000 * s:.0f} ms", targets.get(name, "-")) for name, s in self.timings.items()]


def build_database(run_dir: Path, *, episodes: int, steps: int, long_steps: int, screens: int = 16) -> str:
    """A run database of ``episodes`` finished episodes of ``steps`` steps each (the first one
    ``long_steps``); returns the id of the long episode."""
    rng = np.random.default_rng(0)
    with RunStore.for_run_dir(run_dir) as store:
        run_id = store.start_run("bench-view", config=None)
        shots = [store.put_screenshot(rng.integers(0, 255, size=(560, 252, 3), dtype=np.uint8)) for _ in range(screens)]
        for task_id in TASKS:
            store.record_task(
                Task(
                    id=task_id,
                    instruction=f"{task_id} goal",
                    app="Clock",
                    verifier=VerifierSpec(predicate="settings.dark_theme", params={"enabled": True}),
                )
            )
    engine = create_engine(f"sqlite:///{run_dir / DB_FILENAME}")
    now = utcnow()
    episode_rows, step_rows, verdict_rows = [], [], []
    for i in range(episodes):
        episode_id = f"e{i:07d}"
        success = bool(rng.random() < 0.4)
        n = long_steps if i == 0 else steps
        episode_rows.append(
            {
                "id": episode_id,
                "run_id": run_id,
                "task_id": TASKS[i % len(TASKS)],
                "phone": f"sim-{i % 16}",
                "seed": i,
                "started_at": now,
                "ended_at": now,
                "termination_reason": "success" if success else "step_budget",
                "termination_cause": "",
                "success": success,
                "num_steps": n,
                "phase_success": {"execution": success},
                "device_width": 1080,
                "device_height": 2400,
                "final_screenshot_path": shots[i % screens],
            }
        )
        for s in range(n):
            step_rows.append(
                {
                    "episode_id": episode_id,
                    "step": s,
                    "phase": "execution",
                    "action_type": "click",
                    "action_json": f'{{"type":"click","x":{100 + 7 * s},"y":{300 + 50 * s}}}',
                    "agent": "actor",
                    "response_text": f"click({100 + 7 * s}, {300 + 50 * s})",
                    "policy_version": i // 32,
                    "reward": 0.0,
                    "done": s == n - 1,
                    "termination_cause": "",
                    "screenshot_path": shots[(i + s) % screens],
                    "created_at": now,
                }
            )
        verdict_rows.append(
            {
                "episode_id": episode_id,
                "phase": "execution",
                "verifier_kind": "rule",
                "success": success,
                "reward": float(success),
                "reason": "rule",
                "created_at": now,
            }
        )
    with engine.begin() as conn:
        conn.execute(insert(EpisodeModel), episode_rows)
        conn.execute(insert(StepModel), step_rows)
        conn.execute(insert(VerdictModel), verdict_rows)
    engine.dispose()
    return "e0000000"


def bench_view(run_dir: Path, *, episodes: int, steps: int, long_steps: int = 30, repeats: int = 5) -> ViewBenchResult:
    """Build the database in ``run_dir``, serve it, and time each page ``repeats`` times (median)."""
    t0 = time.perf_counter()
    long_episode = build_database(run_dir, episodes=episodes, steps=steps, long_steps=long_steps)
    build_s = time.perf_counter() - t0
    pages = {
        "episode table, first page": "runs/0/episodes",
        "episode table, filtered and sorted": "runs/0/episodes?task=amazon_0&outcome=failure&sort=num_steps&desc=1",
        "episode table, page 100": "runs/0/episodes?page=100",
        f"an episode of {long_steps} steps": f"runs/0/episodes/{long_episode}",
        "run page": "runs/0",
    }
    timings: dict[str, float] = {}
    with (
        ViewServer(create_app(open_sources([str(run_dir)])), host="127.0.0.1", port=0) as server,
        httpx.Client(base_url=server.url, timeout=60) as client,
    ):
        for name, path in pages.items():
            samples = []
            for _ in range(repeats):
                start = time.perf_counter()
                response = client.get(path)
                samples.append(time.perf_counter() - start)
                response.raise_for_status()
            timings[name] = statistics.median(samples)
    return ViewBenchResult(episodes, episodes * steps - steps + long_steps, build_s, timings)
