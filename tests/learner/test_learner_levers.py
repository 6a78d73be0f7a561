"""The learning levers through the real learner path: decoupled PPO anchor, behaviour weight,
local format penalty, per-task whitening, trajectory weighting, separate critic mini-batches,
GiGPO, shortest-path adjustment, negative pruning and positive replay. Each trains the tiny
model a few updates with the switch on: the actor changes and nothing is NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from darwin.learner.local import LocalLearner
from darwin.types import Task, TerminationReason, Verdict, VerifierSpec

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

OTHER = Task(id="chrome_tabs", instruction="Close all tabs.", app="Chrome", verifier=VerifierSpec(predicate="p"))


def grouped(kit, policy, offset=0):
    """Two groups of three rollouts (one per task), successes and failures mixed."""
    out = []
    for g, task in (("g1", kit.TASK), ("g2", OTHER)):
        for i, rewards in enumerate(([0.0, 1.0], [0.0, 0.0, 1.0], [0.0, -0.1, 0.0])):
            t = kit.sampled_trajectory(
                policy,
                rewards,
                seed=offset + 10 * len(out) + i,
                task=task,
                parse_error_steps=(1,) if rewards[1] < 0 else (),
                reason=TerminationReason.AGENT_FINISHED if rewards[-1] > 0 else TerminationReason.STEP_BUDGET,
            )
            t.group = g
            t.verdicts = {t.transitions[0].phase: Verdict(rewards[-1] > 0)}
            out.append(t)
    return out


LEVERS = {
    "recompute": dict(ppo={"old_logprobs": "recompute"}),
    "behaviour_weight": dict(
        ppo={"old_logprobs": "recompute", "behaviour_weight_cap": 2.0},
    ),
    "local_format_penalty": dict(levers={"format_penalty_advantage": 1.0}),
    "whiten_by_task": dict(levers={"whiten_by": "task"}),
    "trajectory_weighting": dict(levers={"trajectory_weighting": True}),
    "critic_mini_batch": dict(critic={"mini_batch_size": 4}),
    "gigpo": dict(algorithm="gigpo"),
    "grpo": dict(algorithm="grpo"),
    "shortest_path": dict(algorithm="grpo", levers={"shortest_path_adjustment": True}),
    "negative_pruning": dict(levers={"negative_pruning": True}),
    "positive_replay": dict(
        ppo={"old_logprobs": "recompute"},
        levers={"positive_replay_ratio": 0.5},
    ),
}


@pytest.mark.parametrize("lever", sorted(LEVERS))
def test_each_lever_trains_the_tiny_model(kit, lever):
    policy = kit.tiny_policy()
    data = grouped(kit, policy)
    learner = LocalLearner(
        policy, kit.small_config(actor_lr=1e-3, mini_batch_size=8, speed={"micro_batch_size": 4}, **LEVERS[lever])
    )
    actor0 = {k: v.clone() for k, v in learner.actor.state_dict().items()}
    for n in range(2):
        if lever == "positive_replay":  # fresh episodes every update, as in a run
            data = grouped(kit, policy, offset=1000 * n)
        m = learner.update(data)
        for name, value in m.as_dict().items():
            assert math.isfinite(value), (lever, name, value)
    assert not kit.params_equal(learner.actor.state_dict(), actor0)
    assert policy.version == 2 and m.policy_loss is not None
    if lever == "positive_replay":
        assert m.replayed_trajectories > 0 and m.replay_size > 0
    if lever in ("recompute", "behaviour_weight", "positive_replay"):
        assert m.behaviour_clip_fraction is not None


def test_recomputed_anchor_starts_every_update_inside_the_clip_window(kit):
    """Rows sampled two versions ago: with the behaviour anchor tokens start outside the
    window; recomputed, the first ratio is 1 (up to float noise) on every token."""
    policy = kit.tiny_policy()
    data = grouped(kit, policy)
    stale = LocalLearner(policy, kit.small_config(actor_lr=3e-3, ppo_epochs=2))
    for _ in range(2):
        stale.update(data)
    recompute = stale.config.model_copy(
        update={"ppo": stale.config.ppo.model_copy(update={"old_logprobs": "recompute"})}
    )
    stale.config = recompute
    m = stale.update(data)  # data sampled at version 0, actor at version 2
    assert m.initial_log_ratio_max is not None and m.initial_log_ratio_max < 1e-4
    assert m.initial_clip_fraction == 0.0
    assert m.behaviour_clip_fraction is not None and m.behaviour_clip_fraction > 0.0


def test_local_format_penalty_charges_only_the_slipped_step(kit):
    policy = kit.tiny_policy()
    data = grouped(kit, policy)
    learner = LocalLearner(policy, kit.small_config(levers={"format_penalty_advantage": 0.7}))
    batch = learner.prepare(data)
    for i, row in enumerate(batch.rows):
        tokens = batch.advantages[i][batch.response_mask[i]]
        if row.parse_error:
            assert torch.allclose(tokens, torch.full_like(tokens, -0.7))
        else:
            assert not torch.allclose(tokens, torch.full_like(tokens, -0.7))
    assert sum(r.parse_error for r in batch.rows) == 2


def test_whiten_by_task_gives_each_task_zero_mean_unit_variance(kit):
    policy = kit.tiny_policy()
    data = grouped(kit, policy)
    batch = LocalLearner(policy, kit.small_config(levers={"whiten_by": "task"})).prepare(data)
    for task in ("clock_alarm", "chrome_tabs"):
        rows = torch.tensor([r.task_id == task for r in batch.rows])
        values = batch.advantages[rows][batch.response_mask[rows]]
        assert abs(float(values.mean())) < 1e-5 and abs(float(values.std()) - 1.0) < 1e-3


def test_trajectory_weighting_gives_every_trajectory_the_same_total_weight(kit):
    policy = kit.tiny_policy()
    data = grouped(kit, policy)
    plain = LocalLearner(policy, kit.small_config()).prepare(data)
    weighted = LocalLearner(policy, kit.small_config(levers={"trajectory_weighting": True})).prepare(data)
    tokens: dict[str, float] = {}
    for i, row in enumerate(plain.rows):
        tokens[row.episode_id] = tokens.get(row.episode_id, 0.0) + float(plain.response_mask[i].sum())
    mean = sum(tokens.values()) / len(tokens)
    for i, row in enumerate(plain.rows):
        expected = plain.advantages[i] * mean / tokens[row.episode_id]
        assert torch.allclose(weighted.advantages[i], expected, atol=1e-6)


def test_shortest_path_adjustment_lowers_the_longer_success_of_a_group(kit):
    policy = kit.tiny_policy()
    data = grouped(kit, policy)
    batch = LocalLearner(policy, kit.small_config(algorithm="grpo", levers={"shortest_path_adjustment": True})).prepare(
        data
    )
    last = {r.episode_id: (i, r) for i, r in enumerate(batch.rows)}  # the last row of each episode
    for t in data:
        i, _ = last[t.episode_id]
        if len(t) == 3 and t.transitions[-1].reward > 0:  # success of length 3, group minimum 2
            assert math.isclose(float(batch.rewards[i]), 1.0 - 1 / 6, rel_tol=1e-6)
        else:
            assert math.isclose(float(batch.rewards[i]), t.transitions[-1].reward, rel_tol=1e-6)


def test_the_update_counts_the_successes_the_shortest_path_adjustment_cut(kit):
    policy = kit.tiny_policy()
    cut = sum(1 for t in grouped(kit, policy) if len(t) == 3 and t.transitions[-1].reward > 0)
    assert cut > 0  # successes of length 3 in groups whose shortest success has 2 steps
    on = kit.small_config(algorithm="grpo", levers={"shortest_path_adjustment": True})
    assert LocalLearner(policy, on).update(grouped(kit, policy)).shortest_path_adjusted == cut
    off = LocalLearner(policy, kit.small_config(algorithm="grpo")).update(grouped(kit, policy))
    assert off.shortest_path_adjusted is None


def test_the_update_reports_the_padding_of_its_training_micro_batches(kit):
    """One micro-batch of every row: the padding is each row's distance to the longest; one
    row per micro-batch: none (what sequence packing could remove, measured)."""
    policy = kit.tiny_policy()
    rng = np.random.default_rng(0)
    texts = ("tap", "tap the search box", "type a much longer text into the field", "go home")

    def rows() -> list:
        return [kit.canned_trajectory(policy, kit.prompt_for(0, rng), t, float(i % 2)) for i, t in enumerate(texts)]

    batch = LocalLearner(policy, kit.small_config()).prepare(rows())
    tokens = [i.input_ids.numel() + len(r.response_ids) for i, r in zip(batch.inputs, batch.rows, strict=True)]
    assert len(set(tokens)) == 4  # rows of different lengths, so one micro-batch of them pads
    whole = LocalLearner(policy, kit.small_config(mini_batch_size=4, speed={"micro_batch_size": 4}))
    assert math.isclose(whole.update(rows()).padding_share, 1 - sum(tokens) / (4 * max(tokens)))
    single = LocalLearner(policy, kit.small_config(mini_batch_size=4, speed={"micro_batch_size": 1}))
    assert single.update(rows()).padding_share == 0.0


def test_negative_pruning_mutes_all_failed_groups(kit):
    policy = kit.tiny_policy()
    data = grouped(kit, policy)
    for t in data[3:]:  # group g2 fails entirely
        t.verdicts = {k: Verdict(False) for k in t.verdicts}
    learner = LocalLearner(policy, kit.small_config(levers={"negative_pruning": True}))
    m = learner.update(data)
    assert m.pruned_trajectories == 3 and m.trajectories == 3


def test_gigpo_through_the_learner_groups_rows_by_the_screen_they_saw(kit):
    policy = kit.tiny_policy()
    data = grouped(kit, policy)
    batch = LocalLearner(policy, kit.small_config(algorithm="gigpo")).prepare(data)
    anchors = [r.anchor for r in batch.rows]
    assert all(len(a) == 16 for a in anchors)
    # sampled_trajectory draws each screen from its seed: the first screens differ per trajectory
    assert len(set(anchors)) > 1


def test_the_learner_imports_nothing_from_the_sampler():
    """Log-prob, masking and rope maths live in darwin.models.scoring, used by both sides."""
    import subprocess
    import sys

    code = (
        "import sys, darwin.learner, darwin.learner.local, darwin.learner.step_rows, darwin.learner.networks; "
        "print(sorted(m for m in sys.modules if m.startswith('darwin.policies')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
