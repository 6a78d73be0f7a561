"""GRPO advantages for multi-turn trajectories: group-normalised trajectory scores on every token.

A *group* is the ``k`` rollouts of the same task (same ``group_id``). Each trajectory's score
``R_i`` is normalised within its group,

    A_i = (R_i - mean_g R) / (std_g R + epsilon)        (norm_by_std=True, GRPO)
    A_i =  R_i - mean_g R                               (norm_by_std=False, Dr.GRPO)

and ``A_i`` is given to every response token of every step of trajectory ``i``. The statistics
come from verl's ``compute_grpo_outcome_advantage`` (sample std, ``n - 1``; a group of one
trajectory gets mean 0 and std 1, i.e. ``A = R / (1 + epsilon)``).

Weighting. verl computes the group statistics over the rows it is given. Fed step rows, a
trajectory of 30 steps counts 30 times and one of 3 steps counts 3 times, so the baseline drifts
towards the long trajectories' score (and long failures, which are common, pull the mean down).
``weighting="trajectory"`` (default) counts each trajectory once; ``weighting="step"`` reproduces
verl on step rows. See ``docs/algorithms.md``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

from darwin.algos._ids import IdArray, as_id_list, check_constant_per_code, factorize

__all__ = ["group_normalize", "grpo_advantages"]


def group_normalize(
    scores: torch.Tensor,
    group_ids: IdArray,
    *,
    epsilon: float = 1e-6,
    norm_by_std: bool = True,
) -> torch.Tensor:
    """Normalise scores within groups (verl's GRPO outcome advantage, one entry per score).

    Args:
        scores: ``(n,)`` one score per entry (a trajectory, or a step row for step weighting).
        group_ids: ``(n,)`` group of each entry (the task / prompt uid).
        epsilon: added to the group std before dividing.
        norm_by_std: divide by the group std (GRPO); ``False`` only subtracts the mean (Dr.GRPO).

    Returns:
        ``(n,)`` normalised scores, dtype of ``scores`` (float32 if integer).
    """
    if scores.dim() != 1:
        raise ValueError(f"scores must be 1-D (n,), got {tuple(scores.shape)}")
    n = scores.shape[0]
    groups = as_id_list(group_ids, n, "group_ids")
    dtype = scores.dtype if scores.is_floating_point() else torch.get_default_dtype()
    if n == 0:
        return torch.zeros(0, dtype=dtype, device=scores.device)
    index = np.empty(n, dtype=object)
    index[:] = groups
    advantages, _ = compute_grpo_outcome_advantage(
        token_level_rewards=scores.detach().to(dtype).unsqueeze(-1),  # (n, 1)
        response_mask=torch.ones(n, 1, dtype=dtype, device=scores.device),
        index=index,
        epsilon=epsilon,
        norm_adv_by_std_in_grpo=norm_by_std,
    )
    return advantages.squeeze(-1)


def grpo_advantages(
    rewards: torch.Tensor,
    response_mask: torch.Tensor,
    trajectory_ids: IdArray,
    group_ids: IdArray,
    *,
    epsilon: float = 1e-6,
    norm_by_std: bool = True,
    weighting: Literal["trajectory", "step"] = "trajectory",
) -> torch.Tensor:
    """Trajectory-level GRPO advantages broadcast to every token of every step row.

    Args:
        rewards: ``(num_steps,)`` reward of each step row. A trajectory's score is the sum of its
            step rewards (its undiscounted return); for a pure outcome reward put the verdict
            on the last step and 0 elsewhere.
        response_mask: ``(num_steps, max_response_len)`` 1 for response tokens, 0 for padding.
        trajectory_ids: ``(num_steps,)`` trajectory of each row; rows may be in any order.
        group_ids: ``(num_steps,)`` group (task uid) of each row; the same on every row of a
            trajectory (checked).
        epsilon: added to the group std before dividing.
        norm_by_std: divide by the group std (GRPO) or only subtract the mean (Dr.GRPO).
        weighting: ``"trajectory"`` (default): each trajectory counts once in its group's mean
            and std, whatever its number of steps. ``"step"``: every step row counts once, so
            long trajectories weigh more (what verl does when fed step rows).

    Returns:
        ``(num_steps, max_response_len)`` advantages, ``A_i`` on the mask-1 tokens of every row
        of trajectory ``i`` and 0 on padding; dtype of ``rewards`` (float32 if integer).
    """
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be (num_steps,), got {tuple(rewards.shape)}")
    num_steps = rewards.shape[0]
    if response_mask.dim() != 2 or response_mask.shape[0] != num_steps:
        raise ValueError(
            f"response_mask must be (num_steps={num_steps}, max_response_len), got {tuple(response_mask.shape)}"
        )
    if weighting not in ("trajectory", "step"):
        raise ValueError(f"weighting must be 'trajectory' or 'step', got {weighting!r}")
    device = rewards.device
    dtype = rewards.dtype if rewards.is_floating_point() else torch.get_default_dtype()
    traj_list = as_id_list(trajectory_ids, num_steps, "trajectory_ids")
    group_list = as_id_list(group_ids, num_steps, "group_ids")
    if num_steps == 0:
        return torch.zeros(response_mask.shape, dtype=dtype, device=device)

    traj_code, traj_uniques = factorize(traj_list, device)
    traj_group = check_constant_per_code(traj_code, group_list, traj_uniques, "group_ids", "trajectory")
    # R_i = sum of the step rewards of trajectory i: (num_traj,)
    traj_scores = torch.zeros(len(traj_uniques), dtype=torch.float64, device=device)
    traj_scores.index_add_(0, traj_code, rewards.detach().to(torch.float64))

    if weighting == "trajectory":
        traj_adv = group_normalize(traj_scores, traj_group, epsilon=epsilon, norm_by_std=norm_by_std)
        row_adv = traj_adv[traj_code]  # (num_steps,)
    else:
        row_adv = group_normalize(traj_scores[traj_code], group_list, epsilon=epsilon, norm_by_std=norm_by_std)
    return (row_adv.unsqueeze(-1) * response_mask.to(device=device, dtype=torch.float64)).to(dtype)
