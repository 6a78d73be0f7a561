"""The novelty-seeking explorer (issue 45): any actor proposes, a count-based bonus over screens
picks; selectable in `darwin tasks coverage`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from darwin.actions import Action, Click, Drag, Finished, LongPress, OpenApp, PressBack, Scroll, Type
from darwin.agents.base import Actor
from darwin.agents.scripted import RandomActor
from darwin.cli.main import main
from darwin.envs.sim.env import SimPhoneEnv
from darwin.hindsight.coverage import explore_task_starts, held_out_tasks, is_answer_task
from darwin.hindsight.exploration import explore
from darwin.hindsight.novelty import ELSEWHERE, NoveltyExplorer, action_key, screen_key
from darwin.hindsight.records import load_explorations
from darwin.store import RunStore
from darwin.templates import default_split
from darwin.types import Decision, Observation, Transition

DEVICE = (1080, 2400)
GRID = (4, 16)


class Proposes(Actor):
    """Proposes the same actions in the same order at every step (the explorer asks once per candidate)."""

    def __init__(self, *actions: Action | None) -> None:
        self.actions = actions
        self.asked = 0

    async def act(self, observation: Observation, history: Sequence[Transition]) -> Decision:
        action = self.actions[self.asked % len(self.actions)]
        self.asked += 1
        return Decision(action=action) if action is not None else Decision(action=None, message="thinking")


def _screen(value: int) -> np.ndarray:
    return np.full((4, 2, 3), value, np.uint8)


def _act(explorer: NoveltyExplorer, screen: int, step: int) -> Action | None:
    observation = Observation(screenshot=_screen(screen), goal="explore", device_size=DEVICE, step=step)
    return asyncio.run(explorer.act(observation, [])).action


def test_action_keys_count_clicks_by_cell_and_launches_as_one() -> None:
    assert action_key(Click(x=0, y=0), DEVICE, GRID) == ("click", 0, 0)
    assert action_key(Click(x=1079, y=2399), DEVICE, GRID) == ("click", 3, 15)
    assert (
        action_key(Click(x=300, y=140), DEVICE, GRID) == action_key(Click(x=500, y=10), DEVICE, GRID) == ("click", 1, 0)
    )
    assert action_key(LongPress(x=300, y=160), DEVICE, GRID) == ("long_press", 1, 1)
    assert action_key(Scroll(x=5, y=5, direction="down"), DEVICE, GRID) == ("scroll", "down")
    assert action_key(Drag(x1=600, y1=600, x2=1000, y2=700), DEVICE, GRID) == ("drag", 2, 4, "right")
    assert action_key(Type(content="hi\n"), DEVICE, GRID) == ("type", "hi\n")
    assert action_key(OpenApp(app="Clock"), DEVICE, GRID) == action_key(OpenApp(app="Chrome"), DEVICE, GRID)
    assert screen_key(_screen(1)) == screen_key(_screen(1)) != screen_key(_screen(2))


def test_the_explorer_prefers_an_action_not_yet_tried_at_a_screen_it_saw() -> None:
    a, b = Click(x=10, y=10), Click(x=1000, y=2300)
    explorer = NoveltyExplorer(Proposes(a, b), candidates=2)
    assert _act(explorer, screen=1, step=0) == a  # both untried (1.0 each): the actor's first proposal
    assert _act(explorer, screen=2, step=1) == a  # a new screen: again both untried
    # back at screen 1: a led to screen 2 (seen once: 1/sqrt(2)), b was never tried there (1.0)
    s1, key_a, key_b = screen_key(_screen(1)), action_key(a, DEVICE, GRID), action_key(b, DEVICE, GRID)
    assert explorer.score(s1, key_a) == pytest.approx(2**-0.5)
    assert explorer.score(s1, key_b) == 1.0
    assert _act(explorer, screen=1, step=2) == b
    assert explorer.outcomes[(s1, key_a)] == {screen_key(_screen(2)): 1}
    assert explorer.visits[s1] == 2 and explorer.screens_seen == 2


def test_known_actions_are_ranked_by_how_new_the_screen_they_led_to_is() -> None:
    a, b = Click(x=10, y=10), Click(x=1000, y=2300)
    explorer = NoveltyExplorer(Proposes(a, b), candidates=2)
    # at screen 1: a -> screen 2, then b -> screen 3, then a -> screen 2 again
    for step, (screen, played) in enumerate([(1, a), (2, None), (1, b), (3, None), (1, None)]):
        action = _act(explorer, screen=screen, step=step)
        if played is not None:
            assert action == played
    s1 = screen_key(_screen(1))
    # screen 2 seen once, screen 3 once: a tie at 1/sqrt(2), the actor's first proposal wins
    assert explorer.score(s1, action_key(a, DEVICE, GRID)) == explorer.score(s1, action_key(b, DEVICE, GRID))
    _act(explorer, screen=2, step=5)  # screen 2 seen twice now: a's outcome grows old, b's does not
    assert explorer.score(s1, action_key(a, DEVICE, GRID)) == pytest.approx(1 / 3**0.5)
    assert _act(explorer, screen=1, step=6) == b


def test_an_action_followed_by_a_step_the_explorer_did_not_choose_led_elsewhere() -> None:
    back = PressBack()
    explorer = NoveltyExplorer(Proposes(back), candidates=1)
    _act(explorer, screen=1, step=3)
    _act(explorer, screen=1, step=5)  # the caller played step 4 (re-opened the app)
    assert explorer.outcomes[(screen_key(_screen(1)), ("press_back",))] == {ELSEWHERE: 1}
    assert explorer.visits[ELSEWHERE] == 1 and explorer.screens_seen == 1


def test_asked_again_at_the_same_step_the_screen_is_counted_once() -> None:
    explorer = NoveltyExplorer(Proposes(None, Finished()), candidates=2)
    observation = Observation(screenshot=_screen(1), goal="explore", device_size=DEVICE, step=0)
    first = asyncio.run(explorer.act(observation, []))
    assert first.action is None and first.message == "thinking"  # nothing playable: the first proposal
    asyncio.run(explorer.act(observation, []))
    assert explorer.visits[screen_key(_screen(1))] == 1


def test_the_explorer_refuses_a_bad_setting() -> None:
    with pytest.raises(ValueError, match="candidates >= 1"):
        NoveltyExplorer(RandomActor(), candidates=0)
    with pytest.raises(ValueError, match="grid"):
        NoveltyExplorer(RandomActor(), grid=(0, 4))


def test_exploration_with_the_novelty_explorer_is_deterministic_for_its_seed() -> None:
    def run(seed: int):
        explorer = NoveltyExplorer(RandomActor(seed=seed), candidates=4)
        return asyncio.run(explore(SimPhoneEnv(seed=0), "Clock", steps=40, actor=explorer, seed=seed))

    first, again, other = run(3), run(3), run(4)
    assert first == again and first.explorer_seed == 3
    assert first.actions(40) != other.actions(40)
    plain = asyncio.run(explore(SimPhoneEnv(seed=0), "Clock", steps=40, seed=3))
    assert first.actions(40) != plain.actions(40)  # the bonus, not the random agent alone, chose


def test_explore_task_starts_makes_a_fresh_explorer_per_exploration() -> None:
    goals = [t for t in held_out_tasks(default_split(), ["Chrome"]) if not is_answer_task(t)][:2]
    made: list[int] = []

    def make(seed: int) -> Actor:
        made.append(seed)
        return NoveltyExplorer(RandomActor(seed=seed), candidates=2)

    runs = asyncio.run(explore_task_starts(goals, steps=5, explorer_seeds=(0, 1), make_explorer=make))
    assert made == [0, 1] * (len(runs) // 2) and [r.explorer_seed for r in runs] == made
    again = asyncio.run(explore_task_starts(goals, steps=5, explorer_seeds=(0, 1), make_explorer=make))
    assert runs == again


def test_the_cli_explores_with_the_novelty_explorer_and_stores_the_explorations(tmp_path: Path) -> None:
    args = ["tasks", "coverage", "--apps", "Chrome", "--steps", "4", "--explorer-seeds", "0,1", "--no-setups"]
    stored = tmp_path / "explore"
    novelty = CliRunner().invoke(main, [*args, "--explorer", "novelty", "--candidates", "3", "--run-dir", str(stored)])
    assert novelty.exit_code == 0, novelty.output
    assert "by the novelty explorer (3 proposals per step of the random agent" in " ".join(novelty.output.split())
    with RunStore.for_run_dir(stored) as store:
        (run,) = store.runs()
        explorations = load_explorations(store, run.run_id)
        episodes = store.episodes(run.run_id)
    assert run.name == "explore novelty-picked random, 4 steps, seeds 0,1"
    assert [r.explorer_seed for r in explorations] == [0, 1] and {e.task_id for e in episodes} == {"explore.chrome"}
    assert all(len(r.steps) == 4 and r.start_screenshot is None for r in explorations)
    # the same explorer, same seeds: the same explorations; the random agent alone plays others
    again = asyncio.run(
        explore_task_starts(
            [t for t in held_out_tasks(default_split(), ["Chrome"])],
            steps=4,
            explorer_seeds=(0, 1),
            with_setups=False,
            make_explorer=lambda seed: NoveltyExplorer(RandomActor(seed=seed), candidates=3),
        )
    )
    assert explorations == again
    plain = CliRunner().invoke(main, [*args, "--json"])
    assert plain.exit_code == 0 and json.loads(plain.output)["explorations"] == 2


def test_the_cli_builds_the_agent_as_darwin_eval_does_and_refuses_what_does_not_fit(tmp_path: Path) -> None:
    args = ["tasks", "coverage", "--apps", "Chrome", "--steps", "3", "--explorer-seeds", "0", "--no-setups"]
    agent = CliRunner().invoke(main, [*args, "--agent", "random", "--explorer", "novelty", "--json"])
    assert agent.exit_code == 0, agent.output
    assert json.loads(agent.output)["explorations"] == 1
    missing = CliRunner().invoke(main, [*args, "--agent", "tiny:" + str(tmp_path / "none")])
    assert missing.exit_code == 2 and "no checkpoint at" in missing.output and "--agent" in missing.output
    hot_random = CliRunner().invoke(main, [*args, "--temperature", "1.5"])
    assert hot_random.exit_code == 2 and "--temperature" in hot_random.output
    screens = CliRunner().invoke(main, [*args, "--keep-screenshots"])
    assert screens.exit_code == 2 and "--run-dir" in screens.output
