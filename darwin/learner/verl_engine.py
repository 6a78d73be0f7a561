"""verl's worker configs from darwin's settings: what :class:`~darwin.learner.verl_learner.VerlLearner`
starts its actor and critic workers with, built without Ray or a GPU, so a test (or ``--dry-run``)
can read exactly what reaches verl::

    >>> import tempfile
    >>> from darwin.learner.config import LearnerConfig
    >>> from darwin.learner.verl_config import VerlConfig
    >>> from darwin.learner.verl_engine import worker_configs
    >>> from darwin.models.factory import build_tiny_vlm
    >>> actor = build_tiny_vlm(seed=0).save_pretrained(tempfile.mkdtemp() + "/actor")  # verl reads its config
    >>> cfg = LearnerConfig(backend="verl", algorithm="grpo", critic={"warmup_updates": 0}, verl=VerlConfig(
    ...     model_path=str(actor), attn_implementation="flash_attention_2", remove_padding=True,
    ...     max_token_len_per_gpu=8192))
    >>> w = worker_configs(cfg)
    >>> w.actor.engine_config.use_dynamic_bsz, w.actor.engine_config.max_token_len_per_gpu
    (True, 8192)
    >>> w.actor.engine_config.infer_max_token_len_per_gpu, w.critic is None
    (16384, True)
    >>> w.actor.model_config.use_remove_padding, w.actor.model_config.enable_gradient_checkpointing
    (True, True)
    >>> w = worker_configs(cfg.model_copy(update={"verl": cfg.verl.model_copy(update={"fused_kernels": "torch"})}))
    >>> w.actor.model_config.use_fused_kernels, w.actor.model_config.fused_kernel_options
    (True, {'impl_backend': 'torch'})

Where verl's guide has a rule, the defaults follow it (docs/perf/perf_tuning.rst in verl's
repository): forward-only passes and the critic (a one-column value head instead of the
vocabulary) take twice the actor's training token budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from darwin.learner.config import LearnerConfig
from darwin.learner.verl_config import VerlConfig

if TYPE_CHECKING:
    from verl.workers.config import ActorConfig, CriticConfig, FSDPEngineConfig, HFModelConfig
    from verl.workers.engine_workers import TrainingWorkerConfig

__all__ = ["FUSED_MODEL_TYPES", "VerlWorkerConfigs", "worker_configs"]

FUSED_MODEL_TYPES = ("qwen2_vl", "qwen2_5_vl")
"""Model types whose fused log-probs (``VerlConfig.fused_kernels``) darwin has checked against the
whole logits on verl's fsdp2 workers (tests/learner/test_verl_vlm.py)."""


@dataclass(frozen=True)
class VerlWorkerConfigs:
    """What each worker group is started with, and the configs its loss function reads."""

    actor: TrainingWorkerConfig
    actor_loss: ActorConfig
    critic: TrainingWorkerConfig | None
    """None when the estimator has no critic (GRPO, GiGPO)."""
    critic_loss: CriticConfig | None


def worker_configs(config: LearnerConfig, critic_path: str | Path | None = None) -> VerlWorkerConfigs:
    """verl's configs for ``config``'s actor and, with ``critic_path`` (the critic's checkpoint,
    :func:`~darwin.learner.verl_runtime.prepare_critic_checkpoint`), its critic.

    Raises ValueError when the config needs a critic and no ``critic_path`` is given, or when
    ``fused_kernels`` is asked of a model outside :data:`FUSED_MODEL_TYPES`.
    """
    from verl.workers.config import ActorConfig, CriticConfig, FSDPOptimizerConfig
    from verl.workers.engine_workers import TrainingWorkerConfig

    s = config.verl
    if s is None:
        raise ValueError("worker_configs needs LearnerConfig(backend='verl', verl=VerlConfig(...))")
    if config.uses_critic and critic_path is None:
        raise ValueError(f"algorithm={config.algorithm.name!r} trains a critic: pass critic_path (its checkpoint)")
    actor_tokens = s.max_token_len_per_gpu
    critic_tokens = None if actor_tokens is None else 2 * actor_tokens
    actor_model = _model(s, s.model_path, fused_kernels=s.fused_kernels)
    model_type = actor_model.hf_config.model_type
    if s.fused_kernels != "off" and model_type not in FUSED_MODEL_TYPES:
        raise ValueError(
            f"verl.fused_kernels={s.fused_kernels!r} with a {model_type!r} model at {s.model_path}: darwin runs verl's "
            f"fused log-probs for {', '.join(FUSED_MODEL_TYPES)} only (for text decoders with a separate LM head, "
            "verl's fused forward multiplies sharded and whole weights under fsdp2 and fails); set fused_kernels='off'"
        )
    actor = TrainingWorkerConfig(
        model_type="language_model",
        model_config=actor_model,
        engine_config=_engine(s, config.seed, actor_tokens, s.resolved_infer_max_token_len_per_gpu),
        optimizer_config=FSDPOptimizerConfig(
            lr=config.actor_lr, weight_decay=config.weight_decay, betas=config.adam_betas, clip_grad=config.grad_clip
        ),
    )
    actor_loss = ActorConfig(
        strategy=s.strategy,
        rollout_n=1,
        ppo_mini_batch_size=config.mini_batch_size,
        ppo_micro_batch_size_per_gpu=None if actor_tokens else s.micro_batch_size_per_gpu,
        use_dynamic_bsz=actor_tokens is not None,
        ppo_max_token_len_per_gpu=actor_tokens or ActorConfig.ppo_max_token_len_per_gpu,  # read only when dynamic
        ppo_epochs=config.ppo_epochs,
        clip_ratio=config.ppo.clip_ratio,
        clip_ratio_low=config.ppo.clip_low,
        clip_ratio_high=config.ppo.clip_high,
        clip_ratio_c=config.ppo.clip_ratio_c,
        loss_agg_mode=config.ppo.loss_agg_mode,
        entropy_coeff=config.ppo.entropy_coef,
        use_kl_loss=False,
    )
    if not config.uses_critic:
        return VerlWorkerConfigs(actor=actor, actor_loss=actor_loss, critic=None, critic_loss=None)
    critic_model = _model(s, critic_path, fused_kernels="off")  # a one-column value head: no logits to fuse
    critic = TrainingWorkerConfig(
        model_type="value_model",
        model_config=critic_model,
        engine_config=_engine(s, config.seed, critic_tokens, None if critic_tokens is None else 2 * critic_tokens),
        optimizer_config=FSDPOptimizerConfig(
            lr=config.critic.lr, weight_decay=config.weight_decay, betas=config.adam_betas, clip_grad=config.grad_clip
        ),
    )
    critic_loss = CriticConfig(
        strategy=s.strategy,
        rollout_n=1,
        ppo_mini_batch_size=config.critic.mini_batch_size or config.mini_batch_size,
        ppo_micro_batch_size_per_gpu=None if critic_tokens else s.micro_batch_size_per_gpu,
        use_dynamic_bsz=critic_tokens is not None,
        ppo_max_token_len_per_gpu=critic_tokens or CriticConfig.ppo_max_token_len_per_gpu,  # read only when dynamic
        cliprange_value=config.ppo.value_clip,
        loss_agg_mode=config.ppo.loss_agg_mode,
        model=critic_model,
    )
    return VerlWorkerConfigs(actor=actor, actor_loss=actor_loss, critic=critic, critic_loss=critic_loss)


def _engine(s: VerlConfig, seed: int, train_tokens: int | None, infer_tokens: int | None) -> FSDPEngineConfig:
    from verl.workers.config import FSDPEngineConfig

    return FSDPEngineConfig(
        strategy=s.strategy,
        fsdp_size=s.fsdp_size,
        param_offload=s.param_offload,
        optimizer_offload=s.optimizer_offload,
        model_dtype=s.model_dtype,
        dtype="float32" if s.model_dtype == "fp32" else "bfloat16",
        use_dynamic_bsz=train_tokens is not None,
        # verl's own default for both is None (typed int): read only with use_dynamic_bsz.
        max_token_len_per_gpu=cast("int", train_tokens),
        infer_max_token_len_per_gpu=cast("int", infer_tokens),
        micro_batch_size_per_gpu=s.micro_batch_size_per_gpu,
        infer_micro_batch_size_per_gpu=s.micro_batch_size_per_gpu,
        use_torch_compile=s.use_torch_compile,
        use_remove_padding=s.remove_padding,
        seed=seed,
        mixed_precision={
            "param_dtype": s.resolved_compute_dtype,
            "reduce_dtype": "fp32",
            "buffer_dtype": "fp32",
        },
    )


def _model(s: VerlConfig, path: str | Path | None, *, fused_kernels: str) -> HFModelConfig:
    from verl.workers.config import HFModelConfig

    return HFModelConfig(
        path=str(path),
        load_tokenizer=False,
        use_remove_padding=s.remove_padding,
        enable_gradient_checkpointing=s.gradient_checkpointing,
        override_config={"attn_implementation": s.attn_implementation},
        use_fused_kernels=fused_kernels != "off",
        fused_kernel_options={"impl_backend": fused_kernels} if fused_kernels != "off" else {},
    )
