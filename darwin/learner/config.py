"""Typed, validated configuration of the :class:`~darwin.learner.local.LocalLearner`.

Field defaults are the *embedded* values (tiny model, CPU, a run of minutes);
:meth:`LearnerConfig.paper` gives the paper's Table 1 values. Every field's help names its
paper value. Validation reports every problem at once::

    >>> from darwin.learner.config import LearnerConfig
    >>> LearnerConfig().critic.warmup_updates, LearnerConfig.paper().critic.warmup_updates
    (3, 30)
    >>> LearnerConfig(algorithm="grpo", critic={"warmup_updates": 0}).uses_critic
    False
    >>> LearnerConfig(mini_batch_size=6, speed={"micro_batch_size": 4}, critic={"lr": -1})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    pydantic_core._pydantic_core.ValidationError: 1 validation error for LearnerConfig
      Value error, invalid LearnerConfig (2 problem(s)):
    - critic.lr: Input should be greater than 0
    - mini_batch_size=6 is not a multiple of speed.micro_batch_size=4: e.g. speed.micro_batch_size=3 ...

The core choices (estimator, backend, discounting, the actor's optimiser, epochs and
mini-batches, what a cut episode is worth) sit at the top; the rest is grouped in sections:
``ppo`` (PPO's loss), ``critic`` (the value model and its warm-up), ``levers`` (optional
advantage and data levers, the group estimators' settings), ``speed`` (what changes time and
memory, not the maths) and ``finetunes`` (LoRA, rejection-sampling fine-tunes).
"""

from __future__ import annotations

import difflib
import types
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    model_validator,
)

from darwin.algos.estimators import get_estimator
from darwin.algos.losses import KL_ESTIMATORS, LOSS_AGG_MODES
from darwin.components import ComponentError, ComponentSpec, check_backend
from darwin.learner.verl_config import VerlConfig
from darwin.problems import problems_message

__all__ = [
    "PAPER_TABLE_1",
    "CriticConfig",
    "FinetunesConfig",
    "LearnerConfig",
    "LeversConfig",
    "LoraConfig",
    "PPOConfig",
    "RejectionFinetuneConfig",
    "SpeedConfig",
]


class LoraConfig(BaseModel):
    """Low-rank adapters (peft) on the actor and, if ``critic`` is set, on a separate critic's backbone.

    Only the adapters (and the value head) train; the policy still receives full merged
    weights (``W + B A * alpha / r``) after every actor update.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    rank: int = Field(8, ge=1, description="adapter rank r")
    alpha: float = Field(16.0, gt=0.0, description="scaling numerator: the update is B A * alpha / r")
    dropout: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="adapter dropout; keep 0 so that the first PPO ratio is exactly 1",
    )
    target_modules: tuple[str, ...] = Field(
        ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
        min_length=1,
        description="module names to adapt (the defaults are the text decoder's linears)",
    )
    critic: bool = Field(True, description="also put adapters on a separate critic's backbone (else it trains fully)")


class RejectionFinetuneConfig(BaseModel):
    """MobileRL's iterative rejection-sampling fine-tune, interleaved with RL: every ``every``
    updates the actor takes ``steps`` supervised steps (negative log-likelihood of the
    response tokens) on the policy's own responses in the most recent ``max_episodes``
    training episodes the verifier accepted, then the policy gets the new weights.

    The steps are the ones ``darwin sft --from-run`` trains on (the accepted episodes' actor
    steps, parse errors left out), taken from memory instead of the run database.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    every: int = Field(0, ge=0, description="actor updates between fine-tunes; 0: off")
    steps: int = Field(8, ge=1, description="supervised optimizer steps per fine-tune")
    lr: float = Field(1e-5, gt=0.0, description="the fine-tune's learning rate (its own AdamW, fresh each time)")
    batch_size: int = Field(16, ge=1, description="steps (rows) per optimizer step, drawn without replacement")
    max_episodes: int = Field(64, ge=1, description="accepted episodes kept (the most recent)")
    min_steps: int = Field(16, ge=1, description="fewer accepted steps than this: the fine-tune waits for more")


class PPOConfig(BaseModel):
    """PPO's loss: the clip windows, the value loss, the KL and entropy terms, and where the
    anchor log-probs come from (``LearnerConfig.ppo``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    clip_ratio: float = Field(0.2, gt=0.0, lt=1.0, description="PPO clip epsilon (paper: 0.2)")
    clip_ratio_low: float | None = Field(None, gt=0.0, lt=1.0, description="lower epsilon; None = clip_ratio")
    clip_ratio_high: float | None = Field(
        None, gt=0.0, description="upper epsilon; None = clip_ratio; larger = 'clip-higher' (DAPO)"
    )
    clip_ratio_c: float = Field(
        3.0, gt=1.0, description="dual-clip bound for negative advantages (verl's default 3.0; inf = off)"
    )
    value_clip: float = Field(
        0.5, ge=0.0, description="value-loss clip range around the old values (verl's default 0.5)"
    )
    loss_agg_mode: str = Field(
        "token-mean", description=f"how token losses become a scalar: one of {list(LOSS_AGG_MODES)}"
    )
    kl_coef: float = Field(
        0.0, ge=0.0, description="weight of the KL-to-reference loss term (0 = off, no reference model)"
    )
    kl_estimator: str = Field("low_var_kl", description=f"KL estimator: one of {list(KL_ESTIMATORS)}")
    entropy_coef: float = Field(0.0, ge=0.0, description="entropy bonus weight (0: entropy is only a metric)")
    value_loss_coef: float = Field(
        0.5, ge=0.0, description="weight of the value loss in the joint loss (critic.backbone='shared' only)"
    )
    old_logprobs: Literal["behaviour", "recompute"] = Field(
        "behaviour",
        description="PPO's anchor: the log-probs recorded at sampling (behaviour "
        "policy) or recomputed with the current actor at the start of the update (decoupled "
        "PPO, verl's default): stale rows then start inside the clip window",
    )
    behaviour_weight_cap: float | None = Field(
        None,
        gt=0.0,
        description="with old_logprobs='recompute': weight each token's loss by "
        "min(pi_prox / pi_behaviour, cap), AReaL's decoupled-PPO correction; None = off",
    )

    @property
    def clip_low(self) -> float:
        """The lower epsilon in force (``clip_ratio_low``, else ``clip_ratio``)."""
        return self.clip_ratio if self.clip_ratio_low is None else self.clip_ratio_low

    @property
    def clip_high(self) -> float:
        """The upper epsilon in force (``clip_ratio_high``, else ``clip_ratio``)."""
        return self.clip_ratio if self.clip_ratio_high is None else self.clip_ratio_high


class CriticConfig(BaseModel):
    """The critic (algorithm='gae'): where it lives, its optimiser and mini-batches, its
    warm-up and its value head's start (``LearnerConfig.critic``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backbone: Literal["separate", "shared"] = Field(
        "separate",
        description="separate: a second copy of the model with a value head (paper); shared: a "
        "value head on the actor's hidden states (one forward per micro-batch)",
    )
    lr: float = Field(1e-3, gt=0.0, description="critic AdamW learning rate (paper: 1e-5)")
    mini_batch_size: int | None = Field(
        None,
        ge=1,
        description="step rows per critic optimizer step with a separate critic; "
        "None = the top-level mini_batch_size (actor and critic step together)",
    )
    warmup_updates: int = Field(3, ge=0, description="first N updates train only the critic (paper: 30)")
    warmup_epochs: int = Field(4, ge=1, description="critic passes per warm-up update (paper: 4)")
    warmup_lam: float = Field(
        1.0, ge=0.0, le=1.0, description="GAE lambda during warm-up (paper: 1.0, Monte Carlo returns)"
    )
    value_head_init: Literal["calibrated", "random"] = Field(
        "calibrated",
        description="calibrated: weight 0, bias value_head_bias (paper); random: torch's Linear init",
    )
    value_head_bias: float = Field(
        0.1, description="initial value of every state under the calibrated init (paper: 0.1)"
    )
    freeze_vision: bool = Field(
        False,
        description="keep the separate critic's vision tower at its initial weights while the actor's trains: "
        "the critic then reads the features the reference model reads, computed once per screenshot "
        "(docs/learner.md, 'Speed')",
    )


class LeversConfig(BaseModel):
    """Optional levers on the advantages and the data (whitening, weighting, penalties,
    MobileRL's adjustments, positive replay) and the group estimators' settings
    (``LearnerConfig.levers``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    whiten_advantages: bool = Field(
        True, description="normalise advantages over the update batch's tokens (verl's GAE always does)"
    )
    whiten_by: Literal["batch", "task"] = Field(
        "batch",
        description="GAE whitening over the whole batch's tokens (verl) or within each "
        "task's tokens, so that tasks the critic misjudges do not set every task's scale",
    )
    sibling_baseline: bool = Field(
        True,
        description="branching rollouts: rows that acted from one exact state (StepRow.fork) get their return over "
        "their siblings' mean as advantage ('gae' only); False keeps GAE's for them too (an ablation)",
    )
    trajectory_weighting: bool = Field(
        False,
        description="every trajectory weighs the same in the loss (its tokens' advantages "
        "scaled by mean tokens per trajectory / its tokens); default: every token the same, so "
        "a 20-step failure weighs 3-4 times a success",
    )
    parse_error_penalty: float = Field(
        0.0,
        ge=0.0,
        description="reward subtracted at each unparseable step of the trained agent; it flows back "
        "through the return like any reward (the workflow's rewards are the verifier's alone). 0 = off",
    )
    format_penalty_advantage: float = Field(
        0.0,
        ge=0.0,
        description="local format penalty: the tokens of an unparseable step get "
        "advantage -x (after normalisation) instead of their GAE/GRPO advantage, and nothing "
        "flows back to earlier steps; use with parse_error_penalty=0. 0 = off",
    )
    shortest_path_adjustment: bool = Field(
        False,
        description="MobileRL: in a group, a success of length L gets r - max(L - L_min, 0) "
        "/ (2L), L_min the group's shortest success (needs group mode)",
    )
    negative_pruning: bool = Field(
        False,
        description="MobileRL: leave out groups whose trajectories all failed, and keep at "
        "most max_negatives_per_positive failures per success in a group (needs group mode)",
    )
    max_negatives_per_positive: float = Field(2.0, gt=0.0, description="negative pruning's cap")
    positive_replay_ratio: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="MobileRL's AdaPR: replay round(ratio x fresh "
        "trajectories) past positive trajectories in each update (0 = off); needs "
        "ppo.old_logprobs='recompute'",
    )
    replay_capacity: int = Field(256, ge=1, description="AdaPR buffer size (trajectories)")
    replay_insert_fraction: float = Field(
        0.25, gt=0.0, le=1.0, description="AdaPR: share of each update's trajectories (top by mean advantage) inserted"
    )
    replay_max_uses: int = Field(4, ge=1, description="AdaPR: a trajectory leaves the buffer after this many replays")
    grpo_norm_by_std: bool = Field(True, description="GRPO divides by the group std (False: Dr.GRPO)")
    grpo_weighting: Literal["trajectory", "step"] = Field(
        "trajectory", description="group statistics over trajectories (default) or step rows (verl)"
    )
    gigpo_gamma: float = Field(
        0.95, ge=0.0, le=1.0, description="GiGPO: discount of the step return (verl-agent: 0.95)"
    )
    gigpo_omega: float = Field(1.0, ge=0.0, description="GiGPO: weight of the step advantage")
    gigpo_step_norm: Literal["mean_norm", "mean_std_norm"] = Field(
        "mean_norm", description="GiGPO: step groups subtract their mean, or also divide by their std"
    )


class SpeedConfig(BaseModel):
    """What changes the learner's time and memory, not what it computes: micro-batches, the
    shared prompt prefix, a frozen vision tower, the device (``LearnerConfig.speed``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    micro_batch_size: int = Field(
        8,
        ge=1,
        description="step rows per forward/backward; gradients accumulate over the mini-batch (paper: 16 per GPU)",
    )
    share_prompt_prefix: bool = Field(
        True,
        description="run the text every prompt of a micro-batch starts with (the agent's system turn) once "
        "per forward and reuse its keys and values for every row; the same scores (docs/learner.md, 'Speed')",
    )
    freeze_vision: bool = Field(
        False,
        description="keep the vision tower at its initial weights in the actor, critic and reference: the "
        "image features are computed once per update and reused by every scoring and training pass "
        "(docs/learner.md, 'Speed')",
    )
    device: str | None = Field(None, description="learner device; None = the policy's device")


class FinetunesConfig(BaseModel):
    """What trains besides full-weight RL: LoRA adapters instead of all weights, and
    rejection-sampling fine-tunes between updates (``LearnerConfig.finetunes``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    lora: LoraConfig | None = Field(None, description="train low-rank adapters instead of all weights")
    rft: RejectionFinetuneConfig = Field(
        default_factory=RejectionFinetuneConfig,
        description="rejection-sampling fine-tunes between RL updates (MobileRL's iterative SFT; off by default)",
    )


PAPER_TABLE_1: dict[str, Any] = {
    "gamma": 1.0,
    "lam": 0.95,
    "actor_lr": 1e-6,
    "ppo_epochs": 4,
    "mini_batch_size": 64,
    "ppo": {"clip_ratio": 0.2},
    "critic": {"lr": 1e-5, "warmup_updates": 30, "warmup_epochs": 4, "warmup_lam": 1.0},
    "speed": {"micro_batch_size": 16},
}
"""The learner-side hyperparameters of the paper's Table 1, laid out as :class:`LearnerConfig`'s
fields and sections (rollout steps 256, horizon 32, max prompt 8192 and max response 512 live in
the buffer, workflow and policy configs)."""


class LearnerConfig(BaseModel):
    """Everything :class:`~darwin.learner.local.LocalLearner` needs (validated when built; frozen).

    Defaults are the embedded (tiny model, CPU) values; ``LearnerConfig.paper()`` gives the
    paper's Table 1. An *update* is one call of ``LocalLearner.update(trajectories)``; an
    optimizer *step* is one mini-batch. A section is given as its model or as a mapping of its
    fields (``critic={"warmup_updates": 0}``); ``--set`` reaches a field as
    ``learner.critic.warmup_updates``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    # --- algorithm ---------------------------------------------------------------------
    algorithm: ComponentSpec = Field(
        default_factory=lambda: ComponentSpec(name="gae"),
        description="advantage estimator (darwin.algos.estimators), a built-in name or the import path of an "
        "@advantage_estimator function: 'gae': critic + token-level GAE (paper); 'grpo': group-normalised trajectory "
        "advantages, no critic; 'gigpo': GRPO's episode advantage + step advantage over "
        "anchor-state groups, no critic",
    )
    gamma: float = Field(1.0, ge=0.0, le=1.0, description="discount per token (paper: 1.0)")
    lam: float = Field(0.95, ge=0.0, le=1.0, description="GAE lambda after warm-up (paper: 0.95)")

    # --- episodes: what is trained, what a cut is worth ----------------------------------
    truncation: Literal["zero", "bootstrap"] = Field(
        "zero",
        description="value after a truncated trajectory's last step: 'zero' (the paper's choice) or 'bootstrap' "
        "from the critic's V(s') at the screen the last action led to (Trajectory.next_prompt; the run records it), "
        "else at the last observed state",
    )
    step_budget: Literal["truncation", "terminal"] = Field(
        "truncation",
        description="an episode that ran out of steps: a 'truncation' (a time limit, valued by `truncation`) "
        "or 'terminal' (a failure; nothing is bootstrapped after it, so `truncation` applies to "
        "infrastructure cuts only, as in the paper's Fig. 6b, whose cuts were system crashes)",
    )
    infra_truncation: Literal["truncate", "drop"] = Field(
        "truncate",
        description="trajectories cut by an infrastructure failure: train on them as truncated "
        "(their steps carry reward 0) or leave them out of the update",
    )
    infra_only_updates: Literal["skip", "train"] = Field(
        "skip",
        description="an update whose trajectories, unverified ones left out, are all infrastructure truncations "
        "(or that has none left): 'skip' trains neither actor nor critic, counts the update and reports "
        "UpdateMetrics.actor_skipped_reason (metrics.jsonl: actor_skipped); 'train' trains on them like any batch "
        "(an all-unverified batch then raises LearnerDataError)",
    )
    trained_agent: str = Field(
        "actor",
        min_length=1,
        max_length=64,
        description="the agent whose steps are trained (Transition.agent): 'actor' acts on the phone; "
        "other agents of a multi-agent workflow (planner, reflector, verifier) stay out of the loss",
    )

    # --- optimisation -------------------------------------------------------------------
    actor_lr: float = Field(1e-4, gt=0.0, description="actor AdamW learning rate (paper: 1e-6)")
    weight_decay: float = Field(0.01, ge=0.0, description="AdamW weight decay (verl's default 0.01)")
    adam_betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW betas")
    grad_clip: float = Field(1.0, gt=0.0, description="max global gradient norm per optimizer step")
    ppo_epochs: int = Field(4, ge=1, description="passes over the update batch (paper: 4)")
    mini_batch_size: int = Field(32, ge=1, description="step rows per optimizer step (paper: 64)")
    seed: int = Field(0, ge=0, description="seeds the learner's own generator (mini-batch shuffles, random head init)")

    # --- sections -----------------------------------------------------------------------
    ppo: PPOConfig = Field(default_factory=PPOConfig, description="PPO's loss (clip windows, KL, entropy, anchor)")
    critic: CriticConfig = Field(
        default_factory=CriticConfig,
        description="the critic: separate or shared backbone, optimiser, warm-up, value head (algorithm='gae')",
    )
    levers: LeversConfig = Field(
        default_factory=LeversConfig,
        description="optional advantage and data levers, and the group estimators' (GRPO, GiGPO) settings",
    )
    speed: SpeedConfig = Field(
        default_factory=SpeedConfig,
        description="micro-batches, the shared prompt prefix, frozen vision towers, the device: time and memory",
    )
    finetunes: FinetunesConfig = Field(
        default_factory=FinetunesConfig, description="LoRA adapters and rejection-sampling fine-tunes"
    )

    # --- backend ------------------------------------------------------------------------
    backend: ComponentSpec = Field(
        default_factory=lambda: ComponentSpec(name="local"),
        description="the learner (darwin.learner.base.Learner), a built-in name or an import path 'module:Class': "
        "'local': LocalLearner, one process (CPU or one GPU); 'verl': VerlLearner, "
        "verl's FSDP actor and critic workers on Ray (settings in `verl`; docs/scale.md)",
    )
    verl: VerlConfig | None = Field(None, description="the verl backend's workers (backend='verl')")

    # ------------------------------------------------------------------------------------
    @classmethod
    def paper(cls, **overrides: object) -> LearnerConfig:
        """The paper's Table 1 values (:data:`PAPER_TABLE_1`), with ``overrides`` on top; a
        section given as a mapping is merged field by field (``critic={"warmup_updates": 0}``
        keeps Table 1's critic learning rate)::

            >>> cfg = LearnerConfig.paper(critic={"warmup_updates": 0})
            >>> cfg.critic.warmup_updates, cfg.critic.lr, cfg.speed.micro_batch_size
            (0, 1e-05, 16)
        """
        merged: dict[str, Any] = dict(PAPER_TABLE_1)
        for key, value in overrides.items():
            table = merged.get(key)
            merged[key] = {**table, **value} if isinstance(table, dict) and isinstance(value, dict) else value
        return cls(**merged)

    @property
    def uses_critic(self) -> bool:
        """Whether a critic exists (the estimator needs one: PPO's GAE)."""
        return get_estimator(self.algorithm).needs_critic

    def problems(self) -> list[str]:
        """Every inconsistency, each naming the field (its dotted path) and the fix ([] if none)."""
        out: list[str] = []
        ppo, critic, levers, speed, lora = self.ppo, self.critic, self.levers, self.speed, self.finetunes.lora
        micro = speed.micro_batch_size
        if micro > self.mini_batch_size:
            out.append(
                f"speed.micro_batch_size={micro} exceeds mini_batch_size="
                f"{self.mini_batch_size}: lower speed.micro_batch_size or raise mini_batch_size"
            )
        elif self.mini_batch_size % micro:
            out.append(
                f"mini_batch_size={self.mini_batch_size} is not a multiple of speed.micro_batch_size="
                f"{micro}: e.g. speed.micro_batch_size="
                f"{_largest_divisor_at_most(self.mini_batch_size, micro)}"
            )
        if levers.format_penalty_advantage > 0 and levers.parse_error_penalty > 0:
            out.append(
                f"levers.format_penalty_advantage={levers.format_penalty_advantage} charges unparseable steps "
                f"locally and levers.parse_error_penalty={levers.parse_error_penalty} charges them again through "
                "the return: set one to 0"
            )
        if ppo.loss_agg_mode not in LOSS_AGG_MODES:
            out.append(f"ppo.loss_agg_mode={ppo.loss_agg_mode!r} is not one of {list(LOSS_AGG_MODES)}")
        if ppo.kl_estimator not in KL_ESTIMATORS:
            out.append(f"ppo.kl_estimator={ppo.kl_estimator!r} is not one of {list(KL_ESTIMATORS)}")
        if not all(0.0 <= b < 1.0 for b in self.adam_betas):
            out.append(f"adam_betas={self.adam_betas} must both lie in [0, 1)")
        try:
            needs_critic = get_estimator(self.algorithm).needs_critic
        except ComponentError as exc:
            out.append(f"algorithm: {exc}")
            needs_critic = True
        try:
            check_backend("learner", self.backend, policy=None, config=None)
        except ComponentError as exc:
            out.append(f"backend: {exc}")
        if not needs_critic:
            name = self.algorithm.name
            if critic.warmup_updates:
                out.append(
                    f"critic.warmup_updates={critic.warmup_updates} with algorithm={name!r}: it "
                    "has no critic to warm up; set critic.warmup_updates=0"
                )
            if self.truncation == "bootstrap":
                out.append(
                    f"truncation='bootstrap' needs a critic: use algorithm='gae' or truncation='zero' (algorithm={name!r})"
                )
            if critic.backbone == "shared":
                out.append(
                    f"critic.backbone='shared' with algorithm={name!r}: it has no critic; leave critic.backbone='separate'"
                )
            if levers.whiten_by == "task":
                out.append(
                    f"levers.whiten_by='task' applies to GAE; algorithm={name!r} normalises within groups already"
                )
            if critic.mini_batch_size is not None:
                out.append(f"critic.mini_batch_size with algorithm={name!r}: there is no critic; leave it None")
            if critic.freeze_vision:
                out.append(f"critic.freeze_vision with algorithm={name!r}: there is no critic; leave it False")
        if ppo.behaviour_weight_cap is not None and ppo.old_logprobs != "recompute":
            out.append(
                "ppo.behaviour_weight_cap needs ppo.old_logprobs='recompute' (the proximal policy it weighs against)"
            )
        if levers.positive_replay_ratio > 0 and ppo.old_logprobs != "recompute":
            out.append(
                "levers.positive_replay_ratio > 0 replays trajectories sampled by older policies: "
                "set ppo.old_logprobs='recompute'"
            )
        if critic.mini_batch_size is not None and critic.backbone == "shared":
            out.append("critic.mini_batch_size needs critic.backbone='separate' (a shared critic steps with the actor)")
        if critic.freeze_vision and critic.backbone == "shared":
            out.append(
                "critic.freeze_vision needs critic.backbone='separate' (a shared critic's tower is the actor's): "
                "set speed.freeze_vision=true to freeze every tower"
            )
        if critic.mini_batch_size is not None and critic.mini_batch_size % micro:
            out.append(
                f"critic.mini_batch_size={critic.mini_batch_size} is not a multiple of speed.micro_batch_size={micro}"
            )
        out += self._verl_problems()
        if critic.backbone == "shared" and lora is not None and not lora.critic:
            out.append(
                "finetunes.lora.critic=False has no meaning with critic.backbone='shared' (the critic is the "
                "actor's backbone): leave finetunes.lora.critic=True"
            )
        return out

    def _verl_problems(self) -> list[str]:
        """What the verl backend needs and does not support (each with the fix)."""
        if self.backend.name != "verl":
            return (
                [f"verl settings given with backend={self.backend.name!r}: set backend='verl' or drop `verl`"]
                if self.verl is not None
                else []
            )
        if self.verl is None:
            return ["backend='verl' needs verl=VerlConfig(model_path=...): the actor's HF checkpoint directory"]
        out = list(self.verl.problems())
        # What the verl backend refuses, and why (the driver-side levers, such as per-task whitening,
        # trajectory weights, the shortest-path adjustment and negative pruning, work on it).
        unsupported = {
            "finetunes.lora": (
                self.finetunes.lora is not None,
                "darwin's LoRA adapters live in the local learner's models",
            ),
            "critic.backbone='shared'": (
                self.critic.backbone == "shared",
                "verl's critic is its own worker group (a separate value model)",
            ),
            "ppo.kl_coef > 0": (
                self.ppo.kl_coef > 0,
                "the KL penalty needs a frozen reference model, a third worker group the verl learner does not start",
            ),
            "levers.positive_replay_ratio > 0": (
                self.levers.positive_replay_ratio > 0,
                "the replay buffer scores trajectories by the local learner's advantages and is checkpointed with it",
            ),
            "ppo.behaviour_weight_cap": (
                self.ppo.behaviour_weight_cap is not None,
                "verl's ppo_loss has no behaviour weight",
            ),
            "speed.freeze_vision": (
                self.speed.freeze_vision,
                "the image-feature cache lives in the local learner's passes",
            ),
            "critic.freeze_vision": (
                self.critic.freeze_vision,
                "the image-feature cache lives in the local learner's passes",
            ),
            "finetunes.rft.every > 0": (
                self.finetunes.rft.every > 0,
                "the fine-tune trains the local learner's actor in place",
            ),
            "truncation='bootstrap'": (
                self.truncation == "bootstrap",
                "V(s') at the screen a cut trajectory's last action led to needs a critic pass over that next "
                "prompt, which only the local learner makes; verl would bootstrap from the last step instead",
            ),
        }
        for name, (used, why) in unsupported.items():
            if used:
                out.append(
                    f"{name} is not supported by backend='verl' ({why}; docs/scale.md): turn it off or use backend='local'"
                )
        world = self.verl.world_size
        for field_name, size in (
            ("mini_batch_size", self.mini_batch_size),
            ("critic.mini_batch_size", self.critic.mini_batch_size),
        ):
            if size is not None and size % world:
                out.append(
                    f"{field_name}={size} must be a multiple of the verl world size {world} (gpus_per_node x nodes)"
                )
            elif size is not None and (size // world) % self.verl.micro_batch_size_per_gpu:
                out.append(
                    f"{field_name}={size} over {world} worker(s) gives {size // world} rows each, not a multiple of "
                    f"verl.micro_batch_size_per_gpu={self.verl.micro_batch_size_per_gpu}"
                )
        return out

    @model_validator(mode="wrap")
    @classmethod
    def _check_all(cls, data: Any, handler: ModelWrapValidatorHandler[LearnerConfig]) -> LearnerConfig:
        """Field errors and cross-field problems together, in one error."""
        try:
            config = handler(data)
        except ValidationError as exc:
            errors = exc.errors()
            problems = [_describe(e) for e in errors]
            bad = {tuple(e["loc"]) for e in errors if e["loc"]}
            if isinstance(data, dict) and not any(loc[:1] == ("algorithm",) or loc[:2] in _BLOCKING for loc in bad):
                try:
                    partial = _partial(cls, data, bad)
                    problems += partial.problems()
                except (TypeError, ValueError, AttributeError):  # a value too malformed to compare
                    problems.append("(cross-field checks run once the fields above are fixed)")
            raise ValueError(_format(problems)) from None
        problems = config.problems()
        if problems:
            raise ValueError(_format(problems))
        return config


_BLOCKING = {("finetunes", "lora"), ("finetunes",), ("critic", "backbone")}
"""Field errors (besides ``algorithm``'s) after which the cross-field checks are left out: they
would judge a default in place of the value given."""


def _model_in(annotation: object) -> type[BaseModel] | None:
    """The pydantic model a field holds (``X``, ``X | None``), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType):
        for arg in get_args(annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                return arg
    return None


def _partial(model: type[BaseModel], data: dict[str, Any], bad: set[tuple[Any, ...]]) -> Any:
    """``model`` built from ``data`` without validation, the fields with errors (``bad``, their
    locations) left at their defaults, nested models built the same way."""
    fields: dict[str, Any] = {}
    for key, value in data.items():
        if key not in model.model_fields or (key,) in bad:
            continue
        inner = _model_in(model.model_fields[key].annotation)
        if inner is not None and isinstance(value, str | dict):
            below = {loc[1:] for loc in bad if loc[:1] == (key,)}
            if below and isinstance(value, dict):
                value = _partial(inner, value, below)
            elif not below:
                value = inner.model_validate(value)  # a name becomes its ComponentSpec, a mapping its section
            else:
                continue
        fields[key] = value
    return model.model_construct(**fields)


def _field_paths() -> list[str]:
    """Every field of :class:`LearnerConfig` and of its sections, as a dotted path."""
    paths = []
    for name, info in LearnerConfig.model_fields.items():
        paths.append(name)
        inner = _model_in(info.annotation)
        if name in _SECTIONS and inner is not None:
            paths += [f"{name}.{sub}" for sub in inner.model_fields]
    return paths


_SECTIONS = ("ppo", "critic", "levers", "speed", "finetunes")


def _describe(error: Any) -> str:
    where = ".".join(str(p) for p in error["loc"]) or "config"
    text = f"{where}: {error['msg']}"
    if error["type"] == "extra_forbidden" and error["loc"] and (len(error["loc"]) == 1 or error["loc"][0] in _SECTIONS):
        paths = _field_paths()
        leaf = str(error["loc"][-1])
        same_leaf = [p for p in paths if p.rsplit(".", 1)[-1] == leaf and p != where]
        close = same_leaf or difflib.get_close_matches(where, paths, n=1)
        if close:
            text += f"; did you mean {close[0]!r}?"
    return text


def _format(problems: list[str]) -> str:
    return problems_message("LearnerConfig", problems)


def _largest_divisor_at_most(n: int, k: int) -> int:
    return max(d for d in range(1, min(n, k) + 1) if n % d == 0)
