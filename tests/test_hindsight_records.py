"""Explorations in the run database (issue 45): stored as episodes like any other, read back equal."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from darwin.agents.scripted import RandomActor
from darwin.envs.sim.env import SimPhoneEnv
from darwin.hindsight.exploration import Exploration, ExplorationError, explore
from darwin.hindsight.novelty import NoveltyExplorer
from darwin.hindsight.records import EXPLORATION_SOURCE, exploration_task, load_explorations, store_exploration
from darwin.predicates import evaluate
from darwin.store import RunStore
from darwin.task_registry import get_task
from darwin.types import Termination, TerminationReason, Trajectory


@pytest.fixture(scope="module")
def clock_run() -> Exploration:
    explorer = NoveltyExplorer(RandomActor(seed=2), candidates=4)
    return asyncio.run(explore(SimPhoneEnv(seed=0), "Clock", steps=25, actor=explorer, seed=2, keep_screenshots=True))


def test_an_exploration_is_an_episode_like_any_other_and_comes_back_equal(tmp_path: Path, clock_run) -> None:
    plain = asyncio.run(explore(SimPhoneEnv(seed=0), "Settings", steps=12, seed=5))
    with RunStore.for_run_dir(tmp_path) as store:
        run_id = store.start_run("explore", config=None)
        clock_id = store_exploration(store, run_id, clock_run)
        store_exploration(store, run_id, plain)
        # an ordinary episode in the same run is not an exploration
        store.start_episode(run_id, "task-episode", get_task("clock_4"), phone="sim-0")
        assert load_explorations(store, run_id) == [clock_run, plain]
        assert load_explorations(store, store.start_run("other", config=None)) == []
        episode = store.episode(clock_id)
        steps = store.steps(clock_id)
        task = store.task(episode.task_id)
    assert episode.task_id == "explore.clock" and task.source == EXPLORATION_SOURCE and task.app == "Clock"
    assert (episode.seed, episode.phone, episode.device_size) == (2, clock_run.phone, (1080, 2400))
    assert episode.success is None and episode.termination_reason is TerminationReason.STEP_BUDGET
    assert episode.num_steps == 25 and [s.step for s in steps] == list(range(25))
    assert [s.action for s in steps] == list(clock_run.actions(25))
    assert steps[3].state_after == clock_run.steps[3].state and episode.start_state == clock_run.start_state
    # a step's screenshot is the screen its action was chosen on, as for any episode
    assert (tmp_path / "screenshots" / steps[0].screenshot_path).read_bytes() == clock_run.start_screenshot
    assert (tmp_path / "screenshots" / steps[4].screenshot_path).read_bytes() == clock_run.steps[3].screenshot
    assert (tmp_path / "screenshots" / episode.final_screenshot_path).read_bytes() == clock_run.steps[-1].screenshot
    assert plain.start_screenshot is None and all(s.screenshot is None for s in plain.steps)


def test_an_exploration_task_has_no_goal_and_is_never_a_success(clock_run) -> None:
    task = exploration_task("Calendar")
    assert task.id == "explore.calendar" and task.verifier.predicate == "no_goal"
    assert not any(evaluate(task.verifier, step.state).success for step in clock_run.steps)


def test_an_episode_without_the_states_is_refused_as_an_exploration(tmp_path: Path) -> None:
    with RunStore.for_run_dir(tmp_path) as store:
        run_id = store.start_run("explore", config=None)
        task = exploration_task("Clock")
        store.start_episode(run_id, "no-states", task, phone="sim-0")
        store.finish_episode(Trajectory("no-states", task, [], termination=Termination(TerminationReason.STEP_BUDGET)))
        with pytest.raises(ExplorationError, match="no-states .* without a start state"):
            load_explorations(store, run_id)


def test_a_version_6_database_gains_the_state_columns(tmp_path: Path, clock_run) -> None:
    with RunStore.for_run_dir(tmp_path) as store:
        store.start_run("old", config=None)
    db = sqlite3.connect(tmp_path / "run.db")
    db.execute("ALTER TABLE episodes DROP COLUMN start_state")
    db.execute("ALTER TABLE steps DROP COLUMN state_after")
    db.execute("UPDATE store_meta SET value='6' WHERE key='schema_version'")
    db.commit()
    db.close()
    with RunStore.for_run_dir(tmp_path) as store:  # opening migrates in place
        (run,) = store.runs()
        store_exploration(store, run.run_id, clock_run)
        assert load_explorations(store, run.run_id) == [clock_run]
    db = sqlite3.connect(tmp_path / "run.db")
    assert db.execute("SELECT value FROM store_meta WHERE key='schema_version'").fetchone() == ("7",)
    db.close()
