"""Sibling advantages: an exact state-level baseline from branching rollouts.

Branching rollouts (:class:`darwin.rollout.Branching`) put a SimPhone back in a state an
episode acted from and play more continuations from there. The episode's step and each
continuation's first step then acted from *exactly* the same state (one fork id); their
discounted returns are samples of ``Q(s, a_i)`` for the same ``s``, so their mean is a
Monte-Carlo ``V(s)`` with no critic and no screen hashing (GiGPO's anchor groups only
approximate it):

    G_{i}   = sum_{k >= t} gamma^(k - t) r_{i,k}        (return of row i from its step t)
    A_sib(i)= G_i - mean_{j in f(i)} G_j                 (rows sharing i's fork id f(i))

Rows whose fork id is empty, or shared by no other row, get no sibling advantage (the mask
is False there): the estimator keeps its own (the ``gae`` estimator's, :mod:`darwin.algos.estimators`).
The mean includes the row itself, as GiGPO's step groups do.

Example: an episode failed from its step 1; two continuations from that state, one won:

    >>> import torch
    >>> adv, forked = sibling_advantages(
    ...     rewards=torch.tensor([0.0, 0.0, 0.0, 1.0, 0.0]),
    ...     trajectory_ids=["root", "root", "root", "c1", "c2"], step_indices=[0, 1, 2, 0, 0],
    ...     fork_ids=["", "root@1", "", "root@1", "root@1"], gamma=1.0)
    >>> [round(a, 4) for a in adv.tolist()], forked.tolist()
    ([0.0, -0.3333, 0.0, 0.6667, -0.3333], [False, True, False, True, True])
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

from darwin.algos._ids import IdArray
from darwin.algos.gigpo import discounted_returns

__all__ = ["sibling_advantages"]


def sibling_advantages(
    rewards: torch.Tensor,
    trajectory_ids: IdArray,
    step_indices: torch.Tensor | Sequence[int],
    fork_ids: Sequence[Hashable],
    *,
    gamma: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(advantages, forked)``, both ``(N,)``: each row's return minus the mean return of the
    rows sharing its fork id, and whether the row has such siblings.

    Args:
        rewards: ``(N,)`` step rewards.
        trajectory_ids: ``(N,)`` episode of each row.
        step_indices: ``(N,)`` index of each row in its episode (``0..n-1`` per episode).
        fork_ids: ``(N,)`` the exact phone state each row acted from when other rows acted
            from it too (``""``: none).
        gamma: per-step discount of the returns, in ``[0, 1]``.

    Returns:
        ``advantages`` ``(N,)`` float32 (0 where ``forked`` is False) and ``forked`` ``(N,)`` bool.
    """
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must lie in [0, 1], got {gamma}")
    num_rows = rewards.shape[0] if rewards.dim() == 1 else -1
    forks = list(fork_ids)
    if len(forks) != num_rows:
        raise ValueError(f"fork_ids has {len(forks)} entries for rewards of shape {tuple(rewards.shape)}")
    returns = discounted_returns(rewards, trajectory_ids, step_indices, gamma)  # (N,) float64
    members: dict[Hashable, list[int]] = {}
    for row, fork in enumerate(forks):
        if fork != "":
            members.setdefault(fork, []).append(row)
    advantages = torch.zeros(num_rows, dtype=torch.float64, device=rewards.device)
    forked = torch.zeros(num_rows, dtype=torch.bool, device=rewards.device)
    for rows in members.values():
        if len(rows) < 2:
            continue
        index = torch.tensor(rows, device=rewards.device)
        group = returns[index]
        advantages[index] = group - group.mean()
        forked[index] = True
    return advantages.to(torch.float32), forked
