"""GiGPO advantages: episode-level GRPO plus step-level groups of identical observations.

GiGPO (Feng et al., 2025, "Group-in-Group Policy Optimization for LLM Agent Training") adds a
finer credit signal to GRPO without a critic. Inside a group (the ``k`` rollouts of one task from
the same start), steps at which the agent saw the *same* observation (equal ``anchor_ids``) form
a *step group*; their discounted returns are compared with each other:

    R_i      = sum_t r_{i,t}                                     (episode score of trajectory i)
    A_ep(i)  = (R_i - mean_g R) / (std_g R + eps)                (episode_norm_by_std=True)
             =  R_i - mean_g R                                   (episode_norm_by_std=False)
    G_{i,t}  = sum_{k >= t} gamma^(k - t) r_{i,k}                (discounted return from step t)
    A_st(i,t)= G_{i,t} - mean_s G                                (step_norm="mean_norm")
             = (G_{i,t} - mean_s G) / (std_s G + eps)            (step_norm="mean_std_norm")
    A(i,t)   = A_ep(i) + omega * A_st(i,t)

where ``g`` is the row's group (each trajectory counted once) and ``s`` its step group (every
step row counted once). ``A(i, t)`` goes to every valid response token of row ``(i, t)``.

Semantics follow verl-agent's ``gigpo/core_gigpo.py`` (``compute_step_discounted_returns``,
``episode_norm_reward``, ``build_step_group``, ``step_norm_reward``; read in zhangyun04/verl-agent):

- std is the sample std (``n - 1``), as ``torch.std``;
- a group holding one trajectory gets mean 0 and std 1, so ``A_ep = R`` (``R / (1 + eps)`` with
  std normalisation); this is also verl's GRPO rule, and :func:`darwin.algos.grpo.group_normalize`
  computes it;
- a step group of one row has mean equal to its own return, so ``A_st = 0`` and the row keeps
  its episode advantage only;
- step groups never cross groups: anchors are compared only within one ``group_id``; a state
  revisited inside one trajectory joins the same step group.

Two differences from verl-agent: verl-agent's default (``compute_mean_std_cross_all_data=True``)
computes the episode statistics over step rows, so long trajectories count once per step; here
each trajectory counts once, as in the GiGPO paper. And verl-agent ties the episode and step std
normalisation to one ``mode``; here they are two arguments (``episode_norm_by_std`` and
``step_norm``).

Example (one task, two trajectories that both start on screen "home"):

    >>> import torch
    >>> adv = gigpo_advantages(
    ...     rewards=torch.tensor([0.0, 1.0, 0.0]),
    ...     response_mask=torch.ones(3, 2, dtype=torch.bool),
    ...     trajectory_ids=["win", "win", "lose"], step_indices=[0, 1, 0],
    ...     group_ids=["task", "task", "task"], anchor_ids=["home", "search", "home"],
    ...     gamma=0.5, episode_norm_by_std=False)
    >>> adv[:, 0]
    tensor([ 0.7500,  0.5000, -0.7500])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch

from darwin.algos._ids import IdArray, as_id_list, check_constant_per_code, factorize
from darwin.algos.grpo import group_normalize

__all__ = ["discounted_returns", "gigpo_advantages"]

STEP_NORMS = ("mean_norm", "mean_std_norm")


def gigpo_advantages(
    rewards: torch.Tensor,
    response_mask: torch.Tensor,
    trajectory_ids: IdArray,
    step_indices: torch.Tensor | Sequence[int],
    group_ids: IdArray,
    anchor_ids: IdArray,
    *,
    gamma: float = 0.95,
    omega: float = 1.0,
    step_norm: Literal["mean_norm", "mean_std_norm"] = "mean_norm",
    episode_norm_by_std: bool = True,
    eps: float = 1e-6,
) -> torch.Tensor:
    """GiGPO advantages ``A_episode + omega * A_step`` broadcast over each step row's tokens.

    Args:
        rewards: ``(N,)`` reward of each step row. A trajectory's episode score is the sum of
            its step rewards; for a pure outcome reward put the verdict on the last step.
        response_mask: ``(N, R)`` 1 / True for response tokens, 0 for padding (bool, int or
            float).
        trajectory_ids: ``(N,)`` trajectory (episode) of each row.
        step_indices: ``(N,)`` step index ``t`` of each row inside its trajectory. A trajectory
            of ``n`` rows must have exactly the steps ``0..n-1``; rows may come in any order.
        group_ids: ``(N,)`` group of each row (same task from the same start); the same on every
            row of a trajectory (checked).
        anchor_ids: ``(N,)`` hashable id of the observation the agent saw at that step (e.g. a
            hash of the screenshot or UI tree). Rows of one group with equal anchors form a step
            group.
        gamma: discount of the step returns ``G_t = sum_k gamma^(k - t) r_k``, in ``[0, 1]``.
        omega: weight of the step advantage.
        step_norm: ``"mean_norm"`` subtracts the step group's mean return; ``"mean_std_norm"``
            also divides by the step group's std + ``eps``.
        episode_norm_by_std: divide the episode advantage by the group's std + ``eps`` (GRPO);
            ``False`` only subtracts the group mean (Dr.GRPO).
        eps: added to every std before dividing.

    Returns:
        ``(N, R)`` float32 advantages: ``A(i, t)`` on the valid tokens of row ``(i, t)``, 0 on
        padding.

    Raises:
        ValueError: on shapes or id lists that do not match ``N``, a trajectory whose step
            indices are not ``0..n-1``, a trajectory spread over several groups, or an unknown
            ``step_norm``.
    """
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D (N,), got shape {tuple(rewards.shape)}")
    num_rows = rewards.shape[0]
    if response_mask.dim() != 2 or response_mask.shape[0] != num_rows:
        raise ValueError(
            f"response_mask must be (N={num_rows}, R), one row per reward, got {tuple(response_mask.shape)}"
        )
    if step_norm not in STEP_NORMS:
        raise ValueError(f"step_norm must be one of {STEP_NORMS}, got {step_norm!r}")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must lie in [0, 1], got {gamma}")
    if not eps >= 0.0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    traj_list = as_id_list(trajectory_ids, num_rows, "trajectory_ids")
    group_list = as_id_list(group_ids, num_rows, "group_ids")
    anchor_list = as_id_list(anchor_ids, num_rows, "anchor_ids")
    steps = torch.as_tensor(step_indices, dtype=torch.long).reshape(-1).cpu()
    if steps.shape != (num_rows,):
        raise ValueError(
            f"step_indices has {steps.numel()} entries but there are {num_rows} rows; give one step index per row"
        )
    device = rewards.device
    mask = response_mask.to(device=device).bool().to(torch.float64)  # (N, R) 1 on valid tokens
    if num_rows == 0:
        return torch.zeros(tuple(response_mask.shape), dtype=torch.float32, device=device)

    work = torch.float64
    traj_code, traj_uniques = factorize(traj_list, device)
    traj_group = check_constant_per_code(traj_code, group_list, traj_uniques, "group_ids", "trajectory")
    time_order = _time_order(traj_code.cpu().numpy(), steps.numpy(), traj_uniques)

    # Episode advantage: one score per trajectory, normalised within its group (verl's rule).
    row_rewards = rewards.detach().to(device=device, dtype=work)
    traj_scores = torch.zeros(len(traj_uniques), dtype=work, device=device)
    traj_scores.index_add_(0, traj_code, row_rewards)
    traj_adv = group_normalize(traj_scores, traj_group, epsilon=eps, norm_by_std=episode_norm_by_std)
    episode_adv = traj_adv[traj_code]  # (N,)

    returns = _discounted(row_rewards, traj_code, time_order, gamma)  # (N,)

    # Step advantage: returns normalised within (group, anchor) step groups.
    step_code, step_uniques = factorize(list(zip(group_list, anchor_list, strict=True)), device)
    num_step_groups = len(step_uniques)
    counts = torch.bincount(step_code, minlength=num_step_groups).to(work)  # (S,)
    sums = torch.zeros(num_step_groups, dtype=work, device=device).index_add_(0, step_code, returns)
    centred = returns - (sums / counts)[step_code]  # (N,)
    if step_norm == "mean_std_norm":
        squares = torch.zeros(num_step_groups, dtype=work, device=device)
        squares.index_add_(0, step_code, centred * centred)
        std = torch.sqrt(squares / (counts - 1).clamp(min=1))  # sample std; singleton: 0
        centred = centred / (std[step_code] + eps)
    step_adv = torch.where(counts[step_code] > 1, centred, torch.zeros_like(centred))

    row_adv = episode_adv + omega * step_adv  # (N,)
    return (row_adv.unsqueeze(-1) * mask).to(torch.float32)


def discounted_returns(
    rewards: torch.Tensor, trajectory_ids: IdArray, step_indices: torch.Tensor | Sequence[int], gamma: float
) -> torch.Tensor:
    """``(N,)`` float64 discounted return of every step row inside its own trajectory,
    ``G_t = sum_{k >= t} gamma^(k - t) r_k``; rows may come in any order (``step_indices``
    orders them; each trajectory's steps must be ``0..n-1``).

        >>> discounted_returns(torch.tensor([0.0, 1.0, 2.0]), ["a", "a", "b"], [0, 1, 0], 0.5).tolist()
        [0.5, 1.0, 2.0]
    """
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D (N,), got shape {tuple(rewards.shape)}")
    num_rows = rewards.shape[0]
    traj_list = as_id_list(trajectory_ids, num_rows, "trajectory_ids")
    steps = torch.as_tensor(step_indices, dtype=torch.long).reshape(-1).cpu()
    if steps.shape != (num_rows,):
        raise ValueError(f"step_indices has {steps.numel()} entries for {num_rows} rows; give one per row")
    if num_rows == 0:
        return torch.zeros(0, dtype=torch.float64, device=rewards.device)
    traj_code, traj_uniques = factorize(traj_list, rewards.device)
    time_order = _time_order(traj_code.cpu().numpy(), steps.numpy(), traj_uniques)
    return _discounted(rewards.detach().to(torch.float64), traj_code, time_order, gamma)


def _discounted(rewards: torch.Tensor, traj_code: torch.Tensor, time_order: list[int], gamma: float) -> torch.Tensor:
    """``G_t = r_t + gamma * G_{t+1}``, backwards along each trajectory in ``time_order``."""
    reward_values = rewards.cpu().tolist()
    code_values = traj_code.cpu().tolist()
    step_returns = [0.0] * len(reward_values)
    running, next_code = 0.0, None
    for row in reversed(time_order):
        if code_values[row] != next_code:  # last step of a trajectory
            running = 0.0
        running = reward_values[row] + gamma * running
        step_returns[row] = running
        next_code = code_values[row]
    return torch.tensor(step_returns, dtype=torch.float64, device=rewards.device)


def _time_order(codes: np.ndarray, steps: np.ndarray, traj_uniques: list) -> list[int]:
    """Rows sorted by (trajectory, step); checks each trajectory's steps are exactly ``0..n-1``."""
    order = np.lexsort((steps, codes))  # primary key: trajectory, then step
    sorted_codes, sorted_steps = codes[order], steps[order]
    positions = np.arange(len(order))
    starts = np.ones(len(order), dtype=bool)
    starts[1:] = sorted_codes[1:] != sorted_codes[:-1]
    first_row = np.maximum.accumulate(np.where(starts, positions, 0))  # of each row's trajectory
    expected = positions - first_row  # 0, 1, ..., n-1 within each trajectory
    bad = np.nonzero(sorted_steps != expected)[0]
    if bad.size:
        i = int(bad[0])
        code = sorted_codes[i]
        found = sorted_steps[sorted_codes == code].tolist()
        raise ValueError(
            f"trajectory {traj_uniques[code]!r} has step indices {found}; the {len(found)} rows of "
            f"a trajectory must carry the steps 0..{len(found) - 1}, each once (no gap, duplicate "
            "or offset); pass each row's position in its episode"
        )
    return order.tolist()
