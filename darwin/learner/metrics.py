"""What one learner update reports: :class:`UpdateMetrics`, the running sums the training
loop keeps (:class:`LossTotals`), and :func:`update_metrics`, which turns both and the
update's batch into the metrics.

Loss and ratio statistics are token-weighted means over every micro-batch of every epoch
(verl's convention): each micro-batch adds ``statistic * tokens`` and the total is divided
by the token count at the end.

    >>> totals = LossTotals()
    >>> totals.add_value(clip_fraction=0.5, tokens=2.0)
    >>> totals.add_value(clip_fraction=0.0, tokens=6.0)
    >>> totals.value_clip / totals.value_tokens
    0.125
    >>> mean_finite([1.0, float("nan"), 3.0]), fmt_metric(None), fmt_metric(0.123456)
    (2.0, '-', '0.1235')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import torch

from darwin.algos.losses import PolicyLossOutput, masked_mean
from darwin.learner.config import LearnerConfig
from darwin.learner.step_rows import unverified
from darwin.learner.update_batch import UpdateBatch, outside_clip_window, shortest_path_adjusted
from darwin.types import TerminationReason, Trajectory

__all__ = ["LossTotals", "UpdateMetrics", "fmt_metric", "mean_finite", "skipped_update_metrics", "update_metrics"]


@dataclass(frozen=True)
class UpdateMetrics:
    """What one update did. Loss and ratio statistics are token-weighted means over every
    micro-batch of every epoch (verl's convention); ``None`` where not applicable (no actor
    step during warm-up, no critic in GRPO)."""

    update: int
    """1-based index of this update (``LocalLearner.updates`` after it)."""
    stage: str
    """``critic_warmup``, or the estimator that trained the actor (``ppo`` for GAE, ``grpo``, ...), or
    ``skipped`` (nothing trained: ``actor_skipped_reason``)."""
    policy_version: int
    """The policy's version after the update (bumped only by actor updates)."""
    actor_updated: bool
    trajectories: int
    steps: int
    response_tokens: int
    empty_trajectories: int
    dropped_infra_trajectories: int
    episode_return_mean: float
    """Mean over trajectories of the sum of step rewards."""
    success_rate: float | None
    """Share of verified trajectories whose execution phase succeeded."""
    truncated_fraction: float
    version_lag_mean: float
    """Mean of (policy version before the update - version that sampled the row)."""
    version_lag_max: int
    epochs: int
    optimizer_steps: int
    skipped_steps: int
    """Optimizer steps skipped for a non-finite gradient norm."""
    policy_loss: float | None = None
    clip_fraction: float | None = None
    clip_fraction_lower: float | None = None
    approx_kl: float | None = None
    """Masked mean of old - new log-prob (verl's ``actor/ppo_kl``)."""
    initial_log_ratio_max: float | None = None
    """max |log pi - log pi_old| on the first mini-batch before any step: ~1e-6 for fresh
    on-policy data (a health check of the old log-probs), larger for carried-over rows."""
    behaviour_clip_fraction: float | None = None
    """``ppo.old_logprobs='recompute'``: share of tokens whose proximal vs behaviour ratio lies
    outside the clip window at the start of the update (what a stale anchor would clip)."""
    initial_clip_fraction: float | None = None
    """Share of the first mini-batch's tokens outside the clip window before any step."""
    screenshots: int = 0
    """Screenshots in the trained steps' prompts: each reached the model as pixels."""
    unverified_trajectories: int = 0
    """Trajectories left out because their last phase had no verdict (see ``learner.batch.unverified``)."""
    pruned_trajectories: int = 0
    replayed_trajectories: int = 0
    bootstrapped_from_next: int | None = None
    """``truncation='bootstrap'``: truncated trajectories whose ``V(s')`` was read at the screen after the cut."""
    bootstrapped_from_last: int | None = None
    """``truncation='bootstrap'``: truncated trajectories bootstrapped from their last observed state instead."""
    padding_share: float | None = None
    """Share of the training passes' token slots that were padding (rows padded to their
    micro-batch's longest): what sequence packing could remove at most."""
    shortest_path_adjusted: int | None = None
    """``levers.shortest_path_adjustment``: successes whose reward was cut for being longer than their
    group's shortest success (``None`` when the adjustment is off)."""
    replay_size: int = 0
    entropy: float | None = None
    kl_to_reference: float | None = None
    actor_grad_norm: float | None = None
    """Mean pre-clip gradient norm of the actor steps."""
    value_loss: float | None = None
    value_clip_fraction: float | None = None
    critic_grad_norm: float | None = None
    value_mean: float | None = None
    """Masked mean of the old values (before the update)."""
    return_mean: float | None = None
    explained_variance: float | None = None
    """1 - Var(returns - old values) / Var(returns) over valid tokens (None if Var is 0)."""
    prepare_s: float = 0.0
    scoring_s: float = 0.0
    train_s: float = 0.0
    total_s: float = 0.0
    images_s: float = 0.0
    """Part of ``prepare_s``: screenshots to pixels, M-RoPE positions and (frozen tower) image features."""
    values_s: float = 0.0
    """Part of ``scoring_s``: the critic's old values (with a shared critic and stale rows, the one
    forward that also gives the proximal log-probs)."""
    reference_s: float = 0.0
    """Part of ``scoring_s``: the reference model's log-probs (KL penalty)."""
    proximal_s: float = 0.0
    """Part of ``scoring_s``: the current actor's log-probs of stale rows (``ppo.old_logprobs='recompute'``;
    0 with a shared critic, whose values pass computes them)."""
    forward_backward_s: float = 0.0
    """Part of ``train_s``: the actor's and critic's forward and backward passes."""
    optimizer_s: float = 0.0
    """Part of ``train_s``: gradient clipping and optimizer steps."""
    rft_steps: int | None = None
    """``LearnerConfig.finetunes.rft``: accepted steps the rejection-sampling fine-tune after this update
    trained on (None: no fine-tune was due; below ``finetunes.rft.min_steps`` it waited and trained nothing)."""
    rft_episodes: int | None = None
    """The accepted episodes those steps come from."""
    rft_loss_first: float | None = None
    """The fine-tune's first optimizer step's loss (mean NLL per response token)."""
    rft_loss_last: float | None = None
    """Its last optimizer step's loss."""
    rft_s: float | None = None
    """Seconds the fine-tune took (not part of ``total_s``)."""
    actor_skipped_reason: str | None = None
    """Why this update trained nothing (``LearnerConfig.infra_only_updates = 'skip'``):
    ``infra_truncations_only`` or ``no_verdict`` (:func:`darwin.learner.step_rows.actor_skip_reason`);
    None when it trained."""

    def as_dict(self) -> dict[str, float]:
        """Numeric fields for loggers (TensorBoard), ``None`` left out, bools as 0/1; a skipped
        update adds ``actor_skipped = 1`` (its reason is a string: ``updates.jsonl`` has it)."""
        out: dict[str, float] = {}
        for key, value in asdict(self).items():
            if value is None or isinstance(value, str):
                continue
            out[key] = float(value)
        if self.actor_skipped_reason is not None:
            out["actor_skipped"] = 1.0
        return out


@dataclass
class LossTotals:
    """Token-weighted accumulators of one update's training loop (sums of ``statistic *
    tokens``; per-step lists for losses and gradient norms)."""

    tokens: float = 0.0
    clip: float = 0.0
    clip_lower: float = 0.0
    approx_kl: float = 0.0
    entropy: float = 0.0
    kl_ref: float = 0.0
    value_tokens: float = 0.0
    value_clip: float = 0.0
    optimizer_s: float = 0.0
    """Seconds spent clipping gradients and stepping the optimizers."""
    policy_losses: list[float] = field(default_factory=list)
    value_losses: list[float] = field(default_factory=list)
    actor_norms: list[float] = field(default_factory=list)
    critic_norms: list[float] = field(default_factory=list)
    steps: int = 0
    skipped: int = 0
    initial_log_ratio_max: float | None = None
    initial_outside: float = 0.0
    initial_tokens: float = 0.0
    row_tokens: float = 0.0
    """Prompt and response tokens of the rows the training passes ran (every epoch)."""
    slot_tokens: float = 0.0
    """Token slots those passes ran: each micro-batch's rows padded to its longest row."""

    def add_micro_batch(self, lengths: list[int]) -> None:
        """One training micro-batch of rows of ``lengths`` tokens (prompt and response)."""
        self.row_tokens += sum(lengths)
        self.slot_tokens += max(lengths) * len(lengths)

    def add_policy(self, pg: PolicyLossOutput, entropy: float, tokens: float) -> None:
        """One actor micro-batch: its PPO statistics and masked mean ``entropy`` over ``tokens``."""
        self.tokens += tokens
        self.clip += pg.clip_fraction * tokens
        self.clip_lower += pg.clip_fraction_lower * tokens
        self.approx_kl += pg.approx_kl * tokens
        self.entropy += entropy * tokens

    def add_value(self, clip_fraction: float, tokens: float) -> None:
        """One critic micro-batch (or the value part of a shared-critic actor micro-batch)."""
        self.value_tokens += tokens
        self.value_clip += clip_fraction * tokens

    def add_initial_ratio(
        self, log_ratio: torch.Tensor, mask: torch.Tensor, tokens: float, *, clip_low: float, clip_high: float
    ) -> None:
        """A micro-batch of the first mini-batch, before any step: ``log_ratio`` is
        ``log pi - log pi_old`` (0 on padding), the health check of the old log-probs."""
        self.initial_log_ratio_max = max(self.initial_log_ratio_max or 0.0, float(log_ratio.abs().max()))
        outside = outside_clip_window(log_ratio, clip_low, clip_high)
        self.initial_outside += float((outside & mask).sum())
        self.initial_tokens += tokens


def update_metrics(
    batch: UpdateBatch,
    totals: LossTotals,
    *,
    config: LearnerConfig,
    update: int,
    policy_version: int,
    version_before: int,
    warmup: bool,
    actor_updated: bool,
    epochs: int,
    has_critic: bool,
    replay_size: int,
) -> UpdateMetrics:
    """The metrics of an update that trained on ``batch`` and accumulated ``totals``
    (wall-clock fields left at 0 for the caller). ``update`` and ``policy_version`` are the
    learner's counters after the update, ``version_before`` the policy version before it."""
    cfg = config
    actor = actor_updated
    trajs = batch.trajectories
    returns_per_traj = [sum(t.reward for t in traj.transitions) for traj in trajs]
    # continuations of branching rollouts start part-way through: the rate is the curriculum's episodes'
    verified = [t.success for t in trajs if t.success is not None and t.branch is None]
    lags = [version_before - r.policy_version for r in batch.rows]
    mask = batch.response_mask
    stage = "critic_warmup" if warmup else ("ppo" if cfg.algorithm.name == "gae" else cfg.algorithm.name)
    value_mean = return_mean = explained = None
    if batch.values is not None and batch.returns is not None:
        value_mean = float(masked_mean(batch.values, mask))
        return_mean = float(masked_mean(batch.returns, mask))
        ret = batch.returns[mask].double()
        var = float(ret.var(unbiased=False)) if ret.numel() else 0.0
        if var > 0:
            resid = (ret - batch.values[mask].double()).var(unbiased=False)
            explained = 1.0 - float(resid) / var
    tok = totals.tokens or float("nan")
    vtok = totals.value_tokens or float("nan")
    return UpdateMetrics(
        update=update,
        stage=stage,
        policy_version=policy_version,
        actor_updated=actor,
        trajectories=len(trajs),
        steps=len(batch),
        screenshots=sum(int(i.image_grid_thw.shape[0]) for i in batch.inputs if i.image_grid_thw is not None),
        response_tokens=int(mask.sum()),
        empty_trajectories=batch.empty_trajectories,
        dropped_infra_trajectories=batch.dropped_infra,
        unverified_trajectories=batch.dropped_unverified,
        episode_return_mean=sum(returns_per_traj) / len(returns_per_traj),
        success_rate=(sum(verified) / len(verified)) if verified else None,
        truncated_fraction=sum(1 for t in trajs if t.termination is not None and t.termination.truncated) / len(trajs),
        version_lag_mean=sum(lags) / len(lags),
        version_lag_max=max(lags),
        epochs=epochs,
        optimizer_steps=totals.steps,
        skipped_steps=totals.skipped,
        policy_loss=mean_finite(totals.policy_losses) if actor else None,
        clip_fraction=totals.clip / tok if actor else None,
        clip_fraction_lower=totals.clip_lower / tok if actor else None,
        approx_kl=totals.approx_kl / tok if actor else None,
        initial_log_ratio_max=totals.initial_log_ratio_max if actor else None,
        initial_clip_fraction=totals.initial_outside / totals.initial_tokens
        if actor and totals.initial_tokens
        else None,
        behaviour_clip_fraction=batch.behaviour_clip_fraction,
        pruned_trajectories=batch.pruned_trajectories,
        replayed_trajectories=batch.replayed_trajectories,
        bootstrapped_from_next=batch.bootstrapped_from_next if config.truncation == "bootstrap" else None,
        bootstrapped_from_last=batch.bootstrapped_from_last if config.truncation == "bootstrap" else None,
        shortest_path_adjusted=shortest_path_adjusted(batch.rows, trajs)
        if cfg.levers.shortest_path_adjustment
        else None,
        padding_share=1.0 - totals.row_tokens / totals.slot_tokens if totals.slot_tokens else None,
        replay_size=replay_size,
        entropy=totals.entropy / tok if actor else None,
        kl_to_reference=totals.kl_ref / tok if actor and cfg.ppo.kl_coef > 0 else None,
        actor_grad_norm=mean_finite(totals.actor_norms) if actor else None,
        value_loss=mean_finite(totals.value_losses) if has_critic else None,
        value_clip_fraction=totals.value_clip / vtok if has_critic else None,
        critic_grad_norm=mean_finite(totals.critic_norms) if has_critic else None,
        value_mean=value_mean,
        return_mean=return_mean,
        explained_variance=explained,
    )


def skipped_update_metrics(
    trajectories: Sequence[Trajectory],
    *,
    reason: str,
    update: int,
    policy_version: int,
    total_s: float = 0.0,
) -> UpdateMetrics:
    """The metrics of an update that trained nothing for ``reason`` (stage ``skipped``): no
    step, no loss, the policy's version unchanged; what the batch held is in the counts of
    left-out trajectories. Means over no trajectory are NaN (loggers leave them out)."""
    nan = float("nan")
    infra = sum(
        1
        for t in trajectories
        if t.termination is not None and t.termination.reason == TerminationReason.INFRA_TRUNCATED
    )
    unscored = sum(1 for t in trajectories if unverified(t))
    return UpdateMetrics(
        update=update,
        stage="skipped",
        policy_version=policy_version,
        actor_updated=False,
        trajectories=0,
        steps=0,
        response_tokens=0,
        empty_trajectories=len(trajectories) - infra - unscored,
        dropped_infra_trajectories=infra,
        unverified_trajectories=unscored,
        episode_return_mean=nan,
        success_rate=None,
        truncated_fraction=nan,
        version_lag_mean=nan,
        version_lag_max=0,
        epochs=0,
        optimizer_steps=0,
        skipped_steps=0,
        total_s=total_s,
        actor_skipped_reason=reason,
    )


def mean_finite(values: list[float]) -> float | None:
    """Mean of the finite ``values`` (``None`` if there are none): a skipped step's
    non-finite gradient norm does not poison the update's mean."""
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else None


def fmt_metric(value: float | None) -> str:
    """A metric for a log line: 4 significant digits, ``-`` for ``None``."""
    return "-" if value is None else f"{value:.4g}"
