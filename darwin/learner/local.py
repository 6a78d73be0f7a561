"""LocalLearner: PPO (with critic warm-up) or GRPO on one process, CPU or one GPU.

    >>> import numpy as np
    >>> from darwin.learner.config import LearnerConfig
    >>> from darwin.learner.local import LocalLearner
    >>> from darwin.models.config import TinyVLMConfig
    >>> from darwin.models.factory import build_tiny_vlm
    >>> from darwin.policies.hf import HFPolicy, HFPolicyConfig
    >>> policy = HFPolicy(build_tiny_vlm(TinyVLMConfig(screen_width=56, screen_height=112), seed=0),
    ...                   HFPolicyConfig(max_new_tokens=4))
    >>> learner = LocalLearner(policy, LearnerConfig(critic={"warmup_updates": 1}, mini_batch_size=4,
    ...                                              speed={"micro_batch_size": 2}))
    >>> learner.updates, learner.policy_version
    (0, 0)

One :meth:`LocalLearner.update` call is one *update*: step rows from the trajectories,
old values (critic, no grad), advantages (token-level GAE over whole trajectories, or GRPO),
then epochs of shuffled mini-batches, each an optimizer step over accumulated
micro-batches; during the first ``critic.warmup_updates`` updates only the critic trains.
After an actor update the new weights go to the policy with ``version + 1``. The maths is in
:mod:`darwin.algos`; the procedure with shapes is in ``docs/learner.md``.

This module is the update itself. Around it: the models are built by
:func:`darwin.learner.networks.build_learner_models`, the advantage steps and
:class:`~darwin.learner.update_batch.UpdateBatch` are in :mod:`darwin.learner.update_batch`,
the metrics in :mod:`darwin.learner.metrics` and checkpoint files in
:mod:`darwin.learner.checkpoint`.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import os
import random
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypedDict

import torch
from pydantic import JsonValue
from torch import nn
from transformers import PreTrainedModel

from darwin.algos.losses import (
    aggregate_loss,
    entropy_from_logits,
    kl_penalty,
    masked_mean,
    ppo_policy_loss,
    value_loss,
)
from darwin.learner.base import LearnerBase
from darwin.learner.checkpoint import (
    LearnerState,
    ResumeState,
    check_resume_config,
    load_local_state,
    read_manifest,
    read_pending,
    resolve_checkpoint,
    save_local_checkpoint,
    sync_policy_to_checkpoint,
)
from darwin.learner.config import LearnerConfig
from darwin.learner.metrics import (
    LossTotals,
    UpdateMetrics,
    update_metrics,
)
from darwin.learner.networks import (
    TrainablePolicy,
    ValueModel,
    build_learner_models,
    lora_merged_state_dict,
    set_adapters_enabled,
)
from darwin.learner.replay import PositiveReplay
from darwin.learner.rft import AcceptedEpisodes, RftMetrics
from darwin.learner.step_rows import (
    ImageFeatureCache,
    LearnerDataError,
    RowInputs,
    StepRow,
    attach_image_features,
    attach_positions,
    collate,
    collect_step_rows,
    preprocess_rows,
    processor_inputs,
)
from darwin.learner.update_batch import (
    UpdateBatch,
    behaviour_correction,
    estimate_advantages,
    group_of,
    mean_advantage_per_trajectory,
    shaped_rewards,
    step_scores,
)
from darwin.models.anatomy import backbone_of, capture_outputs
from darwin.models.pixels import PixelEncoder
from darwin.models.scoring import compute_response_logprobs, masked_log_softmax, response_nll
from darwin.types import Prompt, StepScore, Trajectory

logger = logging.getLogger(__name__)

__all__ = ["LocalLearner"]

_Scorer = Callable[[Mapping[str, torch.Tensor], Sequence[Sequence[int]]], tuple[torch.Tensor, ...]]
"""(collated batch, responses) -> a tuple of (B, R) per-token scores (values and/or log-probs)."""


class LossAggregation(TypedDict):
    """How a micro-batch's per-token losses aggregate: the keyword arguments
    :func:`~darwin.algos.losses.ppo_policy_loss`, :func:`~darwin.algos.losses.value_loss` and
    :func:`~darwin.algos.losses.aggregate_loss` share."""

    loss_agg_mode: str
    batch_num_tokens: int | None
    global_batch_size: int | None


@dataclass(frozen=True)
class LocalTrainedUpdate:
    """What one local update trained on and accumulated, for its metrics."""

    batch: UpdateBatch
    totals: LossTotals
    epochs: int
    prepared_at: float
    """``time.perf_counter()`` when the batch was ready and training began."""


class LocalLearner(LearnerBase[LocalTrainedUpdate]):
    """PPO / GRPO learner for a :class:`~darwin.policies.hf.HFPolicy`, in one process.

    Models (all copies; the policy's model is never trained in place, so sampling can go
    on while the learner trains):

    - actor: a copy of ``policy.vlm.model`` (LoRA adapters if ``config.finetunes.lora``);
    - critic (PPO): ``separate`` (default, paper): a copy of the policy model's backbone
      (no LM head) with a value head ``Linear(hidden, 1)``; ``shared``: the value head on the
      actor's own hidden states;
    - reference (``ppo.kl_coef > 0``): a frozen copy of the initial actor (with LoRA: the base
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

    policy: TrainablePolicy

    def __init__(self, policy: TrainablePolicy, config: LearnerConfig | None = None) -> None:
        if not isinstance(policy, TrainablePolicy):
            raise TypeError(
                f"LocalLearner trains an HFPolicy (it re-scores with the policy's model and "
                f"processor); got {type(policy).__name__}"
            )
        self.policy = policy
        self.config = config if config is not None else LearnerConfig()
        cfg = self.config
        self.device = torch.device(cfg.speed.device) if cfg.speed.device is not None else policy.device
        self.updates = 0
        """Completed :meth:`update` calls (warm-up included)."""
        self.step_scores: tuple[StepScore, ...] = ()
        """The value, advantage and log-prob of every step the last update trained on."""
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
        # The sampler's recorded prompt ids plus this encoder rebuild the rows without the processor.
        image_processor = getattr(policy.vlm.processor, "image_processor", None)
        self._pixels = PixelEncoder(image_processor) if image_processor is not None else None
        self._image_token_id = getattr(policy.vlm.model.config, "image_token_id", None)

        models = build_learner_models(policy.vlm.model, cfg, self.device, self._generator)
        self.actor: PreTrainedModel = models.actor
        self.critic: ValueModel | None = models.critic
        self.reference: PreTrainedModel | None = models.reference
        self._actor_backbone = models.actor_backbone
        self._lm_head = models.lm_head
        # A tower that stays the base model's gives a screenshot the same features in every
        # update: they are computed once and read by the passes of every model with that tower.
        self._base_backbone = self._frozen_base_backbone()
        self.image_features = ImageFeatureCache() if self._base_backbone is not None else None
        """The base model's features of each screenshot seen (``None``: every tower trains)."""

        self._actor_params = [p for p in self.actor.parameters() if p.requires_grad]
        self.actor_optimizer = torch.optim.AdamW(
            self._actor_params, lr=cfg.actor_lr, betas=cfg.adam_betas, weight_decay=cfg.weight_decay
        )
        self._critic_params: list[nn.Parameter] = []
        self.critic_optimizer: torch.optim.Optimizer | None = None
        if self.critic is not None:
            self._critic_params = [p for p in self.critic.parameters() if p.requires_grad]
            self.critic_optimizer = torch.optim.AdamW(
                self._critic_params, lr=cfg.critic.lr, betas=cfg.adam_betas, weight_decay=cfg.weight_decay
            )

        # MobileRL's positive replay (AdaPR): past trajectories with the highest advantages
        self.replay: PositiveReplay[Trajectory] | None = None
        if cfg.levers.positive_replay_ratio > 0:
            self.replay = PositiveReplay(
                capacity=cfg.levers.replay_capacity,
                insert_fraction=cfg.levers.replay_insert_fraction,
                max_uses=cfg.levers.replay_max_uses,
                replay_ratio=cfg.levers.positive_replay_ratio,
            )

        # MobileRL's iterative SFT between RL updates: the accepted episodes it trains on
        self.accepted: AcceptedEpisodes | None = (
            AcceptedEpisodes(cfg.finetunes.rft.max_episodes) if cfg.finetunes.rft.every else None
        )

    # ------------------------------------------------------------------ properties
    def actor_state_dict(self) -> dict[str, torch.Tensor]:
        """The actor's weights in the policy model's key space (LoRA merged): what the policy
        receives after each actor update."""
        return (
            lora_merged_state_dict(self.actor)
            if self.config.finetunes.lora is not None
            else {k: v.detach() for k, v in self.actor.state_dict().items()}
        )

    def _frozen_base_backbone(self) -> nn.Module | None:
        """A backbone whose tower is the base model's and stays so: the actor's under
        ``speed.freeze_vision`` (every tower is then the base's), else the reference's, else a critic's
        frozen under ``critic.freeze_vision`` (``None``: every model's tower trains)."""
        if self.config.speed.freeze_vision:
            return self._actor_backbone
        if self.reference is not None:
            return backbone_of(self.reference)
        if self.config.critic.freeze_vision and self.critic is not None and not self.critic.shared:
            return self.critic.trunk
        return None

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
    def _row_inputs(self, rows: Sequence[StepRow]) -> list[RowInputs]:
        """The model inputs of ``rows``: the sampler's prompt ids and pixels, M-RoPE positions
        and, with a frozen tower, the cached image features."""
        inputs = preprocess_rows(
            self._build_inputs,
            rows,
            chunk=max(self.config.speed.micro_batch_size, 8),
            pixels=self._pixels,
            image_token_id=self._image_token_id,
        )
        inputs = attach_positions(self._actor_backbone, inputs)
        return self._base_feature_inputs(rows, inputs) if self.config.speed.freeze_vision else inputs

    def _base_feature_inputs(self, rows: Sequence[StepRow], inputs: list[RowInputs]) -> list[RowInputs]:
        """``inputs`` with the base model's image features in place of the pixels, for the
        models whose tower stays the base's (every model under ``speed.freeze_vision``; else the
        reference, and the critic under ``critic.freeze_vision``); ``inputs`` itself when
        every tower trains."""
        if self._base_backbone is None:
            return inputs
        return attach_image_features(
            self._base_backbone, inputs, images=[r.prompt.images for r in rows], cache=self.image_features
        )

    def prepare(
        self,
        trajectories: Sequence[Trajectory],
        *,
        group_ids: Sequence[Hashable] | None = None,
        lam: float | None = None,
    ) -> UpdateBatch:
        """Step rows, old values, reference log-probs and advantages for ``trajectories``
        (no training, no state change). ``lam`` defaults to the warm-up lambda while
        :attr:`in_warmup`, else ``config.lam``."""
        cfg = self.config
        t_start = time.perf_counter()
        collected = collect_step_rows(
            trajectories,
            group_ids=group_ids,
            drop_infra_truncated=cfg.infra_truncation == "drop",
            step_budget_terminal=cfg.step_budget == "terminal",
            agent=cfg.trained_agent,
        )
        rows = collected.rows
        if not rows:
            raise LearnerDataError(
                f"no step to train on: {len(trajectories)} trajectories, "
                f"{collected.empty_trajectories} without steps, {collected.dropped_infra} dropped "
                f"infrastructure truncations, {collected.dropped_unverified} unverified; collect more data before update()"
            )
        t_images = time.perf_counter()
        inputs = self._row_inputs(rows)
        # Under freeze_vision the rows carry the base tower's features already.
        base_inputs = inputs if cfg.speed.freeze_vision else self._base_feature_inputs(rows, inputs)
        critic_inputs = base_inputs if cfg.critic.freeze_vision else inputs
        t_scoring = time.perf_counter()
        n, longest = len(rows), max(len(r.response_ids) for r in rows)
        dev = self.device
        mask = torch.zeros(n, longest, dtype=torch.bool)
        old = torch.zeros(n, longest, dtype=torch.float32)
        for i, r in enumerate(rows):
            mask[i, : len(r.response_ids)] = True
            old[i, : len(r.old_logprobs)] = torch.tensor(r.old_logprobs, dtype=torch.float32)
        mask, old = mask.to(dev), old.to(dev)
        steps = torch.tensor([r.step for r in rows], dtype=torch.long)
        truncated = torch.tensor([r.truncated for r in rows], dtype=torch.bool)

        # Scores under the learner's models (no grad): old values, reference log-probs, and
        # with old_logprobs='recompute' the proximal log-probs of the current actor.
        values = ref = proximal = None
        behaviour = old
        recompute = cfg.ppo.old_logprobs == "recompute" and not self.in_warmup
        # Decoupled PPO: the clip window is centred on the current actor (the proximal policy),
        # not on the older policy that sampled the rows. Rows the current weights sampled
        # already hold the proximal log-probs: only stale rows need the current actor's.
        stale = [i for i, r in enumerate(rows) if r.policy_version != self.policy_version] if recompute else []
        with torch.no_grad():
            if self.critic is not None and self.critic.shared and stale:
                # A shared critic's values and the actor's log-probs come out of one forward.
                values, proximal = self._score(rows, inputs, longest, self._values_and_actor_logprobs)
                proximal = proximal[torch.tensor(stale, device=dev)]
            elif self.critic is not None:
                (values,) = self._score(rows, critic_inputs, longest, self._critic_values)
            t_reference = time.perf_counter()
            if cfg.ppo.kl_coef > 0:
                reference_inputs = base_inputs if self.reference is not None else inputs
                (ref,) = self._score(rows, reference_inputs, longest, self._reference_logprobs)
            t_proximal = time.perf_counter()
            if stale:
                if proximal is None:
                    (proximal,) = self._score(
                        [rows[i] for i in stale], [inputs[i] for i in stale], longest, self._actor_logprobs
                    )
                old = old.clone()
                old[torch.tensor(stale, device=dev)] = proximal
                old = old.masked_fill(~mask, 0.0)
            t_scored = time.perf_counter()

        next_values, from_next, from_last = None, 0, 0
        if cfg.truncation == "bootstrap" and self.critic is not None:
            next_values, from_next, from_last = self._next_state_values(rows, collected.trajectories)
        if lam is None:
            lam = cfg.critic.warmup_lam if self.in_warmup else cfg.lam
        rewards = shaped_rewards(cfg, rows, collected.trajectories, dev)
        advantages, returns = estimate_advantages(
            cfg,
            rows,
            rewards=rewards,
            response_mask=mask,
            step_indices=steps,
            truncated=truncated,
            values=values,
            lam=lam,
            next_values=next_values,
        )
        behaviour_clip = None
        if recompute:
            advantages, behaviour_clip = behaviour_correction(
                advantages,
                old,
                behaviour,
                mask,
                clip_low=cfg.ppo.clip_low,
                clip_high=cfg.ppo.clip_high,
                weight_cap=cfg.ppo.behaviour_weight_cap,
            )
        return UpdateBatch(
            rows=rows,
            inputs=inputs,
            critic_inputs=critic_inputs if critic_inputs is not inputs else None,
            rewards=rewards,
            response_mask=mask,
            old_logprobs=old,
            values=values,
            ref_logprobs=ref,
            advantages=advantages.masked_fill(~mask, 0.0),
            returns=returns,
            trajectory_ids=[r.episode_id for r in rows],
            step_indices=steps,
            truncated=truncated,
            lam=float(lam),
            trajectories=collected.trajectories,
            empty_trajectories=collected.empty_trajectories,
            dropped_infra=collected.dropped_infra,
            dropped_unverified=collected.dropped_unverified,
            preprocess_s=t_scoring - t_start,
            images_s=t_scoring - t_images,
            values_s=t_reference - t_scoring,
            reference_s=t_proximal - t_reference,
            proximal_s=t_scored - t_proximal,
            scoring_s=time.perf_counter() - t_scoring,
            behaviour_clip_fraction=behaviour_clip,
            bootstrapped_from_next=from_next,
            bootstrapped_from_last=from_last,
        )

    def _next_state_values(
        self, rows: list[StepRow], trajectories: Sequence[Trajectory]
    ) -> tuple[torch.Tensor, int, int]:
        """``(N,)`` the critic's ``V(s')`` on the last row of each truncated trajectory that
        recorded its next state (``Trajectory.next_prompt``), NaN elsewhere; and how many
        truncated trajectories were bootstrapped from that state and from their last observed one."""
        out = torch.full((len(rows),), float("nan"), device=self.device)
        last_row = {r.episode_id: i for i, r in enumerate(rows)}
        found: list[tuple[int, Prompt]] = []
        from_last = 0
        for t in trajectories:
            # the rows say which cuts are truncations (LearnerConfig.step_budget)
            if t.episode_id not in last_row or not rows[last_row[t.episode_id]].truncated:
                continue
            if t.next_prompt is None:
                from_last += 1
            else:
                found.append((last_row[t.episode_id], t.next_prompt))
        assert self.critic is not None
        size = self.config.speed.micro_batch_size
        for start in range(0, len(found), size):
            part = found[start : start + size]
            batch = {k: v.to(self.device) for k, v in self._build_inputs([p for _, p in part]).items()}
            with torch.no_grad():
                # The value before a response's first token is the prompt's own: any token will do.
                values, _ = self.critic(
                    batch,
                    [(self._pad_id,)] * len(part),
                    backbone_grad=False,
                    share_prefix=self.config.speed.share_prompt_prefix,
                )
            out[torch.tensor([i for i, _ in part], device=self.device)] = values[:, 0].float()
        return out, len(found), from_last

    def _score(
        self, rows: list[StepRow], inputs: list[RowInputs], longest: int, fn: _Scorer
    ) -> tuple[torch.Tensor, ...]:
        """``fn`` over the rows in micro-batches of rows of similar length (less padding; the
        scores do not depend on the order), each of its ``(B, R)`` outputs scattered back to
        row order as ``(N, longest)``."""
        outs: list[torch.Tensor] = []
        size = self.config.speed.micro_batch_size
        order = sorted(range(len(rows)), key=lambda i: inputs[i].input_ids.numel() + len(rows[i].response_ids))
        for start in range(0, len(rows), size):
            part = order[start : start + size]
            responses = [rows[i].response_ids for i in part]
            scores = fn(self._collate([inputs[i] for i in part]), responses)
            if not outs:
                outs = [torch.zeros(len(rows), longest, dtype=torch.float32, device=self.device) for _ in scores]
            where = torch.tensor(part, device=self.device)
            for out, score in zip(outs, scores, strict=True):
                out[where, : score.shape[1]] = score.float()
        return tuple(outs)

    def _response_logprobs(
        self, model: PreTrainedModel, batch: Mapping[str, torch.Tensor], responses: Sequence[Sequence[int]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``model``'s log-probs of ``responses`` as the policy sampled them (its forbidden tokens
        and temperature), the prompts' shared system turn run once when the config says so."""
        return compute_response_logprobs(
            model,
            batch,
            responses,
            forbidden=self._forbidden,
            temperature=self._temperature,
            share_prefix=self.config.speed.share_prompt_prefix,
        )

    def _actor_logprobs(
        self, batch: Mapping[str, torch.Tensor], responses: Sequence[Sequence[int]]
    ) -> tuple[torch.Tensor]:
        lp, _ = self._response_logprobs(self.actor, batch, responses)
        return (lp,)

    def _critic_values(
        self, batch: Mapping[str, torch.Tensor], responses: Sequence[Sequence[int]]
    ) -> tuple[torch.Tensor]:
        assert self.critic is not None
        values, _ = self.critic(
            batch, responses, backbone_grad=False, share_prefix=self.config.speed.share_prompt_prefix
        )
        return (values,)

    def _values_and_actor_logprobs(
        self, batch: Mapping[str, torch.Tensor], responses: Sequence[Sequence[int]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A shared critic's values and the actor's log-probs from the actor's one forward."""
        assert self.critic is not None and self.critic.shared
        with capture_outputs(self._actor_backbone, None) as captured:
            lp, mask = self._response_logprobs(self.actor, batch, responses)
        hidden = captured["hidden"]  # (B, P + R), P less a shared prefix
        values = self.critic.head_values(hidden, hidden.shape[1] - mask.shape[1], mask.shape[1])
        return values.masked_fill(~mask, 0.0), lp

    def _reference_logprobs(
        self, batch: Mapping[str, torch.Tensor], responses: Sequence[Sequence[int]]
    ) -> tuple[torch.Tensor]:
        model = self.reference if self.reference is not None else self.actor
        adapters = contextlib.nullcontext() if self.reference is not None else set_adapters_enabled(self.actor, False)
        with adapters:
            lp, _ = self._response_logprobs(model, batch, responses)
        return (lp,)

    # ------------------------------------------------------------------ the update
    def _pruning_rng(self) -> random.Random:
        return self._py_rng()

    def _train_update(
        self, trajectories: list[Trajectory], group_ids: Sequence[Hashable] | None, *, warmup: bool
    ) -> LocalTrainedUpdate:
        """Rows with replayed positives added (after warm-up), advantages, then the epochs; the
        step scores, the replay buffer and the accepted episodes are updated on the way."""
        cfg = self.config
        replayed = (
            self.replay.sample(len(trajectories), self._py_rng()) if self.replay is not None and not warmup else []
        )
        fresh_ids = {t.episode_id for t in trajectories}
        replayed = [t for t in replayed if t.episode_id not in fresh_ids]  # the same episode handed in again
        if replayed and group_ids is not None:
            group_ids = [*group_ids, *(group_of(t) for t in replayed)]
        batch = self.prepare([*trajectories, *replayed], group_ids=group_ids)
        batch = replace(batch, replayed_trajectories=len(replayed))
        self.step_scores = step_scores(batch, update=self.updates + 1)
        if self.replay is not None and not warmup:
            self.replay.insert(trajectories, mean_advantage_per_trajectory(batch, trajectories), self.updates)
        if self.accepted is not None:
            self.accepted.add(trajectories)
        prepared_at = time.perf_counter()
        epochs = cfg.critic.warmup_epochs if warmup else cfg.ppo_epochs
        totals = self._train(batch, epochs=epochs, train_actor=not warmup)
        return LocalTrainedUpdate(batch=batch, totals=totals, epochs=epochs, prepared_at=prepared_at)

    def _finish_update(
        self,
        trained: LocalTrainedUpdate,
        *,
        warmup: bool,
        version_before: int,
        started: float,
        trained_at: float,
        synced: float,
    ) -> UpdateMetrics:
        """The update's metrics, then the rejection-sampling fine-tune when one is due (its time
        is ``rft_s``, outside ``total_s``)."""
        batch, totals = trained.batch, trained.totals
        metrics = update_metrics(
            batch,
            totals,
            config=self.config,
            update=self.updates,
            policy_version=self.policy_version,
            version_before=version_before,
            warmup=warmup,
            actor_updated=not warmup,
            epochs=trained.epochs,
            has_critic=self.critic is not None,
            replay_size=len(self.replay) if self.replay is not None else 0,
        )
        if not warmup and self._rft_due():
            finetuned = self.rejection_finetune()
            metrics = replace(metrics, **finetuned, policy_version=self.policy_version)
        train_s = trained_at - trained.prepared_at
        return replace(
            metrics,
            prepare_s=batch.preprocess_s,
            scoring_s=batch.scoring_s,
            train_s=train_s,
            total_s=synced - started,
            images_s=batch.images_s,
            values_s=batch.values_s,
            reference_s=batch.reference_s,
            proximal_s=batch.proximal_s,
            forward_backward_s=train_s - totals.optimizer_s,
            optimizer_s=totals.optimizer_s,
        )

    # ------------------------------------------------------------------ rejection-sampling fine-tune
    def _rft_due(self) -> bool:
        """Whether ``finetunes.rft.every`` actor updates have passed since the last fine-tune (counting from
        the first actor update: the critic warm-up's updates do not count)."""
        every = self.config.finetunes.rft.every
        if not every:
            return False
        warmup = self.config.critic.warmup_updates if self.config.uses_critic else 0
        return (self.updates - warmup) % every == 0

    def rejection_finetune(self) -> RftMetrics:
        """MobileRL's iterative SFT (``LearnerConfig.finetunes.rft``): ``finetunes.rft.steps`` supervised steps of the
        actor on its own responses in the accepted episodes (:attr:`accepted`; parse errors
        left out), each on ``finetunes.rft.batch_size`` steps drawn without replacement, with a fresh
        AdamW; then the policy gets the weights with ``version + 1``. Below ``finetunes.rft.min_steps``
        accepted steps it trains nothing and says so. Returns the ``rft_*`` fields of
        :class:`~darwin.learner.metrics.UpdateMetrics`.

        The loss is :func:`~darwin.models.scoring.response_nll` at temperature 1 under the
        policy's forbidden-token mask, as ``darwin sft`` trains. Blocking.
        """
        cfg, rft = self.config, self.config.finetunes.rft
        assert self.accepted is not None, "LearnerConfig.finetunes.rft.every is 0"
        started = time.perf_counter()
        episodes = self.accepted.trajectories
        rows = [r for r in collect_step_rows(episodes, agent=cfg.trained_agent).rows if not r.parse_error]
        if len(rows) < rft.min_steps:
            logger.info(
                "rejection-sampling fine-tune waits: %d accepted steps in %d episodes, rft.min_steps=%d",
                len(rows),
                len(episodes),
                rft.min_steps,
            )
            return {"rft_steps": len(rows), "rft_episodes": len(episodes), "rft_s": time.perf_counter() - started}
        inputs = self._row_inputs(rows)
        optimizer = torch.optim.AdamW(
            self._actor_params, lr=rft.lr, betas=cfg.adam_betas, weight_decay=cfg.weight_decay
        )
        self.actor.train(False)
        order: list[int] = []
        losses: list[float] = []
        for _ in range(rft.steps):
            if len(order) < rft.batch_size:  # a fresh permutation once the rows are used up
                order += torch.randperm(len(rows), generator=self._generator).tolist()
            chosen, order = order[: rft.batch_size], order[rft.batch_size :]
            tokens = sum(len(rows[i].response_ids) for i in chosen)
            optimizer.zero_grad(set_to_none=True)
            loss_sum = 0.0
            by_length = sorted(chosen, key=lambda i: inputs[i].input_ids.numel() + len(rows[i].response_ids))
            for start in range(0, len(by_length), cfg.speed.micro_batch_size):
                idx = by_length[start : start + cfg.speed.micro_batch_size]
                logprobs, mask = compute_response_logprobs(
                    self.actor,
                    self._collate([inputs[i] for i in idx]),
                    [rows[i].response_ids for i in idx],
                    forbidden=self._forbidden,
                    temperature=1.0,
                    share_prefix=cfg.speed.share_prompt_prefix,
                )
                # every token of the batch weighs the same: the micro-batch's share of the mean
                loss = response_nll(logprobs, mask) * (float(mask.sum()) / tokens)
                loss.backward()
                loss_sum += float(loss.detach())
            norm = float(torch.nn.utils.clip_grad_norm_(self._actor_params, cfg.grad_clip))
            if not math.isfinite(norm):
                raise FloatingPointError(f"rejection-sampling fine-tune: gradient norm {norm}; lower rft.lr")
            optimizer.step()
            losses.append(loss_sum)
        self.policy_version += 1
        self.policy.load_weights(self.actor_state_dict(), self.policy_version)
        elapsed = time.perf_counter() - started
        logger.info(
            "rejection-sampling fine-tune: %d steps of %d accepted episodes, loss %.4f -> %.4f, policy v%d, %.1fs",
            len(rows),
            len(episodes),
            losses[0],
            losses[-1],
            self.policy_version,
            elapsed,
        )
        return {
            "rft_steps": len(rows),
            "rft_episodes": len(episodes),
            "rft_loss_first": losses[0],
            "rft_loss_last": losses[-1],
            "rft_s": elapsed,
        }

    def _py_rng(self) -> random.Random:
        """A ``random.Random`` drawn from the learner's own generator (checkpointed with it)."""
        return random.Random(int(torch.randint(0, 2**62, (1,), generator=self._generator)))

    # ------------------------------------------------------------------ training epochs
    def _train(self, batch: UpdateBatch, *, epochs: int, train_actor: bool) -> LossTotals:
        cfg = self.config
        totals = LossTotals()
        self.actor.train(False)
        if cfg.critic.mini_batch_size is None or self.critic is None:
            self._passes(batch, totals, epochs=epochs, mini=cfg.mini_batch_size, actor=train_actor, critic=True)
        else:  # separate critic with its own mini-batch size: its passes follow the actor's
            if train_actor:
                self._passes(batch, totals, epochs=epochs, mini=cfg.mini_batch_size, actor=True, critic=False)
            self._passes(batch, totals, epochs=epochs, mini=cfg.critic.mini_batch_size, actor=False, critic=True)
        return totals

    def _passes(
        self, batch: UpdateBatch, totals: LossTotals, *, epochs: int, mini: int, actor: bool, critic: bool
    ) -> None:
        """``epochs`` shuffled passes of ``mini``-row optimizer steps of the actor and/or critic."""
        train_actor = actor
        shared = self.critic is not None and self.critic.shared
        # Separate critic: its own forward/backward. Shared: the value loss rides on the actor's
        # forward; during warm-up (actor frozen) the head trains on detached hidden states.
        critic_pass = critic and self.critic is not None and (not shared or not train_actor)
        critic_optimizer = self.critic_optimizer if critic else None
        n = len(batch)
        micro = self.config.speed.micro_batch_size
        row_tokens = [batch.inputs[i].input_ids.numel() + len(batch.rows[i].response_ids) for i in range(n)]
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
                # Rows of similar length share a micro-batch (less padding); the mini-batch's
                # gradient is the same sum whatever the split.
                by_length = sorted(mb, key=row_tokens.__getitem__)
                for start in range(0, len(mb), micro):
                    idx = by_length[start : start + micro]
                    totals.add_micro_batch([row_tokens[i] for i in idx])
                    inputs = self._collate([batch.inputs[i] for i in idx])
                    critic_inputs = (
                        self._collate([batch.critic_inputs[i] for i in idx])
                        if critic_pass and batch.critic_inputs is not None
                        else inputs
                    )
                    responses = [batch.rows[i].response_ids for i in idx]
                    width = max(len(r) for r in responses)
                    sel = torch.tensor(idx, device=self.device)
                    mask = batch.response_mask[sel, :width]
                    if train_actor:
                        pl, vl = self._actor_micro(
                            batch, sel, inputs, responses, mask, mb_tokens, len(mb), totals, first
                        )
                        policy_loss += pl
                        value_loss_sum += vl
                    if critic_pass:
                        value_loss_sum += self._critic_micro(
                            batch,
                            sel,
                            critic_inputs,
                            responses,
                            mask,
                            mb_tokens,
                            len(mb),
                            totals,
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
        self,
        batch: UpdateBatch,
        sel: torch.Tensor,
        inputs: Mapping[str, torch.Tensor],
        responses: list[tuple[int, ...]],
        mask: torch.Tensor,
        mb_tokens: int,
        mb_rows: int,
        totals: LossTotals,
        first: bool,
    ) -> tuple[float, float]:
        """One actor micro-batch: PPO loss (+ entropy bonus, KL penalty, and the value loss of
        a shared critic), backward; returns its policy and value losses."""
        cfg = self.config
        width = mask.shape[1]
        shared_critic = self.critic is not None and self.critic.shared
        agg = LossAggregation(
            loss_agg_mode=cfg.ppo.loss_agg_mode, batch_num_tokens=mb_tokens, global_batch_size=mb_rows
        )
        with capture_outputs(self._actor_backbone if shared_critic else None, self._lm_head) as captured:
            logprob, lp_mask = self._response_logprobs(self.actor, inputs, responses)
        if not torch.equal(lp_mask, mask):
            raise RuntimeError("internal: response masks of the batch and the scorer differ")
        old = batch.old_logprobs[sel, :width]
        pg = ppo_policy_loss(
            old,
            logprob,
            batch.advantages[sel, :width],
            mask,
            clip_ratio=cfg.ppo.clip_ratio,
            clip_ratio_low=cfg.ppo.clip_low,
            clip_ratio_high=cfg.ppo.clip_high,
            clip_ratio_c=cfg.ppo.clip_ratio_c,
            **agg,
        )
        loss = pg.loss
        tokens = float(mask.sum())
        # Entropy of the masked, tempered distribution the log-probs come from.
        logits = captured["logits"][:, :-1]
        with torch.set_grad_enabled(cfg.ppo.entropy_coef > 0 and torch.is_grad_enabled()):
            logp_all = masked_log_softmax(logits, self._forbidden, self._temperature)
            entropy = entropy_from_logits(logp_all.masked_fill(self._forbidden, -1e30))
        if cfg.ppo.entropy_coef > 0:
            loss = loss - cfg.ppo.entropy_coef * aggregate_loss(entropy, mask, **agg)
        if cfg.ppo.kl_coef > 0:
            assert batch.ref_logprobs is not None
            kl = kl_penalty(logprob, batch.ref_logprobs[sel, :width], kind=cfg.ppo.kl_estimator)
            loss = loss + cfg.ppo.kl_coef * aggregate_loss(kl, mask, **agg)
            totals.kl_ref += float(masked_mean(kl.detach(), mask)) * tokens
        value_part = 0.0
        if shared_critic:
            assert self.critic is not None and batch.values is not None and batch.returns is not None
            hidden = captured["hidden"]  # (B, P + R), P less a shared prefix
            values = self.critic.head_values(hidden, hidden.shape[1] - width, width)
            vl = value_loss(
                values.masked_fill(~mask, 0.0),
                batch.values[sel, :width],
                batch.returns[sel, :width],
                mask,
                clip_range_value=cfg.ppo.value_clip,
                **agg,
            )
            loss = loss + cfg.ppo.value_loss_coef * vl.loss
            value_part = float(vl.loss.detach())
            totals.add_value(vl.clip_fraction, tokens)
        loss.backward()
        totals.add_policy(pg, float(masked_mean(entropy.detach(), mask)), tokens)
        if first:
            log_ratio = (logprob.detach() - old).masked_fill(~mask, 0.0)
            totals.add_initial_ratio(log_ratio, mask, tokens, clip_low=cfg.ppo.clip_low, clip_high=cfg.ppo.clip_high)
        return float(pg.loss.detach()), value_part

    def _critic_micro(
        self,
        batch: UpdateBatch,
        sel: torch.Tensor,
        inputs: Mapping[str, torch.Tensor],
        responses: list[tuple[int, ...]],
        mask: torch.Tensor,
        mb_tokens: int,
        mb_rows: int,
        totals: LossTotals,
        *,
        backbone_grad: bool,
    ) -> float:
        """One critic micro-batch: clipped value loss, backward; returns the loss."""
        cfg = self.config
        assert self.critic is not None and batch.values is not None and batch.returns is not None
        width = mask.shape[1]
        values, _ = self.critic(
            inputs, responses, backbone_grad=backbone_grad, share_prefix=cfg.speed.share_prompt_prefix
        )
        vl = value_loss(
            values,
            batch.values[sel, :width],
            batch.returns[sel, :width],
            mask,
            clip_range_value=cfg.ppo.value_clip,
            loss_agg_mode=cfg.ppo.loss_agg_mode,
            batch_num_tokens=mb_tokens,
            global_batch_size=mb_rows,
        )
        vl.loss.backward()
        totals.add_value(vl.clip_fraction, float(mask.sum()))
        return float(vl.loss.detach())

    def _step(self, optimizer: torch.optim.Optimizer, params: list[nn.Parameter], totals: LossTotals) -> float:
        """Clip the gradient norm and step; a non-finite norm skips the step (counted)."""
        started = time.perf_counter()
        norm = float(torch.nn.utils.clip_grad_norm_(params, self.config.grad_clip))
        if not math.isfinite(norm):
            logger.warning("non-finite gradient norm %s: optimizer step skipped", norm)
            optimizer.zero_grad(set_to_none=True)
            totals.skipped += 1
        else:
            optimizer.step()
        totals.optimizer_s += time.perf_counter() - started
        return norm

    def close(self) -> None:
        """Nothing to release: the models live in this process (the verl learner stops its workers)."""

    # ------------------------------------------------------------------ checkpoints
    def _state(self) -> LearnerState:
        return LearnerState(
            actor=self.actor,
            critic=self.critic,
            reference=self.reference,
            actor_optimizer=self.actor_optimizer,
            critic_optimizer=self.critic_optimizer,
            generator=self._generator,
            replay=self.replay,
            accepted=self.accepted,
        )

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
        target = save_local_checkpoint(
            path,
            self._state(),
            config=self.config,
            updates=self.updates,
            policy_version=self.policy_version,
            optimizer_steps=self.optimizer_steps,
            pending=pending,
            extra_state=extra_state,
        )
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
        manifest = read_manifest(src)
        saved = LearnerConfig.model_validate(manifest["config"])
        config = check_resume_config(src, saved, config)
        learner = cls(policy, config)
        load_local_state(src, learner._state(), learner.device)
        if config is not saved:  # a changed config's learning rates win over the restored ones
            learner._set_learning_rates()
        learner.updates = int(manifest["updates"])
        learner.optimizer_steps = int(manifest["optimizer_steps"])
        saved_version = int(manifest["policy_version"])
        learner.policy_version = saved_version
        sync_policy_to_checkpoint(learner.policy, learner.actor_state_dict(), saved_version, src)
        pending = read_pending(src)
        learner.resume_state = ResumeState(path=src, pending=pending, extra_state=manifest["extra_state"])
        logger.info(
            "resumed from %s: update %d, policy v%d, %d pending trajectories",
            src,
            learner.updates,
            saved_version,
            len(pending),
        )
        return learner

    def _set_learning_rates(self) -> None:
        for group in self.actor_optimizer.param_groups:
            group["lr"] = self.config.actor_lr
        if self.critic_optimizer is not None:
            for group in self.critic_optimizer.param_groups:
                group["lr"] = self.config.critic.lr
