"""LocalLearner: PPO (with critic warm-up) or GRPO on one process, CPU or one GPU.

    >>> import numpy as np
    >>> from darwin.learner import LearnerConfig, LocalLearner
    >>> from darwin.models import TinyVLMConfig, build_tiny_vlm
    >>> from darwin.policies import HFPolicy, HFPolicyConfig
    >>> policy = HFPolicy(build_tiny_vlm(TinyVLMConfig(screen_width=56, screen_height=112), seed=0),
    ...                   HFPolicyConfig(max_new_tokens=4))
    >>> learner = LocalLearner(policy, LearnerConfig(critic_warmup_updates=1, mini_batch_size=4,
    ...                                              micro_batch_size=2))
    >>> learner.updates, learner.policy_version
    (0, 0)

One :meth:`LocalLearner.update` call is one *update*: step rows from the trajectories,
old values (critic, no grad), advantages (token-level GAE over whole trajectories, or GRPO),
then epochs of shuffled mini-batches, each an optimizer step over accumulated
micro-batches; during the first ``critic_warmup_updates`` updates only the critic trains.
After an actor update the new weights go to the policy with ``version + 1``. The maths is in
:mod:`darwin.algos`; the procedure with shapes is in ``docs/learner.md``.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import pickle
import random
import shutil
import time
import uuid
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import BinaryIO, TextIO

import torch
from pydantic import JsonValue
from torch import nn

from darwin.algos import (
    aggregate_loss,
    entropy_from_logits,
    kl_penalty,
    masked_mean,
    ppo_policy_loss,
    trajectory_weights,
    value_loss,
    whiten_within,
)
from darwin.algos.adagrpo import negative_pruning_keep, shortest_path_adjusted_rewards
from darwin.algos.estimators import AdvantageInputs, EstimatorSettings, get_estimator
from darwin.buffer import ReplayBuffer
from darwin.learner.batch import (
    LearnerDataError,
    RowInputs,
    StepRow,
    collate,
    collect_step_rows,
    preprocess_rows,
    processor_inputs,
)
from darwin.learner.config import LearnerConfig
from darwin.learner.models import (
    TrainablePolicy,
    ValueModel,
    apply_lora,
    backbone_of,
    capture_outputs,
    copy_model,
    hidden_size_of,
    lora_merged_state_dict,
    set_adapters_enabled,
)
from darwin.learner.replay import PositiveReplay
from darwin.models.scoring import compute_response_logprobs, masked_log_softmax
from darwin.types import Trajectory

logger = logging.getLogger(__name__)

__all__ = [
    "CHECKPOINT_FORMAT_VERSION",
    "LocalLearner",
    "ResumeState",
    "UpdateBatch",
    "UpdateMetrics",
    "resolve_checkpoint",
    "restore_pending",
]

CHECKPOINT_FORMAT_VERSION = 1

_Scorer = Callable[[Mapping[str, torch.Tensor], Sequence[Sequence[int]]], torch.Tensor]
"""(collated batch, responses) -> (B, R) per-token scores (values or log-probs)."""


# --------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class UpdateBatch:
    """Everything one update trains on (:meth:`LocalLearner.prepare`); ``N`` step rows,
    ``R`` the longest response. All tensors are on the learner's device.

    Attributes:
        rows: the ``N`` step rows, grouped by trajectory in time order.
        inputs: each row's prompt inputs (unpadded; :func:`darwin.learner.batch.collate`).
        rewards: ``(N,)`` step rewards.
        response_mask: ``(N, R)`` bool.
        old_logprobs: ``(N, R)`` behaviour log-probs (``Generation.response_logprobs``), 0 on padding.
        values: ``(N, R)`` critic values before the update, or ``None`` (GRPO).
        ref_logprobs: ``(N, R)`` reference-policy log-probs, or ``None`` (``kl_coef == 0``).
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
    preprocess_s: float = 0.0
    scoring_s: float = 0.0
    behaviour_clip_fraction: float | None = None
    """Share of tokens whose recomputed (proximal) vs behaviour ratio lies outside the clip
    window (``old_logprobs='recompute'``): what an anchor on the behaviour log-probs clips."""
    pruned_trajectories: int = 0
    replayed_trajectories: int = 0

    def __len__(self) -> int:
        return len(self.rows)


@dataclass(frozen=True)
class UpdateMetrics:
    """What one update did. Loss and ratio statistics are token-weighted means over every
    micro-batch of every epoch (verl's convention); ``None`` where not applicable (no actor
    step during warm-up, no critic in GRPO)."""

    update: int
    """1-based index of this update (``LocalLearner.updates`` after it)."""
    stage: str
    """``critic_warmup``, or the estimator that trained the actor (``ppo`` for GAE, ``grpo``, ...)."""
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
    """``old_logprobs='recompute'``: share of tokens whose proximal vs behaviour ratio lies
    outside the clip window at the start of the update (what a stale anchor would clip)."""
    initial_clip_fraction: float | None = None
    """Share of the first mini-batch's tokens outside the clip window before any step."""
    unverified_trajectories: int = 0
    """Trajectories left out because their last phase had no verdict (see ``learner.batch.unverified``)."""
    pruned_trajectories: int = 0
    replayed_trajectories: int = 0
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

    def as_dict(self) -> dict[str, float]:
        """Numeric fields for loggers (TensorBoard), ``None`` left out, bools as 0/1."""
        out: dict[str, float] = {}
        for key, value in asdict(self).items():
            if value is None or isinstance(value, str):
                continue
            out[key] = float(value)
        return out


@dataclass(frozen=True)
class ResumeState:
    """What :meth:`LocalLearner.load` restored besides the learner itself.

    Attributes:
        path: the checkpoint directory.
        pending: completed trajectories that were not trained yet when the checkpoint was
            written (put them back with :func:`darwin.learner.restore_pending`).
        extra_state: the caller's JSON state (e.g. ``{"curriculum": curriculum.state_dict()}``).
    """

    path: Path
    pending: list[Trajectory]
    extra_state: dict[str, JsonValue]


@dataclass
class _Totals:
    """Token-weighted accumulators of one update's training loop."""

    tokens: float = 0.0
    clip: float = 0.0
    clip_lower: float = 0.0
    approx_kl: float = 0.0
    entropy: float = 0.0
    kl_ref: float = 0.0
    value_tokens: float = 0.0
    value_clip: float = 0.0
    policy_losses: list[float] = field(default_factory=list)
    value_losses: list[float] = field(default_factory=list)
    actor_norms: list[float] = field(default_factory=list)
    critic_norms: list[float] = field(default_factory=list)
    steps: int = 0
    skipped: int = 0
    initial_log_ratio_max: float | None = None
    initial_outside: float = 0.0
    initial_tokens: float = 0.0


# --------------------------------------------------------------------------------------
# The learner
# --------------------------------------------------------------------------------------
class LocalLearner:
    """PPO / GRPO learner for a :class:`~darwin.policies.hf.HFPolicy`, in one process.

    Models (all copies; the policy's model is never trained in place, so sampling can go
    on while the learner trains):

    - actor: a copy of ``policy.vlm.model`` (LoRA adapters if ``config.lora``);
    - critic (PPO): ``separate`` (default, paper): a copy of the policy model's backbone
      (no LM head) with a value head ``Linear(hidden, 1)``; ``shared``: the value head on the
      actor's own hidden states;
    - reference (``kl_coef > 0``): a frozen copy of the initial actor (with LoRA: the base
      model, adapters disabled).

    Models run in eval mode (no dropout), so on fresh data the first PPO ratio is exactly 1
    up to float noise. Randomness (mini-batch shuffles, a random value head, LoRA init)
    comes from the learner's own ``torch.Generator`` seeded by ``config.seed``; global RNGs
    are never seeded.

    Args:
        policy: the sampling policy; its processor rebuilds prompts, its forbidden mask and
            log-prob temperature score responses, and it receives new weights.
        config: hyperparameters (defaults: embedded values; ``LearnerConfig.paper()``).
    """

    def __init__(self, policy: TrainablePolicy, config: LearnerConfig | None = None) -> None:
        if not isinstance(policy, TrainablePolicy):
            raise TypeError(
                f"LocalLearner trains an HFPolicy (it re-scores with the policy's model and "
                f"processor); got {type(policy).__name__}"
            )
        self.policy = policy
        self.config = config if config is not None else LearnerConfig()
        cfg = self.config
        self.device = torch.device(cfg.device) if cfg.device is not None else policy.device
        self.updates = 0
        """Completed :meth:`update` calls (warm-up included)."""
        self.policy_version = int(policy.version)
        self.optimizer_steps = 0
        self.resume_state: ResumeState | None = None
        """Set by :meth:`load`: pending trajectories and the caller's extra state."""
        self._generator = torch.Generator(device="cpu").manual_seed(cfg.seed)
        self._forbidden = policy.forbidden_mask.to(self.device)
        self._temperature = float(policy.logprob_temperature)
        self._pad_id = self._pad_token_id()
        # Own processor copy: the policy's tokenizer may be padding a batch on its sampling thread.
        self._build_inputs = processor_inputs(copy.deepcopy(policy.vlm.processor))
        base = policy.vlm.model

        # actor
        self.actor: nn.Module = copy_model(base).to(self.device)
        if cfg.lora is not None:
            apply_lora(self.actor, cfg.lora, self._generator)
        else:
            self.actor.requires_grad_(True)
        self._actor_backbone = backbone_of(self.actor)
        self._lm_head = self.actor.get_output_embeddings()
        hidden = hidden_size_of(base)

        # critic
        self.critic: ValueModel | None = None
        if cfg.uses_critic:
            if cfg.critic == "shared":
                trunk = self._actor_backbone
            else:
                trunk = copy_model(backbone_of(base)).to(self.device)
                if cfg.lora is not None and cfg.lora.critic:
                    apply_lora(trunk, cfg.lora, self._generator)
                else:
                    trunk.requires_grad_(True)
            self.critic = ValueModel(
                trunk, hidden, shared=cfg.critic == "shared", init=cfg.value_head_init,
                bias=cfg.value_head_bias, generator=self._generator,
            )
            self.critic.eval()  # no dropout anywhere: the models only ever run in eval mode

        # reference
        self.reference: nn.Module | None = None
        if cfg.kl_coef > 0 and cfg.lora is None:
            self.reference = copy_model(base).to(self.device).requires_grad_(False)

        # optimisers
        self._actor_params = [p for p in self.actor.parameters() if p.requires_grad]
        self.actor_optimizer = torch.optim.AdamW(
            self._actor_params, lr=cfg.actor_lr, betas=cfg.adam_betas, weight_decay=cfg.weight_decay
        )
        self._critic_params: list[nn.Parameter] = []
        self.critic_optimizer: torch.optim.Optimizer | None = None
        if self.critic is not None:
            self._critic_params = [p for p in self.critic.parameters() if p.requires_grad]
            self.critic_optimizer = torch.optim.AdamW(
                self._critic_params, lr=cfg.critic_lr, betas=cfg.adam_betas, weight_decay=cfg.weight_decay
            )

        # MobileRL's positive replay (AdaPR): past trajectories with the highest advantages
        self.replay: PositiveReplay[Trajectory] | None = None
        if cfg.positive_replay_ratio > 0:
            self.replay = PositiveReplay(
                capacity=cfg.replay_capacity, insert_fraction=cfg.replay_insert_fraction,
                max_uses=cfg.replay_max_uses, replay_ratio=cfg.positive_replay_ratio,
            )

    # ------------------------------------------------------------------ properties
    @property
    def in_warmup(self) -> bool:
        """Whether the next :meth:`update` trains only the critic."""
        return self.config.uses_critic and self.updates < self.config.critic_warmup_updates

    def actor_state_dict(self) -> dict[str, torch.Tensor]:
        """The actor's weights in the policy model's key space (LoRA merged): what the policy
        receives after each actor update."""
        return lora_merged_state_dict(self.actor) if self.config.lora is not None else {
            k: v.detach() for k, v in self.actor.state_dict().items()
        }

    def _pad_token_id(self) -> int:
        tok = self.policy.vlm.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        if pad is None:
            raise ValueError("the tokenizer names neither a pad nor an EOS token to pad prompts with")
        return int(pad)

    def _collate(self, inputs: Sequence[RowInputs]) -> dict[str, torch.Tensor]:
        dtype = next(self.actor.parameters()).dtype
        return collate(inputs, self._pad_id, device=self.device, pixel_dtype=dtype)

    # ------------------------------------------------------------------ preparation
    def prepare(
        self, trajectories: Sequence[Trajectory], *, group_ids: Sequence[Hashable] | None = None,
        lam: float | None = None,
    ) -> UpdateBatch:
        """Step rows, old values, reference log-probs and advantages for ``trajectories``
        (no training, no state change). ``lam`` defaults to the warm-up lambda while
        :attr:`in_warmup`, else ``config.lam``."""
        cfg = self.config
        t_start = time.perf_counter()
        collected = collect_step_rows(
            trajectories, group_ids=group_ids, drop_infra_truncated=cfg.infra_truncation == "drop",
            agent=cfg.trained_agent,
        )
        rows = collected.rows
        if not rows:
            raise LearnerDataError(
                f"no step to train on: {len(trajectories)} trajectories, "
                f"{collected.empty_trajectories} without steps, {collected.dropped_infra} dropped "
                f"infrastructure truncations, {collected.dropped_unverified} unverified; collect more data before update()"
            )
        inputs = preprocess_rows(self._build_inputs, rows, chunk=max(cfg.micro_batch_size, 8))
        t_scoring = time.perf_counter()
        n, longest = len(rows), max(len(r.response_ids) for r in rows)
        dev = self.device
        mask = torch.zeros(n, longest, dtype=torch.bool)
        old = torch.zeros(n, longest, dtype=torch.float32)
        for i, r in enumerate(rows):
            mask[i, : len(r.response_ids)] = True
            old[i, : len(r.old_logprobs)] = torch.tensor(r.old_logprobs, dtype=torch.float32)
        mask, old = mask.to(dev), old.to(dev)
        rewards = torch.tensor([r.reward for r in rows], dtype=torch.float32, device=dev)
        traj_ids = [r.episode_id for r in rows]
        steps = torch.tensor([r.step for r in rows], dtype=torch.long)
        truncated = torch.tensor([r.truncated for r in rows], dtype=torch.bool)

        values = ref = returns = None
        behaviour = old
        with torch.no_grad():
            if self.critic is not None:
                values = self._score(rows, inputs, longest, self._critic_values)
            if cfg.kl_coef > 0:
                ref = self._score(rows, inputs, longest, self._reference_logprobs)
            if cfg.old_logprobs == "recompute" and not self.in_warmup:
                # Decoupled PPO: the clip window is centred on the current actor (the proximal
                # policy), not on the older policy that sampled the rows.
                old = self._score(rows, inputs, longest, self._actor_logprobs).masked_fill(~mask, 0.0)
        if lam is None:
            lam = cfg.critic_warmup_lam if self.in_warmup else cfg.lam
        if cfg.shortest_path_adjustment:
            rewards = rewards + _shortest_path_deltas(rows, collected.trajectories, dev)
        estimator = get_estimator(cfg.estimator)
        estimated = estimator.fn(AdvantageInputs(
            rewards=rewards, response_mask=mask, trajectory_ids=traj_ids, step_indices=steps,
            group_ids=[r.group for r in rows], anchor_ids=[r.anchor for r in rows], values=values,
            truncated=truncated,
            settings=EstimatorSettings(
                gamma=cfg.gamma, lam=lam, whiten=cfg.whiten_advantages and cfg.whiten_by == "batch",
                bootstrap_truncated=cfg.truncation == "bootstrap", grpo_norm_by_std=cfg.grpo_norm_by_std,
                grpo_weighting=cfg.grpo_weighting, gigpo_gamma=cfg.gigpo_gamma, gigpo_omega=cfg.gigpo_omega,
                gigpo_step_norm=cfg.gigpo_step_norm,
            ),
        ))
        advantages, returns = estimated.advantages.to(torch.float32), estimated.returns
        if estimator.needs_critic and cfg.whiten_advantages and cfg.whiten_by == "task":
            advantages = whiten_within(advantages, mask, [r.task_id for r in rows])
        if cfg.format_penalty_advantage > 0:
            slipped = torch.tensor([r.parse_error for r in rows], dtype=torch.bool, device=dev)
            local = torch.full_like(advantages, -cfg.format_penalty_advantage)
            advantages = torch.where(slipped[:, None] & mask, local, advantages)
        if cfg.trajectory_weighting:
            advantages = advantages * trajectory_weights(mask, traj_ids)[:, None]
        behaviour_clip = None
        if cfg.old_logprobs == "recompute" and not self.in_warmup:
            log_ratio = (old - behaviour).masked_fill(~mask, 0.0)
            outside = (log_ratio > math.log1p(cfg.clip_high)) | (log_ratio < math.log1p(-cfg.clip_low))
            behaviour_clip = float((outside & mask).sum()) / max(1, int(mask.sum()))
            if cfg.behaviour_weight_cap is not None:
                # AReaL: weight = min(pi_prox / pi_behaviour, cap); the PPO loss is linear in a
                # positive advantage scale, so the weight rides on the advantages.
                weight = torch.exp(log_ratio).clamp(max=cfg.behaviour_weight_cap)
                advantages = advantages * weight.masked_fill(~mask, 0.0)
        return UpdateBatch(
            rows=rows, inputs=inputs, rewards=rewards, response_mask=mask, old_logprobs=old,
            values=values, ref_logprobs=ref, advantages=advantages.masked_fill(~mask, 0.0), returns=returns,
            trajectory_ids=traj_ids, step_indices=steps, truncated=truncated, lam=float(lam),
            trajectories=collected.trajectories, empty_trajectories=collected.empty_trajectories,
            dropped_infra=collected.dropped_infra, dropped_unverified=collected.dropped_unverified,
            preprocess_s=t_scoring - t_start,
            scoring_s=time.perf_counter() - t_scoring, behaviour_clip_fraction=behaviour_clip,
        )

    def _score(self, rows: list[StepRow], inputs: list[RowInputs], longest: int, fn: _Scorer) -> torch.Tensor:
        out = torch.zeros(len(rows), longest, dtype=torch.float32, device=self.device)
        size = self.config.micro_batch_size
        for start in range(0, len(rows), size):
            part = range(start, min(start + size, len(rows)))
            responses = [rows[i].response_ids for i in part]
            scores = fn(self._collate([inputs[i] for i in part]), responses)
            out[start : start + scores.shape[0], : scores.shape[1]] = scores.float()
        return out

    def _actor_logprobs(self, batch: Mapping[str, torch.Tensor], responses: Sequence[Sequence[int]]) -> torch.Tensor:
        lp, _ = compute_response_logprobs(
            self.actor, batch, responses, forbidden=self._forbidden, temperature=self._temperature
        )
        return lp

    def _critic_values(self, batch: Mapping[str, torch.Tensor], responses: Sequence[Sequence[int]]) -> torch.Tensor:
        assert self.critic is not None
        values, _ = self.critic(batch, responses, backbone_grad=False)
        return values

    def _reference_logprobs(self, batch: Mapping[str, torch.Tensor], responses: Sequence[Sequence[int]]) -> torch.Tensor:
        if self.reference is not None:
            lp, _ = compute_response_logprobs(
                self.reference, batch, responses, forbidden=self._forbidden, temperature=self._temperature
            )
            return lp
        with set_adapters_enabled(self.actor, False):
            lp, _ = compute_response_logprobs(
                self.actor, batch, responses, forbidden=self._forbidden, temperature=self._temperature
            )
        return lp

    # ------------------------------------------------------------------ the update
    def update(
        self, trajectories: Sequence[Trajectory], *, group_ids: Sequence[Hashable] | None = None
    ) -> UpdateMetrics:
        """One update on completed trajectories (see the module docstring).

        During the first ``critic_warmup_updates`` calls only the critic trains (warm-up
        lambda and epochs); the actor's parameters stay bit-identical, the policy keeps its
        weights and version. Afterwards (and always in GRPO) the actor trains and the policy
        receives its weights with ``version + 1``. ``group_ids`` (GRPO): one group per
        trajectory, default the task id. Blocking: from asyncio code run it in a thread.
        """
        cfg = self.config
        t0 = time.perf_counter()
        warmup = self.in_warmup
        version_before = self.policy_version
        fresh, pruned = self._prune_negatives(trajectories, group_ids)
        if group_ids is not None and pruned:
            kept = {t.episode_id for t in fresh}
            group_ids = [g for t, g in zip(trajectories, group_ids, strict=True) if t.episode_id in kept]
        replayed = self.replay.sample(len(fresh), self._py_rng()) if self.replay is not None and not warmup else []
        fresh_ids = {t.episode_id for t in fresh}
        replayed = [t for t in replayed if t.episode_id not in fresh_ids]  # the same episode handed in again
        if replayed and group_ids is not None:
            group_ids = [*group_ids, *(_group_of(t) for t in replayed)]
        batch = self.prepare([*fresh, *replayed], group_ids=group_ids)
        batch = replace(batch, pruned_trajectories=pruned, replayed_trajectories=len(replayed))
        if self.replay is not None and not warmup:
            self.replay.insert(fresh, _mean_advantage_per_trajectory(batch, fresh), self.updates)
        t1 = time.perf_counter()
        train_actor = not warmup
        epochs = cfg.critic_warmup_epochs if warmup else cfg.ppo_epochs
        totals = self._train(batch, epochs=epochs, train_actor=train_actor)
        t2 = time.perf_counter()
        self.updates += 1
        if train_actor:
            self.policy_version += 1
            self.policy.load_weights(self.actor_state_dict(), self.policy_version)
        t3 = time.perf_counter()
        metrics = replace(
            self._metrics(batch, totals, warmup, train_actor, epochs, version_before),
            prepare_s=batch.preprocess_s, scoring_s=batch.scoring_s, train_s=t2 - t1, total_s=t3 - t0,
        )
        logger.info(
            "update %d (%s): %d steps, policy v%d, value loss %s, policy loss %s, %.1fs",
            metrics.update, metrics.stage, metrics.steps, metrics.policy_version,
            _fmt(metrics.value_loss), _fmt(metrics.policy_loss), metrics.total_s,
        )
        return metrics

    def _py_rng(self) -> random.Random:
        """A ``random.Random`` drawn from the learner's own generator (checkpointed with it)."""
        return random.Random(int(torch.randint(0, 2**62, (1,), generator=self._generator)))

    def _prune_negatives(
        self, trajectories: Sequence[Trajectory], group_ids: Sequence[Hashable] | None
    ) -> tuple[list[Trajectory], int]:
        """MobileRL's negative pruning (``config.negative_pruning``): the trajectories kept
        and how many were muted. Infrastructure truncations and unscored episodes count as
        neither success nor failure and are always kept."""
        if not self.config.negative_pruning:
            return list(trajectories), 0
        groups = list(group_ids) if group_ids is not None else [_group_of(t) for t in trajectories]
        scored = [i for i, t in enumerate(trajectories) if t.success is not None]
        keep_scored = negative_pruning_keep(
            [trajectories[i].success is True for i in scored], [groups[i] for i in scored],
            max_negatives_per_positive=self.config.max_negatives_per_positive, rng=self._py_rng(),
        )
        muted = {scored[j] for j, keep in enumerate(keep_scored) if not keep}
        kept = [t for i, t in enumerate(trajectories) if i not in muted]
        if not any(t.transitions for t in kept):  # nothing left to learn from: keep the batch as it is
            logger.warning("negative pruning muted every trajectory of the batch; training on it unpruned")
            return list(trajectories), 0
        return kept, len(muted)

    def _train(self, batch: UpdateBatch, *, epochs: int, train_actor: bool) -> _Totals:
        cfg = self.config
        totals = _Totals()
        self.actor.train(False)
        if cfg.critic_mini_batch_size is None or self.critic is None:
            self._passes(batch, totals, epochs=epochs, mini=cfg.mini_batch_size, actor=train_actor, critic=True)
        else:  # separate critic with its own mini-batch size: its passes follow the actor's
            if train_actor:
                self._passes(batch, totals, epochs=epochs, mini=cfg.mini_batch_size, actor=True, critic=False)
            self._passes(batch, totals, epochs=epochs, mini=cfg.critic_mini_batch_size, actor=False, critic=True)
        return totals

    def _passes(
        self, batch: UpdateBatch, totals: _Totals, *, epochs: int, mini: int, actor: bool, critic: bool
    ) -> None:
        """``epochs`` shuffled passes of ``mini``-row optimizer steps of the actor and/or critic."""
        train_actor = actor
        shared = self.critic is not None and self.critic.shared
        # Separate critic: its own forward/backward. Shared: the value loss rides on the actor's
        # forward; during warm-up (actor frozen) the head trains on detached hidden states.
        critic_pass = critic and self.critic is not None and (not shared or not train_actor)
        critic_optimizer = self.critic_optimizer if critic else None
        n = len(batch)
        micro = self.config.micro_batch_size
        for epoch in range(epochs):
            perm = torch.randperm(n, generator=self._generator).tolist()
            for mb_index, mb_start in enumerate(range(0, n, mini)):
                mb = perm[mb_start : mb_start + mini]
                mb_tokens = int(batch.response_mask[mb].sum())
                first = epoch == 0 and mb_index == 0
                policy_loss = value_loss_sum = 0.0
                if train_actor:
                    self.actor_optimizer.zero_grad(set_to_none=True)
                if critic_optimizer is not None:
                    critic_optimizer.zero_grad(set_to_none=True)
                for start in range(0, len(mb), micro):
                    idx = mb[start : start + micro]
                    inputs = self._collate([batch.inputs[i] for i in idx])
                    responses = [batch.rows[i].response_ids for i in idx]
                    width = max(len(r) for r in responses)
                    sel = torch.tensor(idx, device=self.device)
                    mask = batch.response_mask[sel, :width]
                    if train_actor:
                        pl, vl = self._actor_micro(batch, sel, inputs, responses, mask, mb_tokens, len(mb), totals, first)
                        policy_loss += pl
                        value_loss_sum += vl
                    if critic_pass:
                        value_loss_sum += self._critic_micro(
                            batch, sel, inputs, responses, mask, mb_tokens, len(mb), totals,
                            backbone_grad=not shared,
                        )
                if train_actor:
                    totals.policy_losses.append(policy_loss)
                    totals.actor_norms.append(self._step(self.actor_optimizer, self._actor_params, totals))
                if critic_optimizer is not None:
                    totals.value_losses.append(value_loss_sum)
                    totals.critic_norms.append(self._step(critic_optimizer, self._critic_params, totals))
                totals.steps += 1
                self.optimizer_steps += 1

    def _actor_micro(
        self, batch: UpdateBatch, sel: torch.Tensor, inputs: Mapping[str, torch.Tensor],
        responses: list[tuple[int, ...]], mask: torch.Tensor, mb_tokens: int, mb_rows: int,
        totals: _Totals, first: bool,
    ) -> tuple[float, float]:
        cfg = self.config
        width = mask.shape[1]
        shared_critic = self.critic is not None and self.critic.shared
        agg = {"loss_agg_mode": cfg.loss_agg_mode, "batch_num_tokens": mb_tokens, "global_batch_size": mb_rows}
        with capture_outputs(self._actor_backbone if shared_critic else None, self._lm_head) as captured:
            logprob, lp_mask = compute_response_logprobs(
                self.actor, inputs, responses, forbidden=self._forbidden, temperature=self._temperature
            )
        if not torch.equal(lp_mask, mask):
            raise RuntimeError("internal: response masks of the batch and the scorer differ")
        old = batch.old_logprobs[sel, :width]
        pg = ppo_policy_loss(
            old, logprob, batch.advantages[sel, :width], mask,
            clip_ratio=cfg.clip_ratio, clip_ratio_low=cfg.clip_low, clip_ratio_high=cfg.clip_high,
            clip_ratio_c=cfg.clip_ratio_c, **agg,
        )
        loss = pg.loss
        tokens = float(mask.sum())
        # Entropy of the masked, tempered distribution the log-probs come from.
        logits = captured["logits"][:, :-1]
        with torch.set_grad_enabled(cfg.entropy_coef > 0 and torch.is_grad_enabled()):
            logp_all = masked_log_softmax(logits, self._forbidden, self._temperature)
            entropy = entropy_from_logits(logp_all.masked_fill(self._forbidden, -1e30))
        if cfg.entropy_coef > 0:
            loss = loss - cfg.entropy_coef * aggregate_loss(entropy, mask, **agg)
        if cfg.kl_coef > 0:
            assert batch.ref_logprobs is not None
            kl = kl_penalty(logprob, batch.ref_logprobs[sel, :width], kind=cfg.kl_estimator)
            loss = loss + cfg.kl_coef * aggregate_loss(kl, mask, **agg)
            totals.kl_ref += float(masked_mean(kl.detach(), mask)) * tokens
        value_part = 0.0
        if shared_critic:
            assert self.critic is not None and batch.values is not None and batch.returns is not None
            values = self.critic.head_values(captured["hidden"], inputs["input_ids"].shape[1], width)
            vl = value_loss(
                values.masked_fill(~mask, 0.0), batch.values[sel, :width], batch.returns[sel, :width], mask,
                clip_range_value=cfg.value_clip, **agg,
            )
            loss = loss + cfg.value_loss_coef * vl.loss
            value_part = float(vl.loss.detach())
            totals.value_tokens += tokens
            totals.value_clip += vl.clip_fraction * tokens
        loss.backward()
        totals.tokens += tokens
        totals.clip += pg.clip_fraction * tokens
        totals.clip_lower += pg.clip_fraction_lower * tokens
        totals.approx_kl += pg.approx_kl * tokens
        totals.entropy += float(masked_mean(entropy.detach(), mask)) * tokens
        if first:
            log_ratio = (logprob.detach() - old).masked_fill(~mask, 0.0)
            totals.initial_log_ratio_max = max(totals.initial_log_ratio_max or 0.0, float(log_ratio.abs().max()))
            outside = (log_ratio > math.log1p(cfg.clip_high)) | (log_ratio < math.log1p(-cfg.clip_low))
            totals.initial_outside += float((outside & mask).sum())
            totals.initial_tokens += tokens
        return float(pg.loss.detach()), value_part

    def _critic_micro(
        self, batch: UpdateBatch, sel: torch.Tensor, inputs: Mapping[str, torch.Tensor],
        responses: list[tuple[int, ...]], mask: torch.Tensor, mb_tokens: int, mb_rows: int,
        totals: _Totals, *, backbone_grad: bool,
    ) -> float:
        cfg = self.config
        assert self.critic is not None and batch.values is not None and batch.returns is not None
        width = mask.shape[1]
        values, _ = self.critic(inputs, responses, backbone_grad=backbone_grad)
        vl = value_loss(
            values, batch.values[sel, :width], batch.returns[sel, :width], mask,
            clip_range_value=cfg.value_clip, loss_agg_mode=cfg.loss_agg_mode,
            batch_num_tokens=mb_tokens, global_batch_size=mb_rows,
        )
        vl.loss.backward()
        tokens = float(mask.sum())
        totals.value_tokens += tokens
        totals.value_clip += vl.clip_fraction * tokens
        return float(vl.loss.detach())

    def _step(self, optimizer: torch.optim.Optimizer, params: list[nn.Parameter], totals: _Totals) -> float:
        norm = float(torch.nn.utils.clip_grad_norm_(params, self.config.grad_clip))
        if not math.isfinite(norm):
            logger.warning("non-finite gradient norm %s: optimizer step skipped", norm)
            optimizer.zero_grad(set_to_none=True)
            totals.skipped += 1
            return norm
        optimizer.step()
        return norm

    def _metrics(
        self, batch: UpdateBatch, totals: _Totals, warmup: bool, actor: bool, epochs: int, version_before: int
    ) -> UpdateMetrics:
        cfg = self.config
        trajs = batch.trajectories
        returns_per_traj = [sum(t.reward for t in traj.transitions) for traj in trajs]
        verified = [t.success for t in trajs if t.success is not None]
        lags = [version_before - r.policy_version for r in batch.rows]
        mask = batch.response_mask
        stage = (
            "critic_warmup" if warmup else ("ppo" if cfg.estimator == "gae" else cfg.estimator)
        )
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
            update=self.updates,
            stage=stage,
            policy_version=self.policy_version,
            actor_updated=actor,
            trajectories=len(trajs),
            steps=len(batch),
            response_tokens=int(mask.sum()),
            empty_trajectories=batch.empty_trajectories,
            dropped_infra_trajectories=batch.dropped_infra,
            unverified_trajectories=batch.dropped_unverified,
            episode_return_mean=sum(returns_per_traj) / len(returns_per_traj),
            success_rate=(sum(verified) / len(verified)) if verified else None,
            truncated_fraction=sum(
                1 for t in trajs if t.termination is not None and t.termination.truncated
            ) / len(trajs),
            version_lag_mean=sum(lags) / len(lags),
            version_lag_max=max(lags),
            epochs=epochs,
            optimizer_steps=totals.steps,
            skipped_steps=totals.skipped,
            policy_loss=_mean(totals.policy_losses) if actor else None,
            clip_fraction=totals.clip / tok if actor else None,
            clip_fraction_lower=totals.clip_lower / tok if actor else None,
            approx_kl=totals.approx_kl / tok if actor else None,
            initial_log_ratio_max=totals.initial_log_ratio_max if actor else None,
            initial_clip_fraction=totals.initial_outside / totals.initial_tokens if actor and totals.initial_tokens else None,
            behaviour_clip_fraction=batch.behaviour_clip_fraction,
            pruned_trajectories=batch.pruned_trajectories,
            replayed_trajectories=batch.replayed_trajectories,
            replay_size=len(self.replay) if self.replay is not None else 0,
            entropy=totals.entropy / tok if actor else None,
            kl_to_reference=totals.kl_ref / tok if actor and cfg.kl_coef > 0 else None,
            actor_grad_norm=_mean(totals.actor_norms) if actor else None,
            value_loss=_mean(totals.value_losses) if self.critic is not None else None,
            value_clip_fraction=totals.value_clip / vtok if self.critic is not None else None,
            critic_grad_norm=_mean(totals.critic_norms) if self.critic is not None else None,
            value_mean=value_mean,
            return_mean=return_mean,
            explained_variance=explained,
        )

    # ------------------------------------------------------------------ checkpoints
    def save(
        self,
        path: str | os.PathLike[str],
        *,
        pending: Sequence[Trajectory] = (),
        extra_state: Mapping[str, JsonValue] | None = None,
    ) -> Path:
        """Write a checkpoint directory atomically (temp directory, fsync, rename).

        ``pending``: completed trajectories not trained yet (the buffer's carry-over; pickled).
        ``extra_state``: any JSON-serialisable caller state, e.g. ``{"curriculum":
        curriculum.state_dict()}``. A crash (even ``kill -9``) at any point leaves either the
        previous checkpoint or the new one at ``path`` (see ``docs/learner.md``).
        """
        target = Path(path)
        tmp, extra_json = stage_checkpoint(target, pending, extra_state)
        try:
            _save_torch(self.actor.state_dict(), tmp / "actor.pt")
            if self.critic is not None:
                _save_torch(self.critic.state_dict(), tmp / "critic.pt")
            if self.reference is not None:
                _save_torch(self.reference.state_dict(), tmp / "reference.pt")
            optim = {"actor": self.actor_optimizer.state_dict()}
            if self.critic_optimizer is not None:
                optim["critic"] = self.critic_optimizer.state_dict()
            _save_torch(optim, tmp / "optimizers.pt")
            _save_torch({"generator": self._generator.get_state()}, tmp / "rng.pt")
            with open(tmp / "pending.pkl", "wb") as fh:
                pickle.dump(list(pending), fh, protocol=pickle.HIGHEST_PROTOCOL)
                _fsync(fh)
            if self.replay is not None:
                with open(tmp / "replay.pkl", "wb") as fh:
                    pickle.dump(self.replay.state(), fh, protocol=pickle.HIGHEST_PROTOCOL)
                    _fsync(fh)
            manifest = {
                "format_version": CHECKPOINT_FORMAT_VERSION,
                "updates": self.updates,
                "policy_version": self.policy_version,
                "optimizer_steps": self.optimizer_steps,
                "config": self.config.model_dump(mode="json"),
                "pending_episode_ids": [t.episode_id for t in pending],
                "extra_state": json.loads(extra_json),
                "torch": torch.__version__,
                "saved_at": time.time(),
            }
            commit_checkpoint(tmp, target, manifest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        logger.info("checkpoint saved to %s (update %d, policy v%d)", target, self.updates, self.policy_version)
        return target

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], policy: TrainablePolicy, *, config: LearnerConfig | None = None
    ) -> LocalLearner:
        """Rebuild a learner from :meth:`save` and bring ``policy`` to the saved weights.

        ``policy`` must be built like the original one (same architecture and processor,
        e.g. from the same initial checkpoint). If the saved policy version is newer than the
        policy's, the saved actor weights are pushed with that version; if equal, the policy's
        weights must already equal the actor's. ``config`` may change hyperparameters but not
        the model structure (algorithm, critic, lora, kl on/off). The pending trajectories and
        extra state are on ``learner.resume_state``.
        """
        src = resolve_checkpoint(path)
        manifest = _read_manifest(src)
        saved = LearnerConfig.model_validate(manifest["config"])
        if config is None:
            config = saved
        else:
            changed = [
                name for name in ("algorithm", "critic", "lora")
                if getattr(config, name) != getattr(saved, name)
            ]
            if (config.kl_coef > 0) != (saved.kl_coef > 0):
                changed.append("kl_coef (on/off)")
            if changed:
                raise ValueError(
                    f"{src}: config changes the model structure ({', '.join(changed)}) of the "
                    "checkpoint; only hyperparameters may change on resume"
                )
        learner = cls(policy, config)
        learner.actor.load_state_dict(_load_torch(src / "actor.pt", learner.device))
        if learner.critic is not None:
            learner.critic.load_state_dict(_load_torch(src / "critic.pt", learner.device))
        if learner.reference is not None:
            learner.reference.load_state_dict(_load_torch(src / "reference.pt", learner.device))
        optim = _load_torch(src / "optimizers.pt", learner.device)
        learner.actor_optimizer.load_state_dict(optim["actor"])
        if learner.critic_optimizer is not None:
            learner.critic_optimizer.load_state_dict(optim["critic"])
        if config is not saved:
            _set_lrs(learner, config)
        learner._generator.set_state(_load_torch(src / "rng.pt", "cpu")["generator"])
        learner.updates = int(manifest["updates"])
        learner.optimizer_steps = int(manifest["optimizer_steps"])
        saved_version = int(manifest["policy_version"])
        learner.policy_version = saved_version
        learner._sync_policy(saved_version, src)
        with open(src / "pending.pkl", "rb") as fh:
            pending = pickle.load(fh)  # our own checkpoint: load only trusted ones (docs/learner.md)
        if learner.replay is not None and (src / "replay.pkl").is_file():
            with open(src / "replay.pkl", "rb") as fh:
                learner.replay.restore(pickle.load(fh))
        learner.resume_state = ResumeState(path=src, pending=pending, extra_state=manifest["extra_state"])
        logger.info("resumed from %s: update %d, policy v%d, %d pending trajectories",
                    src, learner.updates, saved_version, len(pending))
        return learner

    def _sync_policy(self, saved_version: int, src: Path) -> None:
        weights = self.actor_state_dict()
        if saved_version > self.policy.version:
            self.policy.load_weights(weights, saved_version)
            return
        if saved_version < self.policy.version:
            raise ValueError(
                f"{src}: the policy is at version {self.policy.version}, newer than the "
                f"checkpoint's {saved_version}; load into a freshly built policy"
            )
        current = self.policy.vlm.model.state_dict()
        differing = [k for k, v in weights.items() if k in current and not torch.equal(current[k].to(v.device), v)]
        if differing:
            raise ValueError(
                f"{src}: the policy has the checkpoint's version {saved_version} but different "
                f"weights ({len(differing)} tensors, e.g. {differing[0]!r}); build the policy from "
                "the same initial model as the run that saved the checkpoint"
            )


# --------------------------------------------------------------------------------------
# Checkpoint files
# --------------------------------------------------------------------------------------
MANIFEST = "learner.json"


def resolve_checkpoint(path: str | os.PathLike[str]) -> Path:
    """The complete checkpoint at ``path``, or the previous one if a crash hit between the two
    renames of :meth:`LocalLearner.save` (it then sits at ``.<name>.old``)."""
    target = Path(path)
    if (target / MANIFEST).is_file():
        return target
    backup = target.parent / f".{target.name}.old"
    if not target.exists() and (backup / MANIFEST).is_file():
        logger.warning("%s is missing; resuming from the previous checkpoint %s", target, backup)
        return backup
    raise FileNotFoundError(f"{target} is not a learner checkpoint (no {MANIFEST})")


def stage_checkpoint(
    target: Path, pending: Sequence[Trajectory], extra_state: Mapping[str, JsonValue] | None
) -> tuple[Path, str]:
    """Check a save's inputs and make the temporary directory it writes into (next to
    ``target``, stale ones from killed saves removed); returns it and ``extra_state`` as JSON.
    :func:`commit_checkpoint` finishes the save."""
    try:
        extra_json = json.dumps(dict(extra_state or {}))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"extra_state must be JSON-serialisable: {exc}") from exc
    for t in pending:
        if t.termination is None:
            raise ValueError(f"pending trajectory {t.episode_id!r} is not completed")
    if target.exists() and not (target / MANIFEST).is_file():
        raise FileExistsError(
            f"{target} exists and is not a learner checkpoint (no {MANIFEST}); refusing to "
            "replace it: pass a new or checkpoint directory"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f".{target.name}.tmp-*"):  # left by a killed save
        shutil.rmtree(stale)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    return tmp, extra_json


def commit_checkpoint(tmp: Path, target: Path, manifest: dict) -> None:
    """Write the manifest last into the fully written ``tmp`` and swap it into ``target``
    atomically: a checkpoint directory with a manifest is always complete."""
    with open(tmp / MANIFEST, "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=2)
        _fsync(fh)
    _fsync_dir(tmp)
    _swap_into_place(tmp, target)


def _read_manifest(src: Path) -> dict:
    try:
        manifest = json.loads((src / MANIFEST).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{src / MANIFEST}: not valid JSON ({exc})") from exc
    if manifest.get("format_version") != CHECKPOINT_FORMAT_VERSION:
        raise ValueError(
            f"{src / MANIFEST}: format_version {manifest.get('format_version')!r} is not "
            f"{CHECKPOINT_FORMAT_VERSION}"
        )
    return manifest


def _swap_into_place(tmp: Path, target: Path) -> None:
    backup = target.parent / f".{target.name}.old"
    if target.exists():  # complete (it only ever appears by a rename): any backup is stale
        if backup.exists():
            shutil.rmtree(backup)
        os.rename(target, backup)
    # else a crash between the renames left the previous checkpoint in backup: keep it until
    # the new one is in place
    os.rename(tmp, target)
    _fsync_dir(target.parent)
    if backup.exists():
        shutil.rmtree(backup)


def _save_torch(obj: object, file: Path) -> None:
    with open(file, "wb") as fh:
        torch.save(obj, fh)
        _fsync(fh)


def _load_torch(file: Path, device: torch.device | str) -> dict:
    if not file.is_file():
        raise FileNotFoundError(f"checkpoint file {file} is missing")
    return torch.load(file, map_location=device, weights_only=True)


def _fsync(fh: BinaryIO | TextIO) -> None:
    fh.flush()
    os.fsync(fh.fileno())


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _set_lrs(learner: LocalLearner, config: LearnerConfig) -> None:
    for group in learner.actor_optimizer.param_groups:
        group["lr"] = config.actor_lr
    if learner.critic_optimizer is not None:
        for group in learner.critic_optimizer.param_groups:
            group["lr"] = config.critic_lr


def _mean(values: list[float]) -> float | None:
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else None


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _mean_advantage_per_trajectory(batch: UpdateBatch, trajectories: Sequence[Trajectory]) -> list[float]:
    """Mean token advantage of each of ``trajectories`` in ``batch`` (AdaPR's insertion score)."""
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    tokens = batch.response_mask.sum(dim=1).tolist()
    totals = (batch.advantages * batch.response_mask).sum(dim=1).tolist()
    for tid, total, n in zip(batch.trajectory_ids, totals, tokens, strict=True):
        sums[tid] = sums.get(tid, 0.0) + total
        counts[tid] = counts.get(tid, 0.0) + n
    return [sums[t.episode_id] / counts[t.episode_id] if counts.get(t.episode_id) else 0.0 for t in trajectories]


def _group_of(trajectory: Trajectory) -> Hashable:
    return trajectory.group if trajectory.group is not None else trajectory.task.id


def _shortest_path_deltas(rows: Sequence[StepRow], trajectories: Sequence[Trajectory], device: torch.device) -> torch.Tensor:
    """``(N,)`` reward change of each row under MobileRL's shortest-path adjustment: on the
    last step of every success longer than its group's shortest success, 0 elsewhere."""
    totals = [sum(t.reward for t in tr.transitions) for tr in trajectories]
    # Path length counts the trained agent's steps (its rows), not other agents' turns.
    last_step: dict[str, int] = {}
    for row in rows:
        last_step[row.episode_id] = max(row.step, last_step.get(row.episode_id, -1))
    adjusted = shortest_path_adjusted_rewards(
        totals, [last_step[tr.episode_id] + 1 for tr in trajectories], [tr.success is True for tr in trajectories],
        _row_groups(rows, trajectories),
    )
    delta_by_episode = {tr.episode_id: a - r for tr, a, r in zip(trajectories, adjusted, totals, strict=True)}
    out = torch.zeros(len(rows), dtype=torch.float32, device=device)
    for i, row in enumerate(rows):
        if row.step == last_step[row.episode_id]:
            out[i] = delta_by_episode[row.episode_id]
    return out


def _row_groups(rows: Sequence[StepRow], trajectories: Sequence[Trajectory]) -> list[Hashable]:
    """The group each trajectory's rows carry (``group_ids`` may have overridden it)."""
    group = {r.episode_id: r.group for r in rows}
    return [group[t.episode_id] for t in trajectories]


def restore_pending(buffer: ReplayBuffer, trajectories: Sequence[Trajectory]) -> None:
    """Put pending trajectories back into a fresh :class:`~darwin.buffer.ReplayBuffer` as
    completed episodes (through its public ``start``/``add``/``finish``), so the next
    ``take_completed()`` hands them out again. In group mode each trajectory goes back into
    its own group (``Trajectory.group``)."""
    for t in trajectories:
        if buffer.group_size is not None and t.group is None:
            raise ValueError(
                f"pending trajectory {t.episode_id!r} has no group but the buffer is in group mode; "
                "resume with the group_size the run was started with"
            )
        buffer.start(t.episode_id, group=t.group if buffer.group_size is not None else None)
        for tr in t.transitions:
            buffer.add(tr)
        buffer.finish(t)
    if buffer.group_size is not None:
        buffer.release_partial_groups()  # their running members were lost with the old process
