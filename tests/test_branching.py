"""Branching rollouts: continuations from the exact states an episode acted from, held with it
in the buffer, their first steps tied to the parent's step by one fork id, and the 'gae'
estimator's sibling baseline on those rows."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest
import torch

from darwin.agents.scripted import RandomActor
from darwin.algos.estimators import AdvantageInputs, EstimatorConfig, get_estimator
from darwin.curricula.static import StaticCurriculum
from darwin.envs.base import ForkUnsupported, PhoneEnv
from darwin.envs.sim.env import SimPhoneEnv
from darwin.learner.step_rows import collect_step_rows
from darwin.replay_buffer import ReplayBuffer
from darwin.rollout import Branching, RolloutEngine
from darwin.task_registry import get_task
from darwin.types import (
    ACTOR,
    ChatMessage,
    Decision,
    DemoStart,
    Generation,
    Observation,
    Prompt,
    Task,
    Trajectory,
    Transition,
)


class _GeneratingRandom(RandomActor):
    """Random actions recorded as a model's would be (a prompt, response ids, log-probs), so
    the learner's row builder accepts them; it also records the history it was given."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed=seed, finish_probability=0.0)
        self.histories: list[list[object]] = []

    async def act(self, observation: Observation, history: Sequence[Transition]) -> Decision:
        self.histories.append([t.decision.action for t in history])
        action = self.sample(observation.device_size)
        prompt = Prompt(messages=(ChatMessage(role="user", text=observation.goal),))
        return Decision(action=action, prompt=prompt, generation=Generation("a", (1,), (2, 3), (-0.5, -0.7)))


class _CountingCurriculum(StaticCurriculum):
    def __init__(self, tasks: Sequence[Task]) -> None:
        super().__init__(tasks)
        self.updates = 0

    def update(self, task, outcome) -> None:  # noqa: ANN001
        self.updates += 1


def _branching_run(steps: int = 60, **branching: int) -> tuple[RolloutEngine, list[Trajectory], _CountingCurriculum]:
    task = get_task("clock_1").model_copy(update={"step_budget": 6})
    curriculum = _CountingCurriculum([task])
    buffer = ReplayBuffer(rollout_steps=steps)
    engine = RolloutEngine(
        [SimPhoneEnv(seed=i) for i in range(2)],
        lambda i: _GeneratingRandom(seed=i),
        curriculum=curriculum,
        buffer=buffer,
        branching=Branching(seed=5, **branching),
    )
    asyncio.run(engine.run(until=lambda: buffer.completed_steps >= steps))
    taken = buffer.take_completed()
    assert taken is not None
    return engine, taken, curriculum


def test_continuations_start_from_the_parents_exact_state_with_its_history_and_budget_left() -> None:
    engine, batch, curriculum = _branching_run(continuations=2, points=2)
    parents = {t.episode_id: t for t in batch if t.branch is None}
    continuations = [t for t in batch if t.branch is not None]
    assert parents and continuations
    for child in continuations:
        assert child.branch is not None
        parent = parents[child.branch.parent]  # a family reaches the learner whole, in one batch
        assert child.group == parent.group is not None
        step = child.branch.step
        own = [t for t in parent.transitions if t.agent == ACTOR]
        # the same screen the parent acted from, and the parent's actions before it as history
        assert np.array_equal(child.transitions[0].observation.screenshot, own[step].observation.screenshot)
        assert [t.decision.action for t in child.demonstration] == [t.decision.action for t in own[:step]]
        assert child.task.start == DemoStart(remaining=0, actions=tuple(t.decision.action for t in own[:step]))
        assert child.task.step_budget == parent.task.step_budget - step and len(child) <= 6 - step
    per_point = {}
    for child in continuations:
        per_point.setdefault(child.branch, 0)  # type: ignore[arg-type]
        per_point[child.branch] += 1  # type: ignore[index]
    assert set(per_point.values()) == {2}  # K = 2 continuations from each chosen state
    assert all(len({c.branch.step for c in continuations if c.branch.parent == p}) <= 2 for p in parents)  # type: ignore[union-attr]
    # the curriculum and the episode counts see only the episodes the curriculum asked for
    stats = engine.stats
    assert curriculum.updates == stats.episodes and stats.continuations >= len(continuations)
    assert stats.episodes + stats.continuations > stats.episodes


def test_rows_of_one_fork_share_its_id_and_take_the_sibling_advantage() -> None:
    _, batch, _ = _branching_run(continuations=3, points=1)
    rows = collect_step_rows(batch).rows
    forked = [r for r in rows if r.fork]
    families: dict[str, list[str]] = {}
    for r in forked:
        families.setdefault(r.fork, []).append(r.episode_id)
    assert families
    for fork, members in families.items():
        parent, step = fork.split("@")
        assert len(members) == 4 and members.count(parent) == 1  # the parent's step and 3 first steps
        assert {r.step for r in forked if r.fork == fork and r.episode_id != parent} == {0}
        assert [r.step for r in forked if r.fork == fork and r.episode_id == parent] == [int(step)]
    # the estimator: hand-made rewards so the siblings differ; every forked row gets its return
    # minus its fork's mean return on every token, the others keep GAE's
    rewards = torch.zeros(len(rows))
    winners = {r.episode_id for r in forked if r.episode_id != r.fork.split("@")[0]}
    last: dict[str, int] = {}
    for i, r in enumerate(rows):
        last[r.episode_id] = i
    first_winner = sorted(winners)[0]
    rewards[last[first_winner]] = 1.0
    mask = torch.ones(len(rows), 2, dtype=torch.bool)
    inputs = AdvantageInputs(
        rewards=rewards,
        response_mask=mask,
        trajectory_ids=[r.episode_id for r in rows],
        step_indices=torch.tensor([r.step for r in rows]),
        group_ids=[r.group for r in rows],
        anchor_ids=[r.anchor for r in rows],
        values=torch.zeros(len(rows), 2),
        fork_ids=[r.fork for r in rows],
        settings=EstimatorConfig(gamma=1.0, lam=1.0, whiten=False),
    )
    advantages = get_estimator("gae").fn(inputs).advantages
    plain = (
        get_estimator("gae")
        .fn(
            AdvantageInputs(**{**inputs.__dict__, "fork_ids": None})  # type: ignore[arg-type]
        )
        .advantages
    )
    winning_fork = next(r.fork for r in forked if r.episode_id == first_winner)
    for i, r in enumerate(rows):
        if r.fork == winning_fork:
            expected = (1.0 if r.episode_id == first_winner else 0.0) - 1 / 4
            assert advantages[i].tolist() == pytest.approx([expected, expected])
        elif r.fork:
            assert advantages[i].tolist() == [0.0, 0.0]  # siblings that all failed: no signal
        else:
            assert torch.equal(advantages[i], plain[i])


def test_phones_that_cannot_fork_refuse_branching_with_the_reason() -> None:
    class Unforkable(SimPhoneEnv):
        @property
        def forks(self) -> bool:
            return False

    with pytest.raises(ForkUnsupported, match="sim-1 cannot.*PhoneEnv.forks is False"):
        RolloutEngine(
            [SimPhoneEnv(seed=0), Unforkable(seed=1)],
            lambda i: RandomActor(),
            curriculum=StaticCurriculum([get_task("clock_1")]),
            buffer=ReplayBuffer(rollout_steps=4),
            branching=Branching(continuations=2),
        )
    with pytest.raises(ValueError, match="mode='async' and no group_size"):
        RolloutEngine(
            [SimPhoneEnv(seed=0)],
            lambda i: RandomActor(),
            buffer=ReplayBuffer(rollout_steps=4, group_size=2),
            group_size=2,
            branching=Branching(continuations=2),
        )
    with pytest.raises(ValueError, match="continuations must be >= 1"):
        Branching(continuations=0)
    with pytest.raises(ForkUnsupported, match="cannot be put back in an earlier state"):
        PhoneEnv.restore_state(Unforkable(seed=1), {})  # the default every non-SimPhone has


def test_a_whole_demonstration_start_needs_recorded_actions() -> None:
    with pytest.raises(ValueError, match="needs recorded actions"):
        DemoStart(remaining=0)


def test_dry_run_names_branching_and_refuses_phones_that_cannot_fork() -> None:
    from pathlib import Path

    from click.testing import CliRunner

    from darwin.cli.main import main

    spa = str(Path(__file__).resolve().parents[1] / "examples" / "spa_bench.py")
    on = CliRunner().invoke(
        main, ["run", spa, "--dry-run", "--set", 'branching={"continuations": 3, "points": 2}'], terminal_width=400
    )
    assert on.exit_code == 0, on.output
    assert "3 continuation(s) from each of up to 2 state(s)" in on.output
    for settings, reason in [
        (["phones.provider=adb"], "which adb phones cannot"),
        (["group_size=4"], "need mode='async' and group_size=null"),
        (
            ["learner.algorithm=grpo", "learner.critic.warmup_updates=0", "learner.levers.whiten_by=batch"],
            "part of the 'gae' estimator",
        ),
    ]:
        sets = [arg for setting in ['branching={"continuations": 2}', *settings] for arg in ("--set", setting)]
        refused = CliRunner().invoke(main, ["run", spa, "--dry-run", *sets])
        assert refused.exit_code != 0 and reason in " ".join(refused.output.split()), (settings, refused.output)


def test_a_run_with_branching_trains_on_continuations_and_logs_them(tmp_path, small_run) -> None:
    import json
    from pathlib import Path

    from darwin.run.load import apply_overrides, load_experiment
    from darwin.run.recipe import run_experiment

    root = Path(__file__).resolve().parents[1]
    small = {**small_run, "branching": '{"continuations": 2, "points": 1}', "cache_dir": str(tmp_path / "cache")}
    config = apply_overrides(
        load_experiment(root / "examples" / "spa_bench.py"), [f"{k}={v}" for k, v in small.items()]
    )
    run_experiment(config, tmp_path / "run")
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    rollout = [r for r in rows if r["group"] == "rollout"]
    assert len(rollout) == 2 and all(r["continuations"] >= 2 for r in rollout)
    assert all(0.0 <= r["continuation_success"] <= 1.0 for r in rollout)


def test_the_sibling_baseline_can_be_turned_off_for_an_ablation() -> None:
    from darwin.learner.config import LearnerConfig
    from darwin.learner.update_batch import estimate_advantages

    _, batch, _ = _branching_run(continuations=2, points=1)
    rows = collect_step_rows(batch).rows
    n = len(rows)
    rewards = torch.zeros(n)
    forked = [i for i, r in enumerate(rows) if r.fork]
    first_child = next(i for i in forked if rows[i].step == 0 and rows[i].fork.split("@")[0] != rows[i].episode_id)
    rewards[first_child] = 1.0  # a reward on one continuation's first step: the siblings differ
    common = {
        "rewards": rewards,
        "response_mask": torch.ones(n, 2, dtype=torch.bool),
        "step_indices": torch.tensor([r.step for r in rows]),
        "truncated": torch.zeros(n, dtype=torch.bool),
        "values": torch.zeros(n, 2),
        "lam": 1.0,
    }
    on, _ = estimate_advantages(LearnerConfig(levers={"whiten_advantages": False}), rows, **common)
    off, _ = estimate_advantages(
        LearnerConfig(levers={"whiten_advantages": False, "sibling_baseline": False}), rows, **common
    )
    fork = rows[first_child].fork
    siblings = [i for i in forked if rows[i].fork == fork]
    assert len(siblings) == 3
    # on: return minus the fork's mean return, 1 - 1/3 for the winner; off: GAE's (values 0, lambda 1: the return)
    assert on[first_child].tolist() == pytest.approx([2 / 3, 2 / 3])
    assert off[first_child].tolist() == pytest.approx([1.0, 1.0])
    others = [i for i in range(n) if not rows[i].fork]
    assert torch.equal(on[others], off[others])
