"""Explorations in the run database (issue 45): stored as episodes like any other, read back equal."""

from __future__ import annotations

import asyncio
import io
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from darwin.actions import Click, OpenApp, PressBack, PressHome
from darwin.agents.base import Actor
from darwin.agents.scripted import RandomActor
from darwin.envs.base import PhoneWrapper
from darwin.envs.sim.env import SimPhoneEnv
from darwin.hindsight.exploration import Exploration, ExplorationError, explore, looks_alike
from darwin.hindsight.novelty import NoveltyExplorer
from darwin.hindsight.records import EXPLORATION_SOURCE, exploration_task, load_explorations, store_exploration
from darwin.hindsight.synthesizer import HindsightSynthesizer
from darwin.predicates import evaluate
from darwin.store import RunStore
from darwin.task_registry import get_task
from darwin.types import Decision, Termination, TerminationReason, Trajectory


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


class NoProbe(PhoneWrapper):
    """A SimPhone that hides its state, as a real phone has none to give."""

    def probe_state(self):
        return None

    async def aprobe_state(self):
        return None


class Script(Actor):
    """Plays ``actions`` in turn, then the random agent's."""

    def __init__(self, actions) -> None:
        self.actions = list(actions)
        self.random = RandomActor(seed=3)

    async def act(self, observation, history):
        if self.actions:
            return Decision(action=self.actions.pop(0))
        return await self.random.act(observation, history)


def test_a_phone_without_a_state_probe_is_explored_by_its_screens(tmp_path: Path) -> None:
    with pytest.raises(ExplorationError, match="keep_screenshots=True"):
        asyncio.run(explore(NoProbe(SimPhoneEnv(seed=0)), "Clock", steps=5))
    # a tap inside Clock, home (left by the explorer's own action), back from Clock's first screen
    # (the launcher again, told only by the screen), then the random agent
    actions = [Click(x=540, y=800), PressHome(), PressBack()]
    run = asyncio.run(
        explore(NoProbe(SimPhoneEnv(seed=0)), "Clock", steps=12, actor=Script(actions), keep_screenshots=True)
    )
    played = [step.action for step in run.steps]
    assert run.start_state is None and all(step.state is None and step.screenshot for step in run.steps)
    assert run.start_screenshot is not None and len(played) == 12
    clock = OpenApp(app="Clock")
    assert played[:6] == [clock, actions[0], actions[1], clock, actions[2], clock]
    # wherever the screen after an action is the launcher, the next action opens the app again
    launcher = asyncio.run(_launcher())
    for before, after, step in zip(played, played[1:], run.steps, strict=False):
        shown = np.asarray(Image.open(io.BytesIO(step.screenshot)).convert("RGB"))
        if isinstance(before, PressHome) or looks_alike(shown, launcher):
            assert after == clock, played
    # the state synthesiser cannot read it and says what can
    with pytest.raises(ExplorationError, match="model_hindsight"):
        HindsightSynthesizer().synthesize(run)
    # stored and read back like any other
    with RunStore.for_run_dir(tmp_path) as store:
        run_id = store.start_run("explore", config=None)
        store_exploration(store, run_id, run)
        assert load_explorations(store, run_id) == [run]


async def _launcher() -> np.ndarray:
    env = SimPhoneEnv(seed=0)
    await env.ago_home()
    return await env.ascreenshot((252, 560))


def test_two_screens_look_alike_when_little_of_them_differs() -> None:
    env = SimPhoneEnv(seed=0)
    env.go_home()
    launcher = env.screenshot((252, 560))
    env.execute(OpenApp(app="Clock"))
    clock = env.screenshot((252, 560))
    moved = launcher.copy()
    moved[:12, :40] = 255 - moved[:12, :40]  # a status bar's clock changing
    assert looks_alike(launcher, launcher) and looks_alike(launcher, moved)
    assert not looks_alike(launcher, clock)
