"""Demonstrations with a reader (issue 72): the oracle's presses point at marks that hit the
same widget, typed words are copied by reference, and stored demonstrations are read as a
rollout reads them."""

from __future__ import annotations

import pytest

from darwin.actions import Click, Type
from darwin.agents.tiny import TinyAgent
from darwin.readers import ReaderUnavailable
from darwin.sft.config import SFTConfig
from darwin.sft.demonstrations import collect_demonstrations
from darwin.sft.sources import DemoEpisode, DemoStep, build_examples
from darwin.types import Observation


def test_the_oracle_points_at_marks_that_hit_its_widget():
    config = SFTConfig(
        tasks=("clock_1", "chrome_clear_tabs"),
        phones=1,
        episodes=2,
        observation_size=(168, 364),
        agent={"reader": {"name": "elements"}},
    )
    demos, stats = collect_demonstrations(config)
    assert stats.successes == stats.episodes == 2
    presses = [d for d in demos if isinstance(d.oracle_action, Click)]
    pointed = [d for d in presses if d.target.startswith(("click(#", "click('"))]
    assert pointed and len(pointed) >= 0.8 * len(presses), [d.target for d in presses]
    assert any(d.target.startswith("click('") for d in pointed)  # by the text that reads the mark
    for d in pointed:
        assert d.observation.marks  # the workflow read the screen with the agent's reader
        assert "[0] " in d.prompt.messages[-1].text
        hit = [m for m in d.observation.marks if (m.center[0], m.center[1]) == (d.action.x, d.action.y)]
        assert hit, d.target  # the press lands on a mark's centre
        assert d.target_box is not None
        x0, y0, x1, y1 = d.target_box
        assert x0 <= d.action.x < x1 and y0 <= d.action.y < y1  # inside the oracle's widget


def test_without_a_reader_nothing_changes():
    config = SFTConfig(tasks=("clock_1",), phones=1, episodes=1, observation_size=(168, 364))
    demos, _ = collect_demonstrations(config)
    assert all("#" not in d.target and not d.observation.marks for d in demos)


def _episode(goal: str, action) -> DemoEpisode:
    from darwin.envs.sim.env import SimPhoneEnv

    env = SimPhoneEnv(seed=0)
    obs = Observation(screenshot=env.screenshot((252, 560)), goal=goal, device_size=env.device_size, task_id="t")
    return DemoEpisode(
        episode_id="e", goal=goal, task_id="t", steps=(DemoStep(observation=obs, action=action),), source="jsonl:x"
    )


def test_stored_demonstrations_are_read_by_a_pixel_reader():
    # a tap on the launcher's Clock label, from a file: the OCR reader reads the stored screen
    clock = Click(x=270, y=560)
    ocr_agent = TinyAgent(reader={"name": "ocr"})
    (example,) = build_examples(lambda: TinyAgent(reader={"name": "ocr"}), [_episode("Open Clock", clock)])
    assert "Screen:" in example.prompt.messages[-1].text
    marks = [m for m in example.observation.marks if m.text == "Clock"]
    assert marks
    (typed,) = build_examples(lambda: ocr_agent, [_episode("Type Berlin now", Type(content="Berlin"))])
    assert typed.target == "type(@1:2)" and typed.action == Type(content="Berlin")


def test_stored_demonstrations_cannot_be_read_from_a_tree_they_do_not_have():
    with pytest.raises(ReaderUnavailable, match="agent.reader='ocr'"):
        build_examples(lambda: TinyAgent(reader={"name": "elements"}), [_episode("Open Clock", Click(x=5, y=5))])


def test_the_cities_probes_task_files_load_and_never_share_a_destination():
    from darwin.task_registry import load_task_file

    trained = load_task_file("examples/tasks/booking_cities_trained.yaml")
    unseen = load_task_file("examples/tasks/booking_cities_unseen.yaml")
    assert len(trained) == len(unseen) == 5
    cities = [{t.verifier.params["destination"] for t in tasks} for tasks in (trained, unseen)]
    assert not cities[0] & cities[1]
    assert all(t.verifier.params["destination"] in t.instruction for t in trained + unseen)
