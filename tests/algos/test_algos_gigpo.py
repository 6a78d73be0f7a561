"""gigpo_advantages against a plain-Python loop reference and hand-computed values."""

from __future__ import annotations

import doctest
import importlib
import math
import random
import statistics

import pytest
import torch

from darwin.algos.gigpo import gigpo_advantages
from darwin.algos.grpo import grpo_advantages

EPS = 1e-6


# --------------------------------------------------------------------------------------------
# Reference: the GiGPO formulas written out with loops and dicts.
#   R_i = sum_t r_it;  A_ep = (R_i - mean_g R) / (std_g R + eps)  (or without the division),
#   a group of one trajectory: mean 0, std 1 (verl-agent / verl);
#   G_it = sum_{k >= t} gamma^(k - t) r_ik;  step group = rows of one group with equal anchors;
#   A_st = G_it - mean_s G  (or / (std_s G + eps)), 0 for a step group of one row;
#   A = A_ep + omega * A_st on the mask-1 tokens.
# --------------------------------------------------------------------------------------------


def reference_gigpo(
    rewards: list[float],
    mask: list[list[int]],
    trajectory_ids: list,
    step_indices: list[int],
    group_ids: list,
    anchor_ids: list,
    *,
    gamma: float,
    omega: float,
    step_norm: str,
    episode_norm_by_std: bool,
    eps: float = EPS,
) -> list[list[float]]:
    num_rows = len(rewards)
    rows_of_traj: dict = {}
    for i in range(num_rows):
        rows_of_traj.setdefault(trajectory_ids[i], []).append(i)
    for rows in rows_of_traj.values():
        rows.sort(key=lambda i: step_indices[i])

    score = {tid: sum(rewards[i] for i in rows) for tid, rows in rows_of_traj.items()}
    trajs_of_group: dict = {}
    for tid, rows in rows_of_traj.items():
        trajs_of_group.setdefault(group_ids[rows[0]], []).append(tid)
    episode_adv = {}
    for tids in trajs_of_group.values():
        values = [score[t] for t in tids]
        if len(values) == 1:
            mean, std = 0.0, 1.0
        else:
            mean, std = statistics.mean(values), statistics.stdev(values)
        for t in tids:
            centred = score[t] - mean
            episode_adv[t] = centred / (std + eps) if episode_norm_by_std else centred

    step_return = [0.0] * num_rows
    for rows in rows_of_traj.values():
        for j, i in enumerate(rows):
            step_return[i] = sum(gamma ** (k - j) * rewards[rows[k]] for k in range(j, len(rows)))

    rows_of_step_group: dict = {}
    for i in range(num_rows):
        rows_of_step_group.setdefault((group_ids[i], anchor_ids[i]), []).append(i)
    step_adv = [0.0] * num_rows
    for rows in rows_of_step_group.values():
        if len(rows) == 1:
            continue
        values = [step_return[i] for i in rows]
        mean, std = statistics.mean(values), statistics.stdev(values)
        for i in rows:
            centred = step_return[i] - mean
            step_adv[i] = centred / (std + eps) if step_norm == "mean_std_norm" else centred

    return [
        [(episode_adv[trajectory_ids[i]] + omega * step_adv[i]) if mask[i][k] else 0.0 for k in range(len(mask[i]))]
        for i in range(num_rows)
    ]


def random_batch(seed: int, max_len: int = 4) -> dict:
    """Several groups of 1-4 trajectories (1-5 steps), anchors from a small set, rows shuffled."""
    rng = random.Random(seed)
    rows = []
    for g in range(rng.randint(1, 4)):
        for j in range(rng.choice([1, 1, 2, 3, 4])):  # groups of one trajectory are common
            num_steps = rng.randint(1, 5)
            for t in range(num_steps):
                reward = rng.choice([0.0, 0.0, -0.1, 0.5]) if t < num_steps - 1 else rng.random()
                length = rng.randint(1, max_len)
                rows.append(
                    {
                        "reward": reward,
                        "mask": [1] * length + [0] * (max_len - length),
                        "tid": f"g{g}-t{j}",
                        "step": t,
                        "group": f"g{g}",
                        # the same few screens in every group: equal anchors across groups must
                        # not be pooled
                        "anchor": f"screen-{rng.randint(0, 3)}",
                    }
                )
    rng.shuffle(rows)
    return {
        "rewards": [r["reward"] for r in rows],
        "mask": [r["mask"] for r in rows],
        "trajectory_ids": [r["tid"] for r in rows],
        "step_indices": [r["step"] for r in rows],
        "group_ids": [r["group"] for r in rows],
        "anchor_ids": [r["anchor"] for r in rows],
    }


def run(batch: dict, **kwargs) -> torch.Tensor:
    return gigpo_advantages(
        torch.tensor(batch["rewards"], dtype=torch.float64),
        torch.tensor(batch["mask"]).bool(),
        batch["trajectory_ids"],
        batch["step_indices"],
        batch["group_ids"],
        batch["anchor_ids"],
        **kwargs,
    )


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("step_norm", ["mean_norm", "mean_std_norm"])
@pytest.mark.parametrize("episode_norm_by_std", [True, False])
def test_matches_loop_reference_on_random_batches(seed, step_norm, episode_norm_by_std):
    batch = random_batch(seed)
    gamma, omega = [(0.95, 1.0), (1.0, 0.5), (0.0, 2.0), (0.5, 1.0)][seed % 4]
    kwargs = {
        "gamma": gamma,
        "omega": omega,
        "step_norm": step_norm,
        "episode_norm_by_std": episode_norm_by_std,
    }
    adv = run(batch, **kwargs)
    expected = torch.tensor(reference_gigpo(**batch, **kwargs), dtype=torch.float32)
    assert adv.dtype == torch.float32
    torch.testing.assert_close(adv, expected, atol=2e-5, rtol=1e-5)


def test_random_batches_cover_singletons_and_repeated_anchors():
    """The random batches above do exercise every special case."""
    singleton_groups = singleton_step_groups = repeated_anchor_groups = 0
    for seed in range(10):
        b = random_batch(seed)
        trajs_per_group: dict = {}
        for tid, group in zip(b["trajectory_ids"], b["group_ids"], strict=True):
            trajs_per_group.setdefault(group, set()).add(tid)
        singleton_groups += sum(len(t) == 1 for t in trajs_per_group.values())
        sizes: dict = {}
        for key in zip(b["group_ids"], b["anchor_ids"], strict=True):
            sizes[key] = sizes.get(key, 0) + 1
        singleton_step_groups += sum(n == 1 for n in sizes.values())
        repeated_anchor_groups += sum(n > 1 for n in sizes.values())
    assert singleton_groups > 0 and singleton_step_groups > 0 and repeated_anchor_groups > 0


# --------------------------------------------------------------------------------------------
# By hand. Group "g": three trajectories; group "h": one trajectory. gamma = 0.5.
#   traj  step anchor  r    G (discounted return from the step)
#   A     0    home    0    0 + 0.5 * 0 + 0.25 * 1 = 0.25
#   A     1    list    0    0 + 0.5 * 1           = 0.5
#   A     2    done    1    1
#   B     0    home    0    0
#   B     1    menu    0    0
#   C     0    home    0    0 + 0.5 * 1 = 0.5
#   C     1    list    1    1
#   D     0    home    0.5  0.5        (group "h": its "home" is not g's "home")
# Episode scores in g: A 1, B 0, C 1; mean 2/3, sample std sqrt((1/9 + 4/9 + 1/9) / 2) = sqrt(1/3)
#   A_ep: A, C = (1/3) / sqrt(1/3) = 0.57735;  B = -(2/3) / sqrt(1/3) = -1.15470
#   D alone in h: mean 0, std 1 -> A_ep = 0.5 / (1 + eps)  (or 0.5 without std)
# Step groups in g:
#   home {A0 .25, B0 0, C0 .5}: mean .25 -> A_st 0, -.25, +.25; std .25 -> 0, -1, +1
#   list {A1 .5, C1 1}:          mean .75 -> -.25, +.25;        std sqrt(.125) = .353553 -> -/+ .707107
#   done {A2}, menu {B1}, h/home {D0}: one row each -> A_st = 0
# --------------------------------------------------------------------------------------------

HAND = {
    "rewards": [1.0, 0.0, 0.0, 0.5, 0.0, 0.0, 1.0, 0.0],
    "trajectory_ids": ["A", "B", "C", "D", "A", "B", "C", "A"],
    "step_indices": [2, 1, 0, 0, 0, 0, 1, 1],
    "group_ids": ["g", "g", "g", "h", "g", "g", "g", "g"],
    "anchor_ids": ["done", "menu", "home", "home", "home", "home", "list", "list"],
    "mask": [
        [1, 1, 0],
        [1, 0, 0],
        [1, 1, 1],
        [1, 0, 0],
        [1, 1, 0],
        [1, 1, 1],
        [1, 0, 0],
        [1, 1, 1],
    ],
}
#                  rows:   A2     B1     C0     D0     A0     B0     C1     A1


def expand(row_values: list[float]) -> torch.Tensor:
    mask = torch.tensor(HAND["mask"], dtype=torch.float32)
    return torch.tensor(row_values, dtype=torch.float32).unsqueeze(-1) * mask


def test_hand_computed_mean_norm_with_episode_std():
    adv = run(HAND, gamma=0.5)  # omega 1, mean_norm, episode_norm_by_std
    win = (1 / 3) / (math.sqrt(1 / 3) + EPS)  # 0.57735
    lose = -(2 / 3) / (math.sqrt(1 / 3) + EPS)  # -1.15470
    alone = 0.5 / (1 + EPS)
    expected = [win, lose, win + 0.25, alone, win + 0.0, lose - 0.25, win + 0.25, win - 0.25]
    torch.testing.assert_close(adv, expand(expected), atol=1e-6, rtol=0)
    torch.testing.assert_close(
        adv[:, 0],
        torch.tensor([0.57735, -1.15470, 0.82735, 0.5, 0.57735, -1.40470, 0.82735, 0.32735]),
        atol=1e-5,
        rtol=0,
    )


def test_hand_computed_mean_std_norm_without_episode_std():
    adv = run(HAND, gamma=0.5, omega=0.5, step_norm="mean_std_norm", episode_norm_by_std=False)
    home = 0.25 / (0.25 + EPS)  # 1.0
    lst = 0.25 / (math.sqrt(0.125) + EPS)  # 0.707107
    expected = [
        1 / 3,  # A2: singleton step group
        -2 / 3,  # B1
        1 / 3 + 0.5 * home,  # C0
        0.5,  # D0: R - 0
        1 / 3 + 0.5 * 0.0,  # A0
        -2 / 3 - 0.5 * home,  # B0
        1 / 3 + 0.5 * lst,  # C1
        1 / 3 - 0.5 * lst,  # A1
    ]
    torch.testing.assert_close(adv, expand(expected), atol=1e-6, rtol=0)
    torch.testing.assert_close(
        adv[:, 0],
        torch.tensor([0.33333, -0.66667, 0.83333, 0.5, 0.33333, -1.16667, 0.68689, -0.02022]),
        atol=1e-5,
        rtol=0,
    )


def test_omega_zero_is_per_trajectory_grpo():
    batch = random_batch(3)
    rewards = torch.tensor(batch["rewards"])
    mask = torch.tensor(batch["mask"])
    adv = run(batch, omega=0.0)
    grpo = grpo_advantages(rewards, mask, batch["trajectory_ids"], batch["group_ids"])
    torch.testing.assert_close(adv, grpo, atol=1e-6, rtol=0)


def test_equal_anchors_in_different_groups_are_not_pooled():
    # Two groups of one trajectory each, both starting on "home": pooling would give A_st != 0.
    adv = gigpo_advantages(
        torch.tensor([1.0, 0.0]),
        torch.ones(2, 1, dtype=torch.bool),
        ["a", "b"],
        [0, 0],
        ["g1", "g2"],
        ["home", "home"],
        episode_norm_by_std=False,
    )
    torch.testing.assert_close(adv, torch.tensor([[1.0], [0.0]]))


def test_revisited_state_in_one_trajectory_forms_a_step_group():
    # One trajectory comes back to "home": its steps 0 and 2 form a step group. The group holds
    # one trajectory, so A_ep = R - 0 = 1.
    adv = gigpo_advantages(
        torch.tensor([0.0, 0.0, 1.0]),
        torch.ones(3, 1),
        ["a", "a", "a"],
        [0, 1, 2],
        ["g", "g", "g"],
        ["home", "list", "home"],
        gamma=0.5,
        episode_norm_by_std=False,
    )
    # G = [0.25, 0.5, 1]; home {0.25, 1}: mean 0.625 -> -0.375, +0.375
    torch.testing.assert_close(adv[:, 0], torch.tensor([1 - 0.375, 1.0, 1 + 0.375]))


def test_shuffled_rows_give_the_same_advantages():
    batch = random_batch(7)
    adv = run(batch, step_norm="mean_std_norm")
    perm = list(range(len(batch["rewards"])))
    random.Random(1).shuffle(perm)
    shuffled = {key: [values[i] for i in perm] for key, values in batch.items()}
    torch.testing.assert_close(run(shuffled, step_norm="mean_std_norm"), adv[perm], atol=1e-6, rtol=0)


def test_padding_is_zero_dtype_and_tensor_ids():
    adv = gigpo_advantages(
        torch.tensor([1, 0]),  # integer rewards
        torch.tensor([[1, 0, 0], [1, 1, 0]]),
        torch.tensor([10, 11]),
        torch.tensor([0, 0]),
        torch.tensor([5, 5]),
        torch.tensor([7, 7]),
    )
    assert adv.dtype == torch.float32
    a = 0.5 / (math.sqrt(0.5) + EPS)
    step = 0.5  # returns {1, 0}, mean 0.5
    torch.testing.assert_close(
        adv, torch.tensor([[a + step, 0.0, 0.0], [-a - step, -a - step, 0.0]]), atol=1e-6, rtol=0
    )


def test_empty_batch():
    adv = gigpo_advantages(torch.zeros(0), torch.zeros(0, 3, dtype=torch.bool), [], [], [], [])
    assert adv.shape == (0, 3) and adv.dtype == torch.float32


def test_module_doctest():
    module = importlib.import_module("darwin.algos.gigpo")
    assert doctest.testmod(module).failed == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"step_indices": [0, 2]}, r"step indices \[0, 2\]; the 2 rows .* steps 0\.\.1"),
        ({"step_indices": [0, 0]}, r"step indices \[0, 0\]"),
        ({"step_indices": [1, 2]}, r"step indices \[1, 2\]"),
        ({"step_indices": [0]}, "step_indices has 1 entries but there are 2 rows"),
        ({"group_ids": ["g1", "g2"]}, "group_ids must be the same on every row"),
        ({"anchor_ids": ["s"]}, "anchor_ids has 1 entries but there are 2 rows"),
        ({"trajectory_ids": ["a", "a", "a"]}, "trajectory_ids has 3 entries"),
        ({"response_mask": torch.ones(3, 2)}, "response_mask must be"),
        ({"rewards": torch.zeros(2, 1)}, "rewards must be 1-D"),
        ({"step_norm": "std"}, "step_norm must be one of"),
        ({"gamma": 1.5}, r"gamma must lie in \[0, 1\]"),
        ({"eps": -1.0}, "eps must be >= 0"),
    ],
)
def test_errors_name_the_problem(kwargs, message):
    args = {
        "rewards": torch.zeros(2),
        "response_mask": torch.ones(2, 2, dtype=torch.bool),
        "trajectory_ids": ["a", "a"],
        "step_indices": [0, 1],
        "group_ids": ["g", "g"],
        "anchor_ids": ["s0", "s1"],
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        gigpo_advantages(**args)
