"""GRPO advantages: hand-computed group normalisation, per-trajectory vs per-step weighting."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from darwin.algos.grpo import group_normalize, grpo_advantages

# Group "task-1" has two trajectories:
#   "long"  : 3 steps, step rewards 0, 0, 1  -> score 1
#   "short" : 1 step,  step reward 0         -> score 0
# Per trajectory: scores {1, 0}, mean 0.5, sample std sqrt(0.5) -> A = +-0.5 / sqrt(0.5) = +-0.7071
# Per step row:   scores {1, 1, 1, 0}, mean 0.75, sample std sqrt(0.75 / 3) = 0.5
#                 -> A_long = 0.25 / 0.5 = 0.5, A_short = -0.75 / 0.5 = -1.5
REWARDS = torch.tensor([0.0, 1.0, 0.0, 0.0])
MASK = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0]])
TIDS = ["long", "long", "short", "long"]  # rows shuffled: step order does not matter here
GROUPS = ["task-1"] * 4
EPS = 1e-6


def test_per_trajectory_weighting_by_hand():
    adv = grpo_advantages(REWARDS, MASK, TIDS, GROUPS)
    a = 0.5 / (math.sqrt(0.5) + EPS)
    expected = torch.tensor([[a, a, 0], [a, 0, 0], [-a, -a, -a], [a, a, 0]])
    torch.testing.assert_close(adv, expected, atol=1e-6, rtol=0)


def test_per_step_weighting_by_hand():
    adv = grpo_advantages(REWARDS, MASK, TIDS, GROUPS, weighting="step")
    hi, lo = 0.25 / (0.5 + EPS), -0.75 / (0.5 + EPS)
    expected = torch.tensor([[hi, hi, 0], [hi, 0, 0], [lo, lo, lo], [hi, hi, 0]])
    torch.testing.assert_close(adv, expected, atol=1e-6, rtol=0)


def test_without_std_normalisation():
    adv_t = grpo_advantages(REWARDS, MASK, TIDS, GROUPS, norm_by_std=False)
    adv_s = grpo_advantages(REWARDS, MASK, TIDS, GROUPS, norm_by_std=False, weighting="step")
    torch.testing.assert_close(adv_t[:, 0], torch.tensor([0.5, 0.5, -0.5, 0.5]))
    torch.testing.assert_close(adv_s[:, 0], torch.tensor([0.25, 0.25, -0.75, 0.25]))


def test_score_is_sum_of_step_rewards_and_groups_are_separate():
    # group g1: trajectory a (format penalty -0.1 then success 1 -> 0.9), b (0), c (0.3)
    # group g2: d (1), e (1): identical scores -> advantage 0
    # group g3: f alone -> verl's singleton rule: mean 0, std 1 -> A = 0.4 / (1 + eps)
    rewards = torch.tensor([-0.1, 1.0, 0.0, 0.3, 1.0, 1.0, 0.4])
    tids = ["a", "a", "b", "c", "d", "e", "f"]
    groups = ["g1", "g1", "g1", "g1", "g2", "g2", "g3"]
    adv = grpo_advantages(rewards, torch.ones(7, 2), tids, groups)
    mean = (0.9 + 0.0 + 0.3) / 3
    std = math.sqrt(((0.9 - mean) ** 2 + mean**2 + (0.3 - mean) ** 2) / 2)
    expected = torch.tensor(
        [(0.9 - mean) / (std + EPS)] * 2 + [-mean / (std + EPS), (0.3 - mean) / (std + EPS), 0.0, 0.0, 0.4 / (1 + EPS)]
    )
    torch.testing.assert_close(adv[:, 0], expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(adv[:, 1], expected, atol=1e-6, rtol=0)


def test_group_normalize_on_trajectory_scores():
    scores = torch.tensor([1.0, 0.0, 0.0, 2.0, 4.0])
    out = group_normalize(scores, np.array(["x", "x", "x", "y", "y"], dtype=object))
    x_mean, x_std = 1 / 3, math.sqrt(((2 / 3) ** 2 + 2 * (1 / 3) ** 2) / 2)
    y_std = math.sqrt(2.0)
    expected = torch.tensor(
        [
            (1 - x_mean) / (x_std + EPS),
            -x_mean / (x_std + EPS),
            -x_mean / (x_std + EPS),
            -1 / (y_std + EPS),
            1 / (y_std + EPS),
        ]
    )
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=0)


def test_integer_rewards_tensor_ids_and_dtype():
    adv = grpo_advantages(torch.tensor([1, 0]), torch.ones(2, 1), torch.tensor([10, 11]), torch.tensor([0, 0]))
    assert adv.dtype == torch.float32
    a = 0.5 / (math.sqrt(0.5) + EPS)
    torch.testing.assert_close(adv, torch.tensor([[a], [-a]]))
    adv64 = grpo_advantages(torch.tensor([1.0, 0.0], dtype=torch.float64), torch.ones(2, 1), [0, 1], [0, 0])
    assert adv64.dtype == torch.float64


def test_shuffled_rows_give_the_same_advantages():
    g = torch.Generator().manual_seed(0)
    rewards = torch.rand(12, generator=g)
    tids = [i // 3 for i in range(12)]
    groups = [i // 6 for i in range(12)]
    mask = (torch.rand(12, 5, generator=g) < 0.7).long()
    adv = grpo_advantages(rewards, mask, tids, groups)
    perm = torch.randperm(12, generator=g)
    adv_p = grpo_advantages(rewards[perm], mask[perm], [tids[i] for i in perm], [groups[i] for i in perm])
    torch.testing.assert_close(adv_p, adv[perm], atol=1e-6, rtol=0)
    assert bool((adv[mask == 0] == 0).all())


def test_errors():
    with pytest.raises(ValueError, match="group_ids must be the same on every row"):
        grpo_advantages(torch.zeros(2), torch.ones(2, 1), ["a", "a"], ["g1", "g2"])
    with pytest.raises(ValueError, match="weighting"):
        grpo_advantages(torch.zeros(2), torch.ones(2, 1), ["a", "a"], ["g", "g"], weighting="token")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="response_mask"):
        grpo_advantages(torch.zeros(2), torch.ones(3, 1), ["a", "a"], ["g", "g"])
    with pytest.raises(ValueError, match="group_ids has 1 entries"):
        grpo_advantages(torch.zeros(2), torch.ones(2, 1), ["a", "a"], ["g"])
