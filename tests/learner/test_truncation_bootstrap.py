"""Bootstrapped truncations read V(s') at the screen the last action led to.

The maths by hand (gamma = lambda = 1, two steps of two tokens, rewards 0): every token's
return is the bootstrap value, and its advantage that value minus the token's own value.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import numpy as np
import torch

from darwin.algos.estimators import AdvantageInputs, EstimatorConfig, get_estimator
from darwin.learner.local import LocalLearner
from darwin.types import TerminationReason

VALUES = torch.tensor([[0.2, 0.3], [0.4, 0.6]])


def _gae(next_values, truncated=True):
    return get_estimator("gae").fn(
        AdvantageInputs(
            rewards=torch.zeros(2),
            response_mask=torch.ones(2, 2, dtype=torch.bool),
            trajectory_ids=["e", "e"],
            step_indices=torch.tensor([0, 1]),
            group_ids=["g", "g"],
            anchor_ids=["a", "b"],
            values=VALUES,
            truncated=torch.tensor([truncated, truncated]),
            next_values=next_values,
            settings=EstimatorConfig(gamma=1.0, lam=1.0, whiten=False, bootstrap_truncated=True),
        )
    )


def test_the_next_state_value_is_every_tokens_return():
    out = _gae(torch.tensor([float("nan"), 0.7]))
    assert torch.allclose(out.returns, torch.full((2, 2), 0.7))
    assert torch.allclose(out.advantages, torch.tensor([[0.5, 0.4], [0.3, 0.1]]))


def test_without_a_next_state_the_last_observed_state_stands_in():
    # V(s_T), the value before the last step's first token (0.4), not its last token's (0.6):
    # with gamma = 1 that one would cancel at the last token and bootstrap nothing.
    out = _gae(torch.tensor([float("nan"), float("nan")]))
    assert torch.allclose(out.returns, torch.full((2, 2), 0.4))
    assert torch.allclose(out.advantages, torch.tensor([[0.2, 0.1], [0.0, -0.2]]))
    assert torch.allclose(_gae(None).returns, out.returns)


def test_terminal_trajectories_ignore_the_next_state():
    out = _gae(torch.tensor([float("nan"), 0.7]), truncated=False)
    assert torch.allclose(out.returns, torch.zeros(2, 2))


def test_learner_reads_v_of_the_recorded_next_prompt(policy, trajectories, kit):
    learner = LocalLearner(
        policy, kit.small_config(truncation="bootstrap", gamma=1.0, lam=1.0, levers={"whiten_advantages": False})
    )
    with torch.no_grad():  # a value head that tells states apart
        learner.critic.head.weight.copy_(
            torch.linspace(-1, 1, learner.critic.head.weight.numel()).view_as(learner.critic.head.weight)
        )
    next_prompt = kit.prompt_for(9, np.random.default_rng(42), goal="a screen after the cut")
    cut = replace(trajectories[2], next_prompt=next_prompt)  # the third one ran out of steps
    assert cut.termination.reason == TerminationReason.STEP_BUDGET
    with_next = learner.prepare([trajectories[0], trajectories[1], cut])
    without = learner.prepare(trajectories)
    assert (with_next.bootstrapped_from_next, with_next.bootstrapped_from_last) == (1, 0)
    assert (without.bootstrapped_from_next, without.bootstrapped_from_last) == (0, 1)
    with torch.no_grad():
        inputs = policy.build_inputs([next_prompt])
        v_next = float(learner.critic(inputs, [(learner._pad_id,)])[0][0, 0])
    rows = [i for i, r in enumerate(with_next.rows) if r.truncated]
    last = rows[-1]
    n = int(with_next.response_mask[last].sum())
    # gamma = lambda = 1, reward 0: the truncated rows' returns are V(s') of the next prompt ...
    assert torch.allclose(with_next.returns[last, :n], torch.tensor(v_next), atol=1e-5)
    # ... and without it, V of the last observed state (the last step's value before its first token)
    assert torch.allclose(without.returns[last, :n], without.values[last, 0], atol=1e-5)
    assert abs(v_next - float(without.values[last, 0])) > 1e-4
    m = learner.update([trajectories[0], trajectories[1], cut])
    assert (m.bootstrapped_from_next, m.bootstrapped_from_last) == (1, 0)
    assert LocalLearner(policy, kit.small_config()).update(trajectories).bootstrapped_from_next is None


def test_workflow_records_the_prompt_at_the_screen_after_a_truncation():
    from darwin.agents.base import ModelActor
    from darwin.agents.scripted import OracleActor
    from darwin.envs.sim.env import SimPhoneEnv
    from darwin.sft.config import SFTConfig
    from darwin.task_registry import resolve_tasks
    from darwin.workflows.step import LifecycleWorkflow, StepConfig

    class Taps(ModelActor):  # a model actor whose policy always answers the same tap
        def __init__(self):
            from darwin.policies.base import Policy
            from darwin.types import Generation

            class Fixed(Policy):
                async def generate(self, prompts, **kw):
                    return [Generation(text="click(50,50)") for _ in prompts]

            super().__init__(SFTConfig().make_agent(), Fixed())

    (task,) = resolve_tasks(("clock_1",))
    env = SimPhoneEnv(seed=3)

    def play(actor, record):
        workflow = LifecycleWorkflow(config=StepConfig(observation_size=(168, 364), record_next_prompt=record))
        return asyncio.run(workflow.run(env, task.model_copy(update={"step_budget": 2}), actor))

    cut = play(Taps(), True)
    assert cut.termination.reason == TerminationReason.STEP_BUDGET and cut.next_prompt is not None
    after = env.screenshot((168, 364))
    (shot,) = cut.next_prompt.images
    assert np.array_equal(shot, after)  # the screen after the last action, not the last one observed
    assert not np.array_equal(shot, cut.transitions[-1].observation.screenshot)  # the tap changed the screen
    assert play(Taps(), False).next_prompt is None  # not asked
    assert play(OracleActor(), True).next_prompt is None  # a scripted actor has no prompt to give


def _tapping_actor():
    from darwin.agents.base import ModelActor
    from darwin.policies.base import Policy
    from darwin.sft.config import SFTConfig
    from darwin.types import Generation

    class Fixed(Policy):
        async def generate(self, prompts, **kw):
            return [Generation(text="click(50,50)") for _ in prompts]

    return ModelActor(SFTConfig().make_agent(), Fixed())


def test_an_infrastructure_truncation_records_the_next_state_when_the_phone_still_answers():
    from darwin.envs.base import InfraError
    from darwin.envs.sim.env import SimPhoneEnv
    from darwin.task_registry import resolve_tasks
    from darwin.workflows.step import LifecycleWorkflow, StepConfig

    class DropsOnSecondTap(SimPhoneEnv):
        def __init__(self, *, screen_too: bool):
            super().__init__(seed=3)
            self.taps, self.screen_too, self.dropped = 0, screen_too, False

        async def aexecute(self, action):
            self.taps += 1
            if self.taps == 2:
                self.dropped = True
                raise InfraError("disconnect", "adb went away")
            await super().aexecute(action)

        async def ascreenshot(self, size=None):
            if self.dropped and self.screen_too:
                raise InfraError("disconnect", "still away")
            return await super().ascreenshot(size)

    (task,) = resolve_tasks(("clock_1",))
    workflow = LifecycleWorkflow(config=StepConfig(observation_size=(168, 364), record_next_prompt=True))
    answered = DropsOnSecondTap(screen_too=False)
    cut = asyncio.run(workflow.run(answered, task, _tapping_actor()))
    assert cut.termination.reason == TerminationReason.INFRA_TRUNCATED and len(cut.transitions) == 1
    assert cut.next_prompt is not None  # the phone answered one more screenshot
    gone = asyncio.run(workflow.run(DropsOnSecondTap(screen_too=True), task, _tapping_actor()))
    assert gone.termination.reason == TerminationReason.INFRA_TRUNCATED and gone.next_prompt is None


def test_two_step_trajectories_cut_by_budget_and_by_a_failure_return_v_of_the_next_state(policy, kit):
    """Two steps, rewards 0, gamma = lambda = 1, no whitening: every token's return is V(s')
    and its advantage V(s') - V(token), for a budget truncation and an infrastructure one."""
    learner = LocalLearner(
        policy,
        kit.small_config(
            truncation="bootstrap",
            gamma=1.0,
            lam=1.0,
            critic={"value_head_bias": 0.25},
            levers={"whiten_advantages": False},
        ),
    )
    rng = np.random.default_rng(5)
    budget = kit.sampled_trajectory(policy, [0.0, 0.0], seed=11, reason=TerminationReason.STEP_BUDGET)
    infra = kit.sampled_trajectory(policy, [0.0, 0.0], seed=12, reason=TerminationReason.INFRA_TRUNCATED)
    budget = replace(budget, next_prompt=kit.prompt_for(2, rng))
    infra = replace(infra, next_prompt=kit.prompt_for(2, rng))
    with torch.no_grad():  # values that differ by state: V(s') is not the head's bias
        learner.critic.head.weight.copy_(
            torch.linspace(-0.5, 0.5, learner.critic.head.weight.numel()).view_as(learner.critic.head.weight)
        )
        v_next = [
            float(learner.critic(policy.build_inputs([t.next_prompt]), [(learner._pad_id,)])[0][0, 0])
            for t in (budget, infra)
        ]
    batch = learner.prepare([budget, infra])
    assert (batch.bootstrapped_from_next, batch.bootstrapped_from_last) == (2, 0)
    for trajectory, v in zip((budget, infra), v_next, strict=True):
        rows = [i for i, r in enumerate(batch.rows) if r.episode_id == trajectory.episode_id]
        assert len(rows) == 2
        for i in rows:
            n = int(batch.response_mask[i].sum())
            assert torch.allclose(batch.returns[i, :n], torch.tensor(v), atol=1e-5)
            assert torch.allclose(batch.advantages[i, :n], v - batch.values[i, :n], atol=1e-5)


def test_a_step_budget_counted_as_terminal_is_not_bootstrapped_while_a_crash_still_is(policy, kit):
    """``step_budget='terminal'`` (Fig. 6b's presets): the episode that ran out of steps is a
    failure (returns 0 everywhere, rows not truncated); the crash-cut one still returns V(s')."""
    learner = LocalLearner(
        policy,
        kit.small_config(
            truncation="bootstrap",
            step_budget="terminal",
            gamma=1.0,
            lam=1.0,
            critic={"value_head_bias": 0.25},
            levers={"whiten_advantages": False},
        ),
    )
    rng = np.random.default_rng(5)
    budget = kit.sampled_trajectory(policy, [0.0, 0.0], seed=11, reason=TerminationReason.STEP_BUDGET)
    infra = kit.sampled_trajectory(policy, [0.0, 0.0], seed=12, reason=TerminationReason.INFRA_TRUNCATED)
    budget = replace(budget, next_prompt=kit.prompt_for(2, rng))
    infra = replace(infra, next_prompt=kit.prompt_for(2, rng))
    with torch.no_grad():
        v_next = float(learner.critic(policy.build_inputs([infra.next_prompt]), [(learner._pad_id,)])[0][0, 0])
    batch = learner.prepare([budget, infra])
    assert (batch.bootstrapped_from_next, batch.bootstrapped_from_last) == (1, 0)
    for trajectory, cut, expected in ((budget, False, 0.0), (infra, True, v_next)):
        rows = [i for i, r in enumerate(batch.rows) if r.episode_id == trajectory.episode_id]
        assert [batch.rows[i].truncated for i in rows] == [cut, cut]
        for i in rows:
            n = int(batch.response_mask[i].sum())
            assert torch.allclose(batch.returns[i, :n], torch.tensor(expected), atol=1e-5)
