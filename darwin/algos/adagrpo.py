"""MobileRL's AdaGRPO trajectory-level pieces: shortest-path reward adjustment, negative pruning.

MobileRL (Xu et al., 2025, "MobileRL: Online Agentic Reinforcement Learning for Mobile GUI
Agents") trains with GRPO plus three additions; the two that act on one group of rollouts are
here, as pure functions on one entry per trajectory (the third, positive replay, is
:class:`darwin.learner.replay.PositiveReplay`).

Shortest-path reward adjustment (SPA). Within a group (the rollouts of one task), a successful
trajectory longer than the group's shortest success is penalised in proportion to its extra
steps:

    r'_i = r_i - max(L_i - L_min, 0) / (2 L_i)      L_min = shortest successful length in group

Failures, and every trajectory of a group without a success, keep their reward. The penalty is
below 1/2, so a success still beats a failure. Source: ``check_uid_uuid_reward`` in MobileRL's
``training/verl/workers/reward_manager/step.py`` (xuyifan-0731/MobileRL-iclr), where ``L`` is the
number of step rows of the trajectory and a success is a trajectory with a reward of 1.

Negative pruning. Groups whose rollouts all failed carry no GRPO signal (every advantage is 0)
and are muted entirely; in the other groups at most ``max_negatives_per_positive`` failures per
success are kept, chosen at random, so the few successes on hard tasks are not drowned out.
Source: ``mute_uid_all_zero_reward`` in MobileRL's
``training/verl/workers/agentic/negative_sample_clip.py`` (ratio 2, random choice of the muted
negatives with ``torch.randperm``; here with a passed ``random.Random``).

Example:

    >>> import random
    >>> shortest_path_adjusted_rewards(
    ...     rewards=[1.0, 1.0, 0.0], lengths=[2, 4, 6], successes=[True, True, False],
    ...     group_ids=["task", "task", "task"])
    [1.0, 0.75, 0.0]
    >>> negative_pruning_keep(
    ...     successes=[True, False, False, False, False, False],
    ...     group_ids=["a", "a", "a", "a", "b", "b"], rng=random.Random(0)).count(True)
    3
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Sequence

__all__ = ["negative_pruning_keep", "shortest_path_adjusted_rewards"]


def shortest_path_adjusted_rewards(
    rewards: Sequence[float],
    lengths: Sequence[int],
    successes: Sequence[bool],
    group_ids: Sequence[Hashable],
) -> list[float]:
    """Penalise successful trajectories for the steps they took beyond the group's shortest success.

    Args:
        rewards: ``(num_trajectories,)`` reward of each trajectory.
        lengths: ``(num_trajectories,)`` number of steps of each trajectory (``>= 1``).
        successes: ``(num_trajectories,)`` whether each trajectory completed its task.
        group_ids: ``(num_trajectories,)`` group (task) of each trajectory.

    Returns:
        ``(num_trajectories,)`` rewards: ``r - max(L - L_min, 0) / (2 L)`` for a success of
        length ``L`` in a group whose shortest success has length ``L_min``; ``r`` otherwise.

    Raises:
        ValueError: on inputs of different lengths or a length that is not a positive integer.
    """
    num = _check_lengths(rewards=rewards, lengths=lengths, successes=successes, group_ids=group_ids)
    for i, length in enumerate(lengths):
        if isinstance(length, bool) or int(length) != length or length < 1:
            raise ValueError(
                f"lengths[{i}] is {length!r}; every trajectory length must be an integer >= 1 (its number of steps)"
            )
    shortest: dict[Hashable, int] = {}
    for i in range(num):
        if successes[i]:
            group = group_ids[i]
            shortest[group] = min(shortest.get(group, int(lengths[i])), int(lengths[i]))
    adjusted = []
    for i in range(num):
        reward = float(rewards[i])
        if successes[i]:
            length = int(lengths[i])
            reward -= max(length - shortest[group_ids[i]], 0) / (2 * length)
        adjusted.append(reward)
    return adjusted


def negative_pruning_keep(
    successes: Sequence[bool],
    group_ids: Sequence[Hashable],
    *,
    max_negatives_per_positive: float = 2.0,
    mute_all_negative_groups: bool = True,
    rng: random.Random,
) -> list[bool]:
    """Keep-mask over trajectories: mute all-failure groups, cap failures per success in the rest.

    Args:
        successes: ``(num_trajectories,)`` whether each trajectory succeeded (a positive).
        group_ids: ``(num_trajectories,)`` group (task) of each trajectory.
        max_negatives_per_positive: in a group with ``P >= 1`` positives, keep at most
            ``floor(max_negatives_per_positive * P)`` negatives (``math.inf``: keep all).
        mute_all_negative_groups: drop every trajectory of a group without a positive. When
            ``False`` such groups are kept whole (the cap needs at least one positive).
        rng: source of the random choice of the kept negatives. Groups are visited in order of
            first appearance and ``rng`` is drawn from only for groups that exceed the cap, once
            each (``rng.sample``), so the result is a function of the inputs and ``rng``'s state.

    Returns:
        ``(num_trajectories,)`` ``True`` for the trajectories to train on. Positives are always
        kept.

    Raises:
        ValueError: on inputs of different lengths or a negative / NaN
            ``max_negatives_per_positive``.
    """
    num = _check_lengths(successes=successes, group_ids=group_ids)
    if not max_negatives_per_positive >= 0.0:
        raise ValueError(
            f"max_negatives_per_positive must be >= 0 (math.inf for no cap), got {max_negatives_per_positive!r}"
        )
    members: dict[Hashable, list[int]] = {}
    for i in range(num):
        members.setdefault(group_ids[i], []).append(i)
    keep = [True] * num
    for rows in members.values():
        negatives = [i for i in rows if not successes[i]]
        num_positives = len(rows) - len(negatives)
        if num_positives == 0:
            if mute_all_negative_groups:
                for i in rows:
                    keep[i] = False
            continue
        if math.isinf(max_negatives_per_positive):
            continue
        cap = math.floor(max_negatives_per_positive * num_positives)
        if len(negatives) > cap:
            kept = set(rng.sample(negatives, cap))
            for i in negatives:
                keep[i] = i in kept
    return keep


def _check_lengths(**columns: Sequence) -> int:
    """Return the common length of ``columns``; raise a ``ValueError`` naming those that differ."""
    sizes = {name: len(values) for name, values in columns.items()}
    if len(set(sizes.values())) > 1:
        listed = ", ".join(f"{name}={size}" for name, size in sizes.items())
        raise ValueError(f"give one entry per trajectory in every argument; got lengths {listed}")
    return next(iter(sizes.values()))
