"""LocalLearner: warm-up, value head, GAE rows, PPO ratio and signal, GRPO, shared critic, LoRA."""

from __future__ import annotations

import asyncio
import doctest
import importlib
import math

import numpy as np
import pytest
import torch

from darwin.agents.base import ModelActor
from darwin.agents.tiny import TinyAgent
from darwin.algos.gae import trajectory_gae
from darwin.envs.sim.env import SimPhoneEnv
from darwin.learner.config import LoraConfig
from darwin.learner.local import LocalLearner
from darwin.learner.step_rows import LearnerDataError
from darwin.models.anatomy import capture_outputs
from darwin.models.scoring import compute_response_logprobs, response_batch
from darwin.task_registry import task_set
from darwin.types import Decision, TerminationReason
from darwin.workflows.step import StepConfig, StepWorkflow

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


def policy_weights(policy):
    return {k: v.detach().clone() for k, v in policy.vlm.model.state_dict().items()}


def test_warmup_trains_only_the_critic_for_exactly_n_updates(policy, trajectories, kit):
    learner = LocalLearner(policy, kit.small_config(critic={"warmup_updates": 2, "lr": 1e-3}, actor_lr=1e-3))
    actor0 = {k: v.clone() for k, v in learner.actor.state_dict().items()}
    policy0 = policy_weights(policy)
    for n in (1, 2):
        critic_before = {k: v.clone() for k, v in learner.critic.state_dict().items()}
        m = learner.update(trajectories)
        assert (m.update, m.stage, m.actor_updated, m.policy_version) == (n, "critic_warmup", False, 0)
        assert m.policy_loss is None and m.value_loss is not None
        assert kit.params_equal(learner.actor.state_dict(), actor0)  # bit-identical
        assert not kit.params_equal(learner.critic.state_dict(), critic_before)
        assert policy.version == 0 and kit.params_equal(policy_weights(policy), policy0)
    m = learner.update(trajectories)  # update N + 1: the first actor update
    assert (m.update, m.stage, m.actor_updated, m.policy_version, policy.version) == (3, "ppo", True, 1, 1)
    assert not kit.params_equal(learner.actor.state_dict(), actor0)
    assert kit.params_equal(policy_weights(policy), learner.actor_state_dict())
    assert m.policy_loss is not None and m.entropy > 0 and m.clip_fraction is not None


def test_warmup_uses_warmup_lambda_then_lam(policy, trajectories, kit):
    learner = LocalLearner(policy, kit.small_config(critic={"warmup_updates": 1, "warmup_lam": 1.0}, lam=0.9))
    assert learner.prepare(trajectories).lam == 1.0
    learner.update(trajectories)
    assert learner.prepare(trajectories).lam == 0.9


@pytest.mark.parametrize("critic", ["separate", "shared"])
def test_calibrated_value_head_starts_at_its_bias(policy, trajectories, kit, critic):
    learner = LocalLearner(policy, kit.small_config(critic={"backbone": critic, "value_head_bias": 0.1}))
    batch = learner.prepare(trajectories)
    assert torch.allclose(batch.values[batch.response_mask], torch.tensor(0.1))
    assert bool((batch.values[~batch.response_mask] == 0).all())
    m = learner.update(trajectories)
    assert m.value_mean == pytest.approx(0.1)


def test_random_value_head_is_drawn_from_the_learners_generator(policy, trajectories, kit):
    state = torch.random.get_rng_state()
    a = LocalLearner(policy, kit.small_config(critic={"value_head_init": "random"}, seed=3))
    b = LocalLearner(policy, kit.small_config(critic={"value_head_init": "random"}, seed=3))
    assert torch.equal(torch.random.get_rng_state(), state)  # the global RNG was not touched
    assert torch.equal(a.critic.head.weight, b.critic.head.weight)
    values = a.prepare(trajectories).values
    assert values.std() > 0


def test_gae_gets_the_right_rows(policy, trajectories, kit):
    """Compare with a manual trajectory_gae call on values computed row by row."""
    cfg = kit.small_config(lam=0.95, gamma=1.0)
    learner = LocalLearner(policy, cfg)
    with torch.no_grad():  # a critic that is not constant, so bootstrapping across steps shows
        learner.critic.head.weight.normal_(generator=torch.Generator().manual_seed(0))
    batch = learner.prepare(trajectories)
    rewards, values, traj_ids, steps, truncated = [], [], [], [], []
    width = max(len(t.decision.generation.response_ids) for tr in trajectories for t in tr.transitions)
    for tr in trajectories:
        for t in tr.transitions:
            gen = t.decision.generation
            with torch.no_grad():
                v, _ = learner.critic(policy.build_inputs([t.decision.prompt]), [gen.response_ids])
            values.append(torch.nn.functional.pad(v[0], (0, width - v.shape[1])))
            rewards.append(t.reward)
            traj_ids.append(tr.episode_id)
            steps.append(t.step)
            truncated.append(tr.termination.reason == TerminationReason.STEP_BUDGET)
    values = torch.stack(values)
    mask = torch.zeros_like(values, dtype=torch.bool)
    for i, n in enumerate(len(t.decision.generation.response_ids) for tr in trajectories for t in tr.transitions):
        mask[i, :n] = True
    assert torch.equal(mask, batch.response_mask)
    assert torch.allclose(values, batch.values, atol=1e-5)
    assert batch.truncated.tolist() == truncated and batch.step_indices.tolist() == steps
    adv, ret = trajectory_gae(
        torch.tensor(rewards), values, mask, traj_ids, steps, gamma=1.0, lam=0.95, truncated=truncated
    )
    assert torch.allclose(batch.advantages, adv, atol=1e-4)
    assert torch.allclose(batch.returns, ret, atol=1e-5)


def test_bootstrap_without_a_next_state_reads_the_last_observed_one(policy, trajectories, kit):
    learner = LocalLearner(policy, kit.small_config(truncation="bootstrap", critic={"value_head_bias": 0.3}))
    batch = learner.prepare(trajectories)
    # truncated trajectory (third): with V = 0.3 everywhere, gamma = lam = 1 -> return 0 + 0.3 at every token
    rows = [i for i, r in enumerate(batch.rows) if r.truncated]
    assert torch.allclose(batch.returns[rows][batch.response_mask[rows]], torch.tensor(0.3))
    zero = LocalLearner(policy, kit.small_config(truncation="zero", critic={"value_head_bias": 0.3})).prepare(
        trajectories
    )
    assert zero.returns[rows][zero.response_mask[rows]].abs().max() < 0.3  # V(s') = 0 pulls returns down


def test_first_ratio_is_one_on_fresh_data(policy, trajectories, kit):
    learner = LocalLearner(policy, kit.small_config(ppo_epochs=2))
    m = learner.update(trajectories)
    assert m.initial_log_ratio_max is not None and m.initial_log_ratio_max < 1e-4
    assert m.version_lag_mean == 0 and m.optimizer_steps == 4  # 7 rows / 4 per mini-batch, 2 epochs


def test_ppo_raises_the_logprob_of_the_rewarded_response(policy, kit):
    rng = np.random.default_rng(0)
    prompt = kit.prompt_for(0, rng, goal="Open Clock.")
    good, bad = "click(5,5)", "press_home()"
    learner = LocalLearner(policy, kit.small_config(actor_lr=3e-3, critic={"lr": 1e-2}, ppo_epochs=4))

    def logprob(text):
        traj = kit.canned_trajectory(policy, prompt, text, 0.0)
        return sum(traj.transitions[0].decision.generation.response_logprobs)

    before = logprob(good), logprob(bad)
    for _ in range(4):
        batch = [kit.canned_trajectory(policy, prompt, text, reward) for text, reward in [(good, 1.0), (bad, 0.0)] * 2]
        learner.update(batch)
    after = logprob(good), logprob(bad)
    assert after[0] > before[0] + 5  # measured +15 to +27 nats over three seeds
    assert after[1] < before[1] - 5


def test_grpo_needs_no_critic(policy, kit):
    rng = np.random.default_rng(1)
    prompt = kit.prompt_for(0, rng)
    learner = LocalLearner(policy, kit.small_config(algorithm="grpo", actor_lr=3e-3))
    assert learner.critic is None and learner.critic_optimizer is None
    batch = [
        kit.canned_trajectory(policy, prompt, "wait()", 1.0),
        kit.canned_trajectory(policy, prompt, "press_back()", 0.0),
    ]
    prepared = learner.prepare(batch)
    assert prepared.values is None and prepared.returns is None
    assert prepared.advantages[0, 0] > 0 > prepared.advantages[1, 0]  # group-normalised per task
    m = learner.update(batch)
    assert (m.stage, m.policy_version, m.value_loss, m.explained_variance) == ("grpo", 1, None, None)
    assert policy.version == 1


def test_shared_backbone_warmup_is_a_probe_then_trains_jointly(policy, trajectories, kit):
    learner = LocalLearner(policy, kit.small_config(critic={"backbone": "shared", "warmup_updates": 1}))
    assert set(learner.critic.state_dict()) == {"head.weight", "head.bias"}
    actor0 = {k: v.clone() for k, v in learner.actor.state_dict().items()}
    head0 = learner.critic.head.bias.detach().clone()
    m = learner.update(trajectories)
    assert m.stage == "critic_warmup" and kit.params_equal(learner.actor.state_dict(), actor0)
    assert not torch.equal(learner.critic.head.bias, head0)
    m = learner.update(trajectories)
    assert m.actor_updated and m.value_loss is not None and policy.version == 1
    assert not kit.params_equal(learner.actor.state_dict(), actor0)


def test_value_alignment_is_the_hidden_state_that_predicts_the_token(policy, trajectories, kit):
    """A value head equal to the LM-head row of token t reads logit t at the same positions."""
    learner = LocalLearner(policy, kit.small_config())
    token = 77
    with torch.no_grad():
        learner.critic.head.weight.copy_(learner.actor.get_output_embeddings().weight[token : token + 1])
        learner.critic.head.bias.zero_()
    batch = learner.prepare(trajectories)
    inputs = learner._collate(batch.inputs[:3])
    responses = [r.response_ids for r in batch.rows[:3]]
    with torch.no_grad(), capture_outputs(None, learner.actor.get_output_embeddings()) as cap:
        compute_response_logprobs(learner.actor, inputs, responses, forbidden=policy.forbidden_mask)
        values, mask = learner.critic(inputs, responses)
    logits = cap["logits"][:, :-1, token]  # logits_to_keep = R + 1; position P-1+k predicts token k
    assert torch.allclose(values[mask], logits[mask], atol=1e-4)
    seq = response_batch(learner.critic.trunk, inputs, responses)
    assert seq.model_inputs["input_ids"].shape[1] == inputs["input_ids"].shape[1] + values.shape[1]


def test_lora_pushes_merged_weights(policy, trajectories, kit):
    learner = LocalLearner(
        policy,
        kit.small_config(
            ppo={"kl_coef": 0.1}, finetunes={"lora": LoraConfig(rank=4)}, actor_lr=1e-2, mini_batch_size=8
        ),
    )  # one step per update
    trainable = [n for n, p in learner.actor.named_parameters() if p.requires_grad]
    assert trainable and all(".lora_" in n for n in trainable)
    m = learner.update(trajectories)
    assert m.kl_to_reference is not None and m.kl_to_reference < 1e-6  # before the first step: actor == base
    m = learner.update(trajectories)
    assert m.kl_to_reference > 1e-6
    merged = learner.actor_state_dict()
    assert kit.params_equal(policy_weights(policy), merged)
    prompt, ids = (
        trajectories[0].transitions[0].decision.prompt,
        trajectories[0].transitions[0].decision.generation.response_ids,
    )
    (from_policy,) = policy.teacher_forced_logprobs([prompt], [ids])
    with torch.no_grad():
        from_actor, _ = compute_response_logprobs(
            learner.actor, policy.build_inputs([prompt]), [ids], forbidden=policy.forbidden_mask
        )
    assert torch.allclose(from_policy, from_actor[0], atol=1e-5)
    assert not torch.allclose(
        from_policy, torch.tensor(trajectories[0].transitions[0].decision.generation.response_logprobs), atol=1e-3
    )


def test_scripted_steps_are_rejected(policy, trajectories, kit):
    import dataclasses

    traj = trajectories[0]
    steps = list(traj.transitions)
    steps[0] = dataclasses.replace(steps[0], decision=Decision(action=steps[0].decision.action))
    learner = LocalLearner(policy, kit.small_config(algorithm="grpo"))
    with pytest.raises(LearnerDataError, match="scripted"):
        learner.update([dataclasses.replace(traj, transitions=steps)])
    assert learner.updates == 0


def test_real_rollouts_from_a_sim_phone(kit):
    """ModelActor(TinyAgent, HFPolicy) on a SimPhone: parse errors and all, then warm-up and PPO."""
    policy = kit.tiny_policy(max_new_tokens=6)
    actor = ModelActor(TinyAgent(), policy)
    workflow = StepWorkflow(config=StepConfig(observation_size=kit.SCREEN))
    tasks = [t.model_copy(update={"step_budget": 2}) for t in task_set("base8")[:2]]

    async def rollouts():
        env = SimPhoneEnv(seed=0)
        out = []
        for task in tasks:
            out.append(await workflow.run(env, task, actor))
            await env.ago_home()
        return out

    trajectories = asyncio.run(rollouts())
    assert any(t.decision.parse_error is not None for tr in trajectories for t in tr.transitions)
    learner = LocalLearner(policy, kit.small_config(critic={"warmup_updates": 1}, levers={"parse_error_penalty": 0.05}))
    batch = learner.prepare(trajectories)
    slipped = torch.tensor([r.parse_error for r in batch.rows])
    given = torch.tensor([r.reward for r in batch.rows])
    assert torch.allclose(batch.rewards, given - 0.05 * slipped.float())  # the learner shapes the reward
    m1, m2 = learner.update(trajectories), learner.update(trajectories)
    assert (m1.stage, m2.stage, policy.version) == ("critic_warmup", "ppo", 1)
    assert m1.steps == sum(len(t) for t in trajectories)
    assert m2.version_lag_mean == 0 and m2.initial_log_ratio_max < 1e-4


def test_metrics_are_typed_and_loggable(policy, trajectories, kit):
    m = LocalLearner(policy, kit.small_config()).update(trajectories)
    d = m.as_dict()
    assert d["update"] == 1 and d["actor_updated"] == 1.0 and "stage" not in d
    assert m.success_rate is None and m.episode_return_mean == pytest.approx((1.0 - 0.1 + 0.0) / 3)
    assert m.truncated_fraction == pytest.approx(1 / 3) and m.total_s >= m.train_s > 0


def test_module_doctest():
    module = importlib.import_module("darwin.learner.local")
    assert doctest.testmod(module).failed == 0


def test_sampling_goes_on_while_the_learner_trains(policy, trajectories, kit):
    import threading

    learner = LocalLearner(policy, kit.small_config(ppo_epochs=2))
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("metrics", learner.update(trajectories)))
    rng = np.random.default_rng(9)
    versions = []
    worker.start()
    while worker.is_alive():  # the policy keeps sampling (and tokenizing) on this thread
        versions += [g.policy_version for g in policy.generate_sync([kit.prompt_for(0, rng), kit.prompt_for(1, rng)])]
    worker.join()
    assert result["metrics"].policy_version == 1 and versions
    assert policy.generate_sync([kit.prompt_for(2, rng)])[0].policy_version == 1


def test_an_update_reports_each_steps_value_advantage_and_logprob(policy, trajectories, kit):
    """step_scores: one per trained step, keyed by where the run database stores the step."""
    learner = LocalLearner(policy, kit.small_config())
    assert learner.step_scores == ()
    learner.update(trajectories)
    scores = learner.step_scores
    expected = [(tr.episode_id, t.phase, t.step) for tr in trajectories for t in tr.transitions]
    assert [(s.episode_id, s.phase, s.step) for s in scores] == expected
    assert {s.update for s in scores} == {1}
    logprobs = [sum(t.decision.generation.response_logprobs) for tr in trajectories for t in tr.transitions]
    assert [s.logprob for s in scores] == pytest.approx(logprobs, abs=1e-5)
    assert all(s.value is not None and math.isfinite(s.value) and math.isfinite(s.advantage) for s in scores)
    assert len({round(s.advantage, 6) for s in scores}) > 1
