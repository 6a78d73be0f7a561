"""The reverse curriculum: episodes start inside the simulator's demonstration, the start moves
back as the task's success from there rises, and only the agent's steps become training rows."""

from __future__ import annotations

import asyncio

import pytest

from darwin.agents.scripted import OracleActor
from darwin.curricula.base import EpisodeOutcome
from darwin.curricula.reverse import ReverseCurriculum
from darwin.envs.sim.env import SimPhoneEnv
from darwin.replay_buffer import ReplayBuffer
from darwin.rollout import RolloutEngine
from darwin.task_registry import get_task
from darwin.types import DemoStart, TerminationReason
from darwin.workflows.step import LifecycleWorkflow


def _outcome(task_id: str, success: bool | None, start_step: int = 3) -> EpisodeOutcome:
    return EpisodeOutcome(task_id, success, 2, TerminationReason.SUCCESS, start_step=start_step)


def test_the_start_moves_back_as_success_rises_per_task() -> None:
    tasks = [get_task("booking.com_0"), get_task("clock_1")]
    cur = ReverseCurriculum(tasks, window=3, advance_at=0.6, step=2)
    assert cur.remaining() == {"booking.com_0": 1, "clock_1": 1}
    booking = tasks[0].model_copy(update={"start": DemoStart(remaining=1)})
    for success in (True, False):  # 1 of 2: the window is not full yet
        cur.update(booking, _outcome("booking.com_0", success))
    cur.update(booking, _outcome("booking.com_0", None))  # not scored: no evidence
    assert cur.remaining()["booking.com_0"] == 1
    cur.update(booking, _outcome("booking.com_0", True))  # 2 of 3 >= 0.6: two steps earlier
    assert cur.remaining() == {"booking.com_0": 3, "clock_1": 1}
    cur.update(booking, _outcome("booking.com_0", True))  # an episode from the old start says nothing now
    cur.update(tasks[0], _outcome("booking.com_0", True, start_step=0))  # nor one from the beginning
    later = tasks[0].model_copy(update={"start": DemoStart(remaining=3)})
    for _ in range(3):
        cur.update(later, _outcome("booking.com_0", False))
    assert cur.remaining()["booking.com_0"] == 3  # failing from there: it stays
    cur.update(later, _outcome("booking.com_0", True, start_step=0))  # the whole demonstration fit
    assert cur.remaining()["booking.com_0"] is None

    state = cur.state_dict()
    again = ReverseCurriculum(tasks, window=3, advance_at=0.6, step=2)
    again.load_state_dict(state)
    assert again.remaining() == cur.remaining()
    assert [again.next_task() for _ in range(5)] == [cur.next_task() for _ in range(5)]


def test_inside_below_sends_inside_only_the_tasks_that_fail_from_the_beginning() -> None:
    tasks = [get_task("booking.com_0"), get_task("clock_1")]
    cur = ReverseCurriculum(tasks, window=2, inside_below=0.5)
    assert cur.probing() == {"booking.com_0", "clock_1"}
    assert cur.remaining() == {"booking.com_0": None, "clock_1": None}
    assert all(cur.next_task().start is None for _ in range(10))  # probing: from the beginning
    booking, clock = tasks
    cur.update(booking, _outcome("booking.com_0", False, start_step=0))
    cur.update(booking, _outcome("booking.com_0", None, start_step=0))  # not scored: no evidence
    cur.update(clock, _outcome("clock_1", True, start_step=0))
    assert cur.probing() == {"booking.com_0", "clock_1"}
    cur.update(booking, _outcome("booking.com_0", True, start_step=0))  # 1 of 2 is not below 0.5
    cur.update(clock, _outcome("clock_1", False, start_step=0))  # 1 of 2: clock_1 stays at the beginning
    assert cur.probing() == set() and cur.remaining() == {"booking.com_0": None, "clock_1": None}

    cur = ReverseCurriculum(tasks, window=2, inside_below=0.6)
    for _ in range(2):
        cur.update(booking, _outcome("booking.com_0", False, start_step=0))
    assert cur.probing() == {"clock_1"} and cur.remaining()["booking.com_0"] == 1
    inside = booking.model_copy(update={"start": DemoStart(remaining=1)})
    for _ in range(2):  # from inside, the window starts empty: two wins move the start back
        cur.update(inside, _outcome("booking.com_0", True))
    assert cur.remaining()["booking.com_0"] == 2
    cur.update(clock, _outcome("clock_1", True, start_step=0))
    again = ReverseCurriculum(tasks, window=2, inside_below=0.6)
    again.load_state_dict(cur.state_dict())
    assert again.probing() == {"clock_1"} and again.remaining() == cur.remaining()
    with pytest.raises(ValueError, match=r"inside_below must be a number in \[0, 1\]"):
        ReverseCurriculum(tasks, inside_below=1.5)


def test_setup_tasks_start_at_the_beginning_and_bad_settings_are_named() -> None:
    cycle = get_task("chrome_clear_tabs.cycle")  # a setup phase comes first
    cur = ReverseCurriculum([cycle])
    assert cur.remaining() == {cycle.id: None} and cur.next_task() == cycle
    with pytest.raises(ValueError, match="window must be an integer >= 1"):
        ReverseCurriculum([cycle], window=0)
    with pytest.raises(ValueError, match=r"advance_at must be a number in \[0, 1\]"):
        ReverseCurriculum([cycle], advance_at=2)


def test_a_started_episode_holds_only_the_agents_steps() -> None:
    task = get_task("booking.com_0")
    workflow = LifecycleWorkflow()
    full = asyncio.run(workflow.run(SimPhoneEnv(seed=3), task, OracleActor()))
    started = asyncio.run(
        workflow.run(SimPhoneEnv(seed=3), task.model_copy(update={"start": DemoStart(remaining=2)}), OracleActor())
    )
    assert full.success and started.success
    plan = len(full)  # the oracle's actions (the episode ends the moment the goal holds)
    assert full.start_step == 0 and started.start_step == plan - 2 > 0
    assert len(started) == 2  # the last two actions: the agent's steps only
    assert [t.decision.action for t in started.transitions] == [t.decision.action for t in full.transitions][-2:]
    # the demonstration's steps are kept apart, each with the screen it acted on
    assert [t.decision.action for t in started.demonstration] == [t.decision.action for t in full.transitions][:-2]
    assert {t.agent for t in started.demonstration} == {"demonstration"}
    longer = asyncio.run(
        workflow.run(SimPhoneEnv(seed=3), task.model_copy(update={"start": DemoStart(remaining=50)}), OracleActor())
    )
    assert longer.start_step == 0 and len(longer) == len(full)  # a demonstration no longer than remaining


def test_training_rows_of_a_reverse_curriculum_are_the_agents_steps() -> None:
    tasks = [get_task("booking.com_0"), get_task("clock_1")]
    buffer = ReplayBuffer(rollout_steps=30)
    engine = RolloutEngine(
        [SimPhoneEnv(seed=i) for i in range(2)],
        lambda i: OracleActor(),
        curriculum=ReverseCurriculum(tasks),
        buffer=buffer,
    )
    asyncio.run(engine.run(until=lambda: buffer.completed_steps >= 30))
    trajectories = buffer.take_completed()
    started = [t for t in trajectories if t.task.start is not None and t.start_step > 0]
    assert started
    # the oracle plays exactly the demonstration's last `remaining` actions: those are the rows
    assert all(len(t) == t.task.start.remaining for t in started)  # type: ignore[union-attr]
    assert engine.stats.env_steps >= sum(
        len(t) for t in trajectories
    )  # the played prefix is no env step of the agent's


def test_a_phone_without_a_state_probe_cannot_plan_a_start() -> None:
    class NoProbe(SimPhoneEnv):
        def probe_state(self):  # noqa: ANN201
            return None

        async def aprobe_state(self):  # noqa: ANN201
            return None

    task = get_task("clock_1").model_copy(update={"start": DemoStart(remaining=1)})
    with pytest.raises(ValueError, match="needs a phone with a SimPhone state probe"):
        asyncio.run(LifecycleWorkflow().run(NoProbe(seed=0), task, OracleActor()))


def test_a_run_with_the_reverse_curriculum_starts_inside_and_logs_where(tmp_path, small_run, monkeypatch) -> None:
    """`--set curriculum=reverse` on the embedded default: episodes start inside the
    demonstration, the run logs the share that did and each task's start, and it trains; its
    evaluations start every episode at the beginning."""
    import json
    from pathlib import Path

    import darwin.run.recipe
    from darwin.run.load import apply_overrides, load_experiment
    from darwin.run.recipe import run_experiment

    evaluated: list[
        tuple[object, int]
    ] = []  # (the task's start, demonstration steps played) of every evaluation episode
    evaluate_paired = darwin.run.recipe.evaluate_paired

    async def spy(tasks, envs, make_actor, protocol, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        report = await evaluate_paired(tasks, envs, make_actor, protocol, *args, **kwargs)
        evaluated.extend((t.task.start, t.start_step) for t in report.trajectories)
        return report

    monkeypatch.setattr(darwin.run.recipe, "evaluate_paired", spy)  # where evaluate_experiment looks it up

    root = Path(__file__).resolve().parents[2]
    small = {
        **small_run,
        "tasks": '["booking.com_0","clock_1"]',
        "curriculum": "reverse",
        "cache_dir": str(tmp_path / "cache"),
        "evaluation.samples": "1",
        "evaluation.phones": "1",
    }
    config = apply_overrides(
        load_experiment(root / "examples" / "spa_bench.py"), [f"{k}={v}" for k, v in small.items()]
    )
    run_experiment(config, tmp_path / "run")
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    started = [r["started_inside_demonstration"] for r in rows if r["group"] == "rollout"]
    assert len(started) == 2 and started[0] > 0
    starts = [
        {k: v for k, v in r.items() if k not in ("step", "group")} for r in rows if r["group"] == "curriculum_start"
    ]
    assert starts and set(starts[0]) == {"booking.com_0", "clock_1"} and all(v >= 0 for v in starts[0].values())
    assert len(evaluated) == 2 * 2 * 2 and set(evaluated) == {(None, 0)}  # 2 evaluations x 2 tasks x (greedy + 1)


class _SeesHistory(OracleActor):
    """The oracle, recording the history length it is given at each step."""

    def __init__(self) -> None:
        super().__init__()
        self.lengths: list[int] = []

    async def act(self, observation, history):  # noqa: ANN001, ANN201
        self.lengths.append(len(history))
        return await super().act(observation, history)


@pytest.mark.parametrize("in_history", [True, False])
def test_the_demonstration_begins_the_agents_history_unless_turned_off(in_history: bool) -> None:
    from darwin.workflows.step import StepConfig

    task = get_task("booking.com_0").model_copy(update={"start": DemoStart(remaining=2)})
    actor = _SeesHistory()
    workflow = LifecycleWorkflow(config=StepConfig(demonstration_in_history=in_history))
    played = asyncio.run(workflow.run(SimPhoneEnv(seed=3), task, actor))
    k = played.start_step
    assert k > 0 and actor.lengths == ([k, k + 1] if in_history else [0, 1])
    assert all(t.agent == "actor" for t in played.transitions)  # the rows: the agent's steps only
