"""What one update trains on (:class:`UpdateBatch`) and the pure steps that turn scored step
rows into its advantages.

:meth:`LocalLearner.prepare <darwin.learner.local.LocalLearner.prepare>` scores the step rows
with the learner's models (old values, reference and proximal log-probs) and then calls
these functions, in this order: :func:`shaped_rewards` (the only place rewards are shaped:
the parse-error penalty, then MobileRL's shortest-path adjustment), :func:`estimate_advantages`
(the registered estimator, then per-task whitening, the format penalty and equal trajectory
weights) and :func:`behaviour_correction` (decoupled
PPO's behaviour weight). :func:`mean_advantage_per_trajectory` is positive replay's
insertion score. The maths is in :mod:`darwin.algos`.

    >>> import torch
    >>> mask = torch.tensor([[True, True], [True, False]])
    >>> old = torch.zeros(2, 2)
    >>> behaviour = torch.tensor([[0.0, -1.0], [0.0, 0.0]])
    >>> adv, clipped = behaviour_correction(torch.ones(2, 2), old, behaviour, mask,
    ...                                     clip_low=0.2, clip_high=0.2, weight_cap=None)
    >>> clipped  # one of the three tokens moved outside the clip window
    0.3333333333333333
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch

from darwin.algos.adagrpo import negative_pruning_keep, shortest_path_adjusted_rewards
from darwin.algos.estimators import AdvantageInputs, EstimatorConfig, get_estimator
from darwin.algos.weighting import trajectory_weights, whiten_within
from darwin.learner.config import LearnerConfig
from darwin.learner.step_rows import RowInputs, StepRow
from darwin.types import StepScore, Trajectory

logger = logging.getLogger(__name__)

__all__ = [
    "UpdateBatch",
    "behaviour_correction",
    "estimate_advantages",
    "group_of",
    "mean_advantage_per_trajectory",
    "outside_clip_window",
    "prune_negatives",
    "shaped_rewards",
    "shortest_path_adjusted",
    "shortest_path_deltas",
    "step_scores",
]


@dataclass(frozen=True)
class UpdateBatch:
    """Everything one update trains on (:meth:`LocalLearner.prepare`); ``N`` step rows,
    ``R`` the longest response. All tensors are on the learner's device.

    Attributes:
        rows: the ``N`` step rows, grouped by trajectory in time order.
        inputs: each row's prompt inputs (unpadded; :func:`darwin.learner.step_rows.collate`).
        critic_inputs: the critic's, when they differ from ``inputs`` (its tower frozen while
            the actor's trains: the base model's features in place of the pixels), else ``None``.
        rewards: ``(N,)`` step rewards.
        response_mask: ``(N, R)`` bool.
        old_logprobs: ``(N, R)`` behaviour log-probs (``Generation.response_logprobs``), 0 on padding.
        values: ``(N, R)`` critic values before the update, or ``None`` (GRPO).
        ref_logprobs: ``(N, R)`` reference-policy log-probs, or ``None`` (``ppo.kl_coef == 0``).
        advantages: ``(N, R)`` (whitened GAE, or GRPO), 0 on padding.
        returns: ``(N, R)`` value targets, or ``None`` (GRPO).
        trajectory_ids: ``(N,)`` episode ids; ``step_indices``: ``(N,)``; ``truncated``: ``(N,)`` bool.
        lam: the GAE lambda used (warm-up lambda during warm-up).
        trajectories: the trajectories trained on; ``empty_trajectories``, ``dropped_infra``:
            left out (no step; infrastructure truncation with ``infra_truncation='drop'``).
    """

    rows: list[StepRow]
    inputs: list[RowInputs]
    rewards: torch.Tensor
    response_mask: torch.Tensor
    old_logprobs: torch.Tensor
    values: torch.Tensor | None
    ref_logprobs: torch.Tensor | None
    advantages: torch.Tensor
    returns: torch.Tensor | None
    trajectory_ids: list[str]
    step_indices: torch.Tensor
    truncated: torch.Tensor
    lam: float
    trajectories: list[Trajectory]
    empty_trajectories: int
    dropped_infra: int
    dropped_unverified: int = 0
    critic_inputs: list[RowInputs] | None = None
    preprocess_s: float = 0.0
    scoring_s: float = 0.0
    images_s: float = 0.0
    values_s: float = 0.0
    reference_s: float = 0.0
    proximal_s: float = 0.0
    behaviour_clip_fraction: float | None = None
    """Share of tokens whose recomputed (proximal) vs behaviour ratio lies outside the clip
    window (``ppo.old_logprobs='recompute'``): what an anchor on the behaviour log-probs clips."""
    pruned_trajectories: int = 0
    replayed_trajectories: int = 0
    bootstrapped_from_next: int = 0
    """Truncated trajectories bootstrapped from ``V(s')`` at the screen after the cut."""
    bootstrapped_from_last: int = 0
    """Truncated trajectories bootstrapped from their last observed state (no screen after the cut)."""

    def __len__(self) -> int:
        return len(self.rows)


def outside_clip_window(log_ratio: torch.Tensor, clip_low: float, clip_high: float) -> torch.Tensor:
    """Bool tensor: where ``exp(log_ratio)`` lies outside ``[1 - clip_low, 1 + clip_high]``.

    >>> outside_clip_window(torch.tensor([0.0, 0.5, -0.5]), 0.2, 0.2).tolist()
    [False, True, True]
    """
    return (log_ratio > math.log1p(clip_high)) | (log_ratio < math.log1p(-clip_low))


def estimate_advantages(
    config: LearnerConfig,
    rows: Sequence[StepRow],
    *,
    rewards: torch.Tensor,
    response_mask: torch.Tensor,
    step_indices: torch.Tensor,
    truncated: torch.Tensor,
    values: torch.Tensor | None,
    lam: float,
    next_values: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(advantages, returns)``, both ``(N, R)``: the configured estimator (``config.algorithm``)
    on the step rows, then per-task whitening (``levers.whiten_by='task'``, critic estimators), the
    format penalty on rows whose action did not parse, and equal trajectory weights.
    ``returns`` is ``None`` for critic-free estimators. Padding is not zeroed here.
    ``next_values``: ``(N,)`` ``V(s')`` of truncated trajectories (see :class:`AdvantageInputs`)."""
    cfg = config
    mask = response_mask
    traj_ids = [r.episode_id for r in rows]
    estimator = get_estimator(cfg.algorithm)
    estimated = estimator.fn(
        AdvantageInputs(
            rewards=rewards,
            response_mask=mask,
            trajectory_ids=traj_ids,
            step_indices=step_indices,
            group_ids=[r.group for r in rows],
            anchor_ids=[r.anchor for r in rows],
            fork_ids=[r.fork for r in rows] if cfg.levers.sibling_baseline else None,
            values=values,
            truncated=truncated,
            next_values=next_values,
            settings=EstimatorConfig(
                gamma=cfg.gamma,
                lam=lam,
                whiten=cfg.levers.whiten_advantages and cfg.levers.whiten_by == "batch",
                bootstrap_truncated=cfg.truncation == "bootstrap",
                grpo_norm_by_std=cfg.levers.grpo_norm_by_std,
                grpo_weighting=cfg.levers.grpo_weighting,
                gigpo_gamma=cfg.levers.gigpo_gamma,
                gigpo_omega=cfg.levers.gigpo_omega,
                gigpo_step_norm=cfg.levers.gigpo_step_norm,
            ),
        )
    )
    advantages, returns = estimated.advantages.to(torch.float32), estimated.returns
    if estimator.needs_critic and cfg.levers.whiten_advantages and cfg.levers.whiten_by == "task":
        advantages = whiten_within(advantages, mask, [r.task_id for r in rows])
    if cfg.levers.format_penalty_advantage > 0:
        slipped = torch.tensor([r.parse_error for r in rows], dtype=torch.bool, device=mask.device)
        local = torch.full_like(advantages, -cfg.levers.format_penalty_advantage)
        advantages = torch.where(slipped[:, None] & mask, local, advantages)
    if cfg.levers.trajectory_weighting:
        advantages = advantages * trajectory_weights(mask, traj_ids)[:, None]
    return advantages, returns


def behaviour_correction(
    advantages: torch.Tensor,
    old_logprobs: torch.Tensor,
    behaviour_logprobs: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    clip_low: float,
    clip_high: float,
    weight_cap: float | None,
) -> tuple[torch.Tensor, float]:
    """Decoupled PPO (``ppo.old_logprobs='recompute'``): the share of tokens whose proximal
    (``old_logprobs``, recomputed) vs behaviour ratio lies outside the clip window, and the
    advantages times AReaL's behaviour weight ``min(pi_prox / pi_behaviour, weight_cap)``
    (unchanged when ``weight_cap`` is ``None``)."""
    mask = response_mask
    log_ratio = (old_logprobs - behaviour_logprobs).masked_fill(~mask, 0.0)
    outside = outside_clip_window(log_ratio, clip_low, clip_high)
    clipped = float((outside & mask).sum()) / max(1, int(mask.sum()))
    if weight_cap is not None:
        # The PPO loss is linear in a positive advantage scale, so the weight rides on the advantages.
        weight = torch.exp(log_ratio).clamp(max=weight_cap)
        advantages = advantages * weight.masked_fill(~mask, 0.0)
    return advantages, clipped


def prune_negatives(
    trajectories: Sequence[Trajectory],
    group_ids: Sequence[Hashable] | None,
    *,
    max_negatives_per_positive: float,
    rng: random.Random,
) -> tuple[list[Trajectory], list[Hashable] | None, int]:
    """MobileRL's negative pruning: ``(kept trajectories, their group ids or None, muted count)``.

    Groups whose trajectories all failed are muted, and at most ``max_negatives_per_positive``
    failures per success stay in a group (the rest muted at random with ``rng``).
    Infrastructure truncations and unscored episodes count as neither success nor failure and
    are always kept. When nothing with a step would remain, the batch is kept as it is.
    """
    groups = list(group_ids) if group_ids is not None else [group_of(t) for t in trajectories]
    scored = [i for i, t in enumerate(trajectories) if t.success is not None]
    keep_scored = negative_pruning_keep(
        [trajectories[i].success is True for i in scored],
        [groups[i] for i in scored],
        max_negatives_per_positive=max_negatives_per_positive,
        rng=rng,
    )
    muted = {scored[j] for j, keep in enumerate(keep_scored) if not keep}
    kept = [t for i, t in enumerate(trajectories) if i not in muted]
    if not any(t.transitions for t in kept):  # nothing left to learn from: keep the batch as it is
        logger.warning("negative pruning muted every trajectory of the batch; training on it unpruned")
        return list(trajectories), None if group_ids is None else list(group_ids), 0
    kept_groups = None if group_ids is None else [g for i, g in enumerate(group_ids) if i not in muted]
    return kept, kept_groups, len(muted)


def group_of(trajectory: Trajectory) -> Hashable:
    """A trajectory's group: ``Trajectory.group``, else its task id."""
    return trajectory.group if trajectory.group is not None else trajectory.task.id


def shaped_rewards(
    cfg: LearnerConfig, rows: Sequence[StepRow], trajectories: Sequence[Trajectory], device: torch.device
) -> torch.Tensor:
    """``(N,)`` the reward each row trains on: the workflow's step reward, minus
    ``cfg.levers.parse_error_penalty`` on an unparseable step, plus the shortest-path delta
    (:func:`shortest_path_deltas`) when ``cfg.levers.shortest_path_adjustment`` is on.

        >>> from types import SimpleNamespace as Row
        >>> cfg = LearnerConfig(levers={"parse_error_penalty": 0.1})
        >>> rows = [Row(reward=0.0, parse_error=True), Row(reward=1.0, parse_error=False)]
        >>> shaped_rewards(cfg, rows, [], torch.device("cpu")).tolist()
        [-0.10000000149011612, 1.0]
    """
    rewards = torch.tensor([r.reward for r in rows], dtype=torch.float32, device=device)
    if cfg.levers.parse_error_penalty > 0:
        slipped = torch.tensor([r.parse_error for r in rows], dtype=torch.bool, device=device)
        rewards = rewards - cfg.levers.parse_error_penalty * slipped.float()
    if cfg.levers.shortest_path_adjustment:
        rewards = rewards + shortest_path_deltas(rows, trajectories, device)
    return rewards


def shortest_path_deltas(
    rows: Sequence[StepRow], trajectories: Sequence[Trajectory], device: torch.device
) -> torch.Tensor:
    """``(N,)`` reward change of each row under MobileRL's shortest-path adjustment: on the
    last step of every success longer than its group's shortest success, 0 elsewhere."""
    totals = [sum(t.reward for t in tr.transitions) for tr in trajectories]
    # Path length counts the trained agent's steps (its rows), not other agents' turns.
    last_step: dict[str, int] = {}
    for row in rows:
        last_step[row.episode_id] = max(row.step, last_step.get(row.episode_id, -1))
    adjusted = shortest_path_adjusted_rewards(
        totals,
        [last_step[tr.episode_id] + 1 for tr in trajectories],
        [tr.success is True for tr in trajectories],
        _row_groups(rows, trajectories),
    )
    delta_by_episode = {tr.episode_id: a - r for tr, a, r in zip(trajectories, adjusted, totals, strict=True)}
    out = torch.zeros(len(rows), dtype=torch.float32, device=device)
    for i, row in enumerate(rows):
        if row.step == last_step[row.episode_id]:
            out[i] = delta_by_episode[row.episode_id]
    return out


def shortest_path_adjusted(rows: Sequence[StepRow], trajectories: Sequence[Trajectory]) -> int:
    """Successes whose reward the shortest-path adjustment cut: those longer than their
    group's shortest success (each has one row with a non-zero :func:`shortest_path_deltas`)."""
    return int((shortest_path_deltas(rows, trajectories, torch.device("cpu")) != 0).sum())


def _row_groups(rows: Sequence[StepRow], trajectories: Sequence[Trajectory]) -> list[Hashable]:
    """The group each trajectory's rows carry (``group_ids`` may have overridden it)."""
    group = {r.episode_id: r.group for r in rows}
    return [group[t.episode_id] for t in trajectories]


def mean_advantage_per_trajectory(batch: UpdateBatch, trajectories: Sequence[Trajectory]) -> list[float]:
    """Mean token advantage of each of ``trajectories`` in ``batch`` (AdaPR's insertion score)."""
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    tokens = batch.response_mask.sum(dim=1).tolist()
    totals = (batch.advantages * batch.response_mask).sum(dim=1).tolist()
    for tid, total, n in zip(batch.trajectory_ids, totals, tokens, strict=True):
        sums[tid] = sums.get(tid, 0.0) + total
        counts[tid] = counts.get(tid, 0.0) + n
    return [sums[t.episode_id] / counts[t.episode_id] if counts.get(t.episode_id) else 0.0 for t in trajectories]


def step_scores(batch: UpdateBatch, *, update: int) -> tuple[StepScore, ...]:
    """Each row's critic value at its first response token, mean token advantage and behaviour
    log-prob of its response (:class:`~darwin.types.StepScore`), for update number ``update``.

    >>> import torch
    >>> from types import SimpleNamespace
    >>> from darwin.types import Phase
    >>> Row = SimpleNamespace
    >>> batch = SimpleNamespace(
    ...     rows=[Row(episode_id="e", origin=(Phase.EXECUTION, 3))],
    ...     response_mask=torch.tensor([[True, True, False]]),
    ...     advantages=torch.tensor([[1.0, 0.0, 0.0]]),
    ...     old_logprobs=torch.tensor([[-0.5, -0.25, 0.0]]),
    ...     values=torch.tensor([[0.75, 0.5, 0.0]]),
    ... )
    >>> step_scores(batch, update=2)
    (StepScore(episode_id='e', phase=<Phase.EXECUTION: 'execution'>, step=3, update=2, value=0.75, advantage=0.5, logprob=-0.75),)
    """
    mask = batch.response_mask.float()
    tokens = mask.sum(dim=1).clamp(min=1.0)
    advantages = ((batch.advantages * mask).sum(dim=1) / tokens).tolist()
    logprobs = (batch.old_logprobs * mask).sum(dim=1).tolist()
    values = [None] * len(batch.rows) if batch.values is None else batch.values[:, 0].tolist()
    return tuple(
        StepScore(row.episode_id, row.origin[0], row.origin[1], update, value, advantage, logprob)
        for row, value, advantage, logprob in zip(batch.rows, values, advantages, logprobs, strict=True)
    )
