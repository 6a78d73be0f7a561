"""Time one LocalLearner update on the tiny VLM (the paper's 256-step batch by default).

    darwin bench learner                                   # 256 steps, 252x560, separate critic
    darwin bench learner --critic shared --phase ppo,warmup --micro 8,16

Trajectories are sampled by an HFPolicy on random screenshots (one per prompt, with a short
system turn, like TinyAgent's), ``--steps-per-episode`` steps each, the last step of every
other episode rewarded. Each (critic, phase, micro-batch) combination gets a fresh learner:
``ppo`` is an actor + critic update (critic warm-up 0), ``warmup`` a critic-only one.
Timings include rebuilding the prompts with the processor; sampling is not timed. They vary
with machine load: compare numbers from one run.
"""

from __future__ import annotations

import resource
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from darwin.actions import Wait
from darwin.learner.config import LearnerConfig
from darwin.learner.local import LocalLearner
from darwin.models.config import TinyVLMConfig
from darwin.models.factory import build_tiny_vlm
from darwin.policies.hf import HFPolicy, HFPolicyConfig
from darwin.types import (
    ChatMessage,
    Decision,
    Generation,
    Observation,
    Phase,
    Prompt,
    Task,
    Termination,
    TerminationReason,
    Trajectory,
    Transition,
    VerifierSpec,
)


@dataclass(frozen=True)
class LearnerBenchResult:
    """One configuration's measurements."""

    critic: str
    phase: str
    micro_batch: int
    mini_batch: int
    epochs: int
    steps: int
    response_tokens: int
    threads: int
    prepare_s: float
    scoring_s: float
    train_s: float
    total_s: float
    peak_rss_gib: float


def bench_episode(
    episode_id: str, task: Task, steps: Sequence[tuple[Observation, Decision]], *, success: bool
) -> Trajectory:
    """One finished episode of ``steps`` (observation, decision) pairs; its last step carries
    reward 1 when ``success``, every other step 0."""
    transitions = [
        Transition(
            episode_id=episode_id,
            task_id=task.id,
            step=s,
            phase=Phase.EXECUTION,
            observation=observation,
            decision=decision,
            reward=float(success and s == len(steps) - 1),
            done=s == len(steps) - 1,
        )
        for s, (observation, decision) in enumerate(steps)
    ]
    return Trajectory(
        episode_id=episode_id,
        task=task,
        transitions=transitions,
        termination=Termination(TerminationReason.AGENT_FINISHED),
    )


def sample_trajectories(
    policy: HFPolicy, cfg: TinyVLMConfig, steps: int, per_episode: int, seed: int = 0
) -> list[Trajectory]:
    """``steps`` sampled steps in episodes of ``per_episode`` (the last one may be shorter)."""
    rng = np.random.default_rng(seed)
    task = Task(id="bench", instruction="Turn on dark theme.", app="Settings", verifier=VerifierSpec(predicate="bench"))
    prompts, shots = [], []
    for i in range(steps):
        shot = rng.integers(0, 256, (cfg.screen_height, cfg.screen_width, 3), dtype=np.uint8)
        shots.append(shot)
        prompts.append(
            Prompt(
                messages=(
                    ChatMessage(role="system", text="You operate a phone. Answer with one action call."),
                    ChatMessage(
                        role="user", text=f"Goal: Turn on dark theme. Done: step {i % per_episode}", images=(shot,)
                    ),
                )
            )
        )
    generations = []
    for start in range(0, steps, 8):
        generations += policy.generate_sync(prompts[start : start + 8])
    trajectories = []
    for e, start in enumerate(range(0, steps, per_episode)):
        eid = uuid.UUID(int=int(rng.integers(0, 2**62))).hex
        n = min(per_episode, steps - start)
        pairs = [
            (
                Observation(screenshot=shots[start + s], goal=task.instruction, device_size=(1080, 2400)),
                Decision(action=Wait(), generation=generations[start + s], prompt=prompts[start + s]),
            )
            for s in range(n)
        ]
        trajectories.append(bench_episode(eid, task, pairs, success=e % 2 == 0))
    return trajectories


def run(
    steps: int = 256,
    per_episode: int = 8,
    screen: tuple[int, int] = (252, 560),
    new_tokens: int = 16,
    critics: tuple[str, ...] = ("separate",),
    phases: tuple[str, ...] = ("ppo",),
    micros: tuple[int, ...] = (8,),
    mini: int = 32,
    epochs: int = 4,
    family: str = "qwen2_vl",
    device: str = "cpu",
) -> list[LearnerBenchResult]:
    """Sample ``steps`` steps once, then time one fresh learner's update per (critic, phase, micro) combination."""
    cfg = TinyVLMConfig(family=family, screen_width=screen[0], screen_height=screen[1])
    vlm = build_tiny_vlm(cfg, seed=0)
    vlm.model.to(device)  # type: ignore[arg-type]  # transformers wraps PreTrainedModel.to with functools.wraps, whose stub loses the bound self
    policy = HFPolicy(vlm, HFPolicyConfig(max_new_tokens=new_tokens, seed=0))
    trajectories = sample_trajectories(policy, cfg, steps, per_episode)
    results = []
    for critic in critics:
        for phase in phases:
            for micro in micros:
                config = LearnerConfig(
                    critic={
                        "backbone": critic,
                        "warmup_updates": 1 if phase == "warmup" else 0,
                        "warmup_epochs": epochs,
                    },
                    speed={"micro_batch_size": micro, "device": device},
                    ppo_epochs=epochs,
                    mini_batch_size=mini,
                )
                learner = LocalLearner(policy, config)
                m = learner.update(trajectories)
                results.append(
                    LearnerBenchResult(
                        critic=critic,
                        phase=phase,
                        micro_batch=micro,
                        mini_batch=mini,
                        epochs=epochs,
                        steps=m.steps,
                        response_tokens=m.response_tokens,
                        threads=torch.get_num_threads(),
                        prepare_s=round(m.prepare_s, 2),
                        scoring_s=round(m.scoring_s, 2),
                        train_s=round(m.train_s, 2),
                        total_s=round(m.total_s, 2),
                        peak_rss_gib=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
                    )
                )
    return results


# --------------------------------------------------------------------------------------
# One update of the embedded default, phase by phase (darwin bench learner --profile)
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ProfileResult:
    """One update of the default's learner on the recorded batch, per phase (seconds;
    the median over ``repeats`` fresh learners)."""

    variant: str
    steps: int
    response_tokens: int
    repeats: int
    images_s: float
    """Screenshots to pixels, M-RoPE positions, and the frozen towers' features (the actor's
    under ``speed.freeze_vision``; else the reference's and a frozen critic's)."""
    values_s: float
    reference_s: float
    proximal_s: float
    forward_backward_s: float
    optimizer_s: float
    other_s: float
    """Everything else: rows, advantages, loss bookkeeping, pushing the weights to the policy."""
    total_s: float
    cached_images: int = 0
    """Screenshot features the timed update read from a cache instead of a tower pass."""
    padding_share: float | None = None
    """Share of the training passes' token slots that were padding (``UpdateMetrics.padding_share``)."""


def _cache_hits(learner: LocalLearner) -> int:
    return learner.image_features.hits if learner.image_features is not None else 0


_BASE_VARIANTS: dict[str, dict[str, dict[str, object]]] = {
    "plain": {"speed": {"freeze_vision": False}},
    "frozen": {"speed": {"freeze_vision": True}},
    "shared": {"speed": {"freeze_vision": False}, "critic": {"backbone": "shared"}},
    "frozen-shared": {"speed": {"freeze_vision": True}, "critic": {"backbone": "shared"}},
    "critic-frozen": {"speed": {"freeze_vision": False}, "critic": {"freeze_vision": True}},
}
VARIANTS = {
    **_BASE_VARIANTS,
    **{
        f"{name}-unshared-prefix": {**v, "speed": {**v["speed"], "share_prompt_prefix": False}}
        for name, v in _BASE_VARIANTS.items()
    },
}
"""``--variant`` names, each the learner sections it changes: the default's learner with the
vision tower trained or frozen (``speed.freeze_vision``), and each with the value head on the
actor's backbone (``critic.backbone='shared'``: no separate critic pass); ``critic-frozen``
trains the actor's tower and keeps the separate critic's frozen (``critic.freeze_vision``);
``<name>-unshared-prefix`` runs every prompt's system turn once per row, as before
``speed.share_prompt_prefix``."""


def _changed(config: LearnerConfig, sections: dict[str, dict[str, object]]) -> LearnerConfig:
    """``config`` with the fields of some of its sections changed (``{"speed": {"freeze_vision": True}}``)."""
    return config.model_copy(
        update={name: getattr(config, name).model_copy(update=fields) for name, fields in sections.items()}
    )


def recorded_trajectories(steps: int = 256, seed: int = 0) -> tuple[list[Trajectory], TinyVLMConfig]:
    """A fixed batch like the default's: the SimPhone oracle played through the real
    workflow on the default's tasks and screen, as the default's TinyAgent prompts them;
    each step's response is the oracle's action text, scored by a tiny model (seed 0) as its
    behaviour log-probs; every other episode succeeds. The same rows every time."""
    from darwin.sft.config import SFTConfig
    from darwin.sft.demonstrations import collect_demonstrations

    sft = SFTConfig(episodes=max(16, steps // 3), phones=8, heldout_episodes=0, seed=seed)
    demos, _ = collect_demonstrations(sft)
    model_cfg = sft.resolved_model
    policy = HFPolicy(build_tiny_vlm(model_cfg, seed=0), HFPolicyConfig(max_new_tokens=24, seed=0))
    tok = policy.vlm.tokenizer
    episodes: list[list] = []
    for demo in demos:
        if demo.step == 0 or not episodes:
            episodes.append([])
        episodes[-1].append(demo)
    taken, trajectories = 0, []
    for e, episode in enumerate(episodes):
        if taken >= steps:
            break
        episode = episode[: steps - taken]
        taken += len(episode)
        prompts = [d.prompt for d in episode]
        responses = [tuple(tok.encode(d.target, add_special_tokens=False)) + (int(tok.eos_token_id),) for d in episode]
        logprobs = policy.teacher_forced_logprobs(prompts, responses)
        batch = policy.build_inputs(prompts)
        eid = f"recorded-{e}"
        task = Task(
            id=episode[0].task_id,
            instruction=episode[0].observation.goal,
            app="SimPhone",
            verifier=VerifierSpec(predicate=episode[0].task_id),
        )
        pairs = []
        for s, demo in enumerate(episode):
            ids = batch["input_ids"][s][batch["attention_mask"][s].bool()]
            generation = Generation(
                text=demo.target,
                prompt_ids=tuple(ids.tolist()),
                response_ids=responses[s],
                response_logprobs=tuple(logprobs[s].tolist()),
                policy_version=0,
            )
            pairs.append((demo.observation, Decision(action=demo.action, generation=generation, prompt=demo.prompt)))
        trajectories.append(bench_episode(eid, task, pairs, success=e % 2 == 0))
    return trajectories, model_cfg


def profile(
    learner_config: LearnerConfig,
    variants: tuple[str, ...] = ("plain", "frozen"),
    steps: int = 256,
    repeats: int = 3,
    warm_cache: bool = False,
) -> list[ProfileResult]:
    """Time one update of ``learner_config`` (critic warm-up over, as in most of a run) per
    variant on :func:`recorded_trajectories`, each on fresh models: the policy is one
    version ahead of the rows, so they are stale as in an asynchronous run (the proximal
    pass runs) and the feature caches start empty, or with ``warm_cache`` hold the batch's
    screenshots (an untimed :meth:`~darwin.learner.local.LocalLearner.prepare` first), as in a run
    whose phones show screens seen before. Variants alternate between repeats, so machine
    load drifts over all of them alike."""
    trajectories, model_cfg = recorded_trajectories(steps)
    config = _changed(learner_config, {"critic": {"warmup_updates": 0}})
    samples: dict[str, list] = {v: [] for v in variants}
    for _ in range(repeats):
        for variant in variants:
            vlm = build_tiny_vlm(model_cfg, seed=0)
            policy = HFPolicy(vlm, HFPolicyConfig(max_new_tokens=24, seed=0))
            policy.load_weights(vlm.model.state_dict(), 1)  # the same weights, one version on
            learner = LocalLearner(policy, _changed(config, VARIANTS[variant]))
            if warm_cache:
                learner.prepare(trajectories)  # fills the caches; changes no weight
            hits = _cache_hits(learner)
            samples[variant].append((learner.update(trajectories), _cache_hits(learner) - hits))
    out = []
    for variant, timed in samples.items():
        runs = [m for m, _ in timed]

        def median(field: str, runs: list = runs) -> float:
            return round(float(np.median([getattr(m, field) for m in runs])), 2)

        phases = ("images_s", "values_s", "reference_s", "proximal_s", "forward_backward_s", "optimizer_s")
        other = float(np.median([m.total_s - sum(getattr(m, f) for f in phases) for m in runs]))
        out.append(
            ProfileResult(
                variant=variant,
                steps=runs[0].steps,
                response_tokens=runs[0].response_tokens,
                repeats=repeats,
                **{f: median(f) for f in phases},
                other_s=round(other, 2),
                total_s=median("total_s"),
                cached_images=int(np.median([hits for _, hits in timed])),
                padding_share=None if runs[0].padding_share is None else round(runs[0].padding_share, 4),
            )
        )
    return out


# --------------------------------------------------------------------------------------
# The verl learner (darwin bench learner --backend verl)
# --------------------------------------------------------------------------------------
PEAK_BF16_FLOPS = {"H100": 989e12, "H200": 989e12, "H20": 148e12, "A100": 312e12, "L40S": 362e12, "A10": 125e12}
"""Dense bf16 tensor-core peak per GPU (vendor datasheets, no sparsity), by name fragment: the MFU denominator."""

QWEN_VOCAB = 151_936
"""Qwen2.5-VL's embedding rows: the ``1b`` and ``2b`` models' LM head is this wide (the locally built
tokenizer uses the first ids only), so the logits cost what a real checkpoint's do."""

SIZES: dict[str, dict[str, object]] = {
    "tiny": {},
    # about 1.3 B with the Qwen vocabulary: 12 text layers of width 2048 (Qwen2.5-VL-3B's width), a 4-block tower
    "1b": {
        "hidden_size": 2048,
        "num_hidden_layers": 12,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "intermediate_size": 11008,
        "vision_depth": 4,
        "vision_embed_dim": 1024,
        "vision_num_heads": 16,
    },
    # about 2.0 B: 20 text layers of width 2048, an 8-block tower of Qwen2.5-VL's width 1280
    "2b": {
        "hidden_size": 2048,
        "num_hidden_layers": 20,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "intermediate_size": 11008,
        "vision_depth": 8,
        "vision_embed_dim": 1280,
        "vision_num_heads": 16,
    },
}
"""``--size``: Qwen2.5-VL-shaped models with random weights (``tiny`` keeps the tiny model's small vocabulary)."""

PAPER_SCREEN = (504, 1120)
"""The paper preset's screenshot (examples/spa_bench.py): 720 visual tokens, 2,880 vision patches."""

PAPER_HISTORY = 8
"""Past interactions in a paper-preset prompt (SlidingWindowMemory's default N; their screenshots are not shown)."""


@dataclass(frozen=True)
class VerlBenchResult:
    """One verl update's measurements (``tokens``: prompt + response tokens of the batch)."""

    device: str
    workers: int
    family: str
    size: str
    parameters: int
    rows: str
    phase: str
    steps: int
    tokens: int
    response_tokens: int
    padding_share: float
    """Share of the token slots in the padded batch that are padding (what remove_padding saves)."""
    epochs: int
    token_budget: int | None
    remove_padding: bool
    gradient_checkpointing: bool
    offload: bool
    fused_kernels: str
    prepare_s: float
    values_s: float
    log_probs_s: float
    critic_train_s: float
    actor_train_s: float
    weight_sync_s: float
    total_s: float
    train_tokens_per_s: float
    """epochs x tokens / training seconds, summed over the models trained (actor and critic in PPO)."""
    update_flops: float
    """Model FLOPs of the whole update (scoring forwards and training), :func:`update_flops`."""
    mfu_train: float | None
    """Training FLOPs / training seconds over the workers' bf16 peak; None on CPU or an unknown GPU."""
    mfu_update: float | None
    """The whole update's FLOPs / its seconds over the same peak."""
    peak_memory_gib: float | None
    """The largest torch.cuda.max_memory_allocated of any worker (verl's perf/max_memory_allocated_gb)."""


def peak_flops(device: str) -> float | None:
    """The dense bf16 peak of this machine's GPU 0, or None (CPU, unknown GPU)."""
    if device != "cuda" or not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name(0)
    return next((flops for fragment, flops in PEAK_BF16_FLOPS.items() if fragment in name), None)


@dataclass(frozen=True)
class ModelShape:
    """What a model's FLOPs per token depend on."""

    text_parameters: int
    """The decoder's weights without the embeddings and the LM head."""
    lm_head: int
    """vocab x hidden: the actor's logits (the critic's value head is one column)."""
    vision_parameters: int
    layers: int
    hidden: int

    @classmethod
    def of(cls, model: torch.nn.Module) -> ModelShape:
        config: Any = getattr(model.config, "text_config", model.config)
        vision = text = 0
        for name, p in model.named_parameters():
            if "visual" in name:
                vision += p.numel()
            elif "embed_tokens" not in name and "lm_head" not in name:
                text += p.numel()
        return cls(
            text_parameters=text,
            lm_head=config.vocab_size * config.hidden_size,
            vision_parameters=vision,
            layers=config.num_hidden_layers,
            hidden=config.hidden_size,
        )


def forward_flops(shape: ModelShape, lengths: Sequence[int], patches: Sequence[int], *, logits: bool) -> float:
    """Model FLOPs of one forward pass over rows of ``lengths`` tokens with ``patches`` vision
    patches each: 2 x weights x tokens for the decoder (and the LM head with ``logits``),
    4 x layers x hidden x length^2 for its causal-masked attention counted in full (PaLM's
    convention), 2 x vision weights x patches for the tower. A training pass is 3x this (the
    backward pass costs twice the forward; a recomputed forward under gradient checkpointing
    is not model FLOPs).

    >>> s = ModelShape(text_parameters=10, lm_head=4, vision_parameters=3, layers=2, hidden=1)
    >>> forward_flops(s, [5], [2], logits=True), forward_flops(s, [5], [2], logits=False)
    (352.0, 312.0)
    """
    text = shape.text_parameters + (shape.lm_head if logits else 0)
    flops = 0.0
    for length, n_patches in zip(lengths, patches, strict=True):
        flops += (
            2 * text * length + 4 * shape.layers * shape.hidden * length**2 + 2 * shape.vision_parameters * n_patches
        )
    return flops


def paper_shaped_trajectories(
    policy: HFPolicy, steps: int, per_episode: int, screen: tuple[int, int], seed: int = 0
) -> list[Trajectory]:
    """``steps`` rows shaped like the paper preset's: UI-TARS-1.5's mobile prompt (the agent's
    own system text) with up to :data:`PAPER_HISTORY` past ``Thought/Action`` turns, the current
    screenshot (random pixels) at ``screen``, and a ``Thought: ... Action: click(...)`` response,
    tokenized by the policy's processor as it would be served. Nothing is sampled: the verl
    learner recomputes the old log-probs, so the rows' behaviour log-probs are not read."""
    from darwin.actions import Click
    from darwin.agents.uitars import UITarsAgent

    rng = np.random.default_rng(seed)
    agent = UITarsAgent()
    tok = policy.vlm.tokenizer
    goal = "Open Booking.com and find a hotel in Paris for two adults next weekend."
    task = Task(id="bench", instruction=goal, app="Booking.com", verifier=VerifierSpec(predicate="bench"))
    trajectories = []
    for e, start in enumerate(range(0, steps, per_episode)):
        n = min(per_episode, steps - start)
        turns: list[str] = []
        pairs = []
        for s in range(n):
            x, y = (int(v) for v in rng.integers(0, 500, 2))
            response = (
                f"Thought: The search field is near the top of the screen; I tap it to type the destination "
                f"(step {s + 1}).\nAction: click(start_box='({x},{y})')"
            )
            shot = rng.integers(0, 256, (screen[1], screen[0], 3), dtype=np.uint8)
            messages = [ChatMessage(role="user", text=agent.system_text(goal))]
            messages += [ChatMessage(role="assistant", text=t) for t in turns[-PAPER_HISTORY:]]
            messages.append(ChatMessage(role="user", text="", images=(shot,)))
            prompt = Prompt(messages=tuple(messages))
            batch = policy.build_inputs([prompt])
            ids = batch["input_ids"][0][batch["attention_mask"][0].bool()]
            response_ids = tuple(tok.encode(response, add_special_tokens=False)) + (int(tok.eos_token_id),)
            generation = Generation(
                text=response,
                prompt_ids=tuple(ids.tolist()),
                response_ids=response_ids,
                response_logprobs=tuple(-1.0 for _ in response_ids),
                policy_version=0,
            )
            observation = Observation(screenshot=shot, goal=goal, device_size=(1080, 2400))
            pairs.append((observation, Decision(action=Click(x=x, y=y), generation=generation, prompt=prompt)))
            turns.append(response)
        trajectories.append(bench_episode(f"paper-{e}", task, pairs, success=e % 2 == 0))
    return trajectories


def run_verl(
    steps: int = 64,
    per_episode: int = 8,
    screen: tuple[int, int] = (252, 560),
    new_tokens: int = 16,
    phases: tuple[str, ...] = ("ppo",),
    mini: int = 32,
    epochs: int = 1,
    family: str = "qwen2_vl",
    device: str = "cpu",
    workers: int = 2,
    size: str = "tiny",
    micro: int = 2,
    rows: str = "sampled",
    token_budget: int | None = None,
    remove_padding: bool | None = None,
    gradient_checkpointing: bool = True,
    offload: bool = False,
    fused_kernels: Literal["off", "torch", "triton"] = "off",
) -> list[VerlBenchResult]:
    """Build ``steps`` rows once, then time one update of a fresh :class:`VerlLearner` per
    phase (``ppo``: critic warm-up 0, actor + critic; ``warmup``: critic only) on ``workers``
    workers (CPU processes with gloo, or GPUs in bf16 with flash-attention when installed).

    ``rows``: ``sampled`` (the policy samples ``new_tokens`` per step on one-image prompts at
    ``screen``) or ``paper`` (:func:`paper_shaped_trajectories`). ``token_budget``: verl's
    token-budgeted micro-batches (``VerlConfig.max_token_len_per_gpu``), else ``micro`` rows per
    micro-batch. ``remove_padding``: None = on where flash-attention is installed on a GPU.
    ``offload``: parameters and optimizer states leave the GPU between calls (both roles on one GPU).
    ``fused_kernels``: :attr:`VerlConfig.fused_kernels` (the actor's log-probs without the whole logits).
    """
    import importlib.util
    import tempfile
    from pathlib import Path

    from darwin.learner.verl_config import VerlConfig
    from darwin.learner.verl_learner import VerlLearner

    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; choose from {sorted(SIZES)}")
    if rows not in ("sampled", "paper"):
        raise ValueError(f"rows={rows!r}: use 'sampled' or 'paper'")
    on_gpu = device == "cuda"
    attn = "flash_attention_2" if on_gpu and importlib.util.find_spec("flash_attn") else "sdpa"
    if remove_padding is None:
        remove_padding = attn == "flash_attention_2"
    cfg = TinyVLMConfig(family=family, screen_width=screen[0], screen_height=screen[1], **SIZES[size])
    vlm = build_tiny_vlm(cfg, seed=0)
    if size != "tiny":
        vlm.model.resize_token_embeddings(QWEN_VOCAB)
    shape = ModelShape.of(vlm.model)
    params = sum(p.numel() for p in vlm.model.parameters())
    if rows == "paper":
        policy = HFPolicy(vlm, HFPolicyConfig(max_new_tokens=new_tokens, seed=0))
        trajectories = paper_shaped_trajectories(policy, steps, per_episode, screen)
    else:
        if on_gpu:
            vlm.model.to("cuda")  # type: ignore[arg-type]  # transformers wraps PreTrainedModel.to with functools.wraps, whose stub loses the bound self
        policy = HFPolicy(vlm, HFPolicyConfig(max_new_tokens=new_tokens, seed=0))
        trajectories = sample_trajectories(policy, cfg, steps, per_episode)
        if on_gpu:  # the learner's driver keeps its copy on the CPU (the GPUs are the workers')
            vlm.model.to("cpu")  # type: ignore[arg-type]  # transformers wraps PreTrainedModel.to with functools.wraps, whose stub loses the bound self
            policy = HFPolicy(vlm, HFPolicyConfig(max_new_tokens=new_tokens, seed=0))
    generations = [t.decision.generation for tr in trajectories for t in tr.transitions if t.decision.generation]
    lengths = [len(g.prompt_ids) + len(g.response_ids) for g in generations]
    patches = [
        int(np.prod(cfg.grid_thw)) * len(t.decision.prompt.images)
        for tr in trajectories
        for t in tr.transitions
        if t.decision.generation and t.decision.prompt
    ]
    tokens = sum(lengths)
    padded = max(len(g.prompt_ids) for g in generations) + max(len(g.response_ids) for g in generations)
    actor_forward = forward_flops(shape, lengths, patches, logits=True)
    critic_forward = forward_flops(shape, lengths, patches, logits=False)
    peak = peak_flops(device)
    results = []
    with tempfile.TemporaryDirectory(prefix="darwin-bench-verl-") as tmp:
        model_path = vlm.save_pretrained(Path(tmp) / "actor")
        for phase in phases:
            settings = VerlConfig(
                model_path=str(model_path),
                gpus_per_node=workers,
                device="cuda" if on_gpu else "cpu",
                attn_implementation=attn,
                model_dtype="fp32",
                micro_batch_size_per_gpu=micro,
                max_token_len_per_gpu=token_budget,
                remove_padding=remove_padding,
                gradient_checkpointing=gradient_checkpointing,
                param_offload=offload,
                optimizer_offload=offload,
                fused_kernels=fused_kernels,
                ray_num_cpus=None if on_gpu else 2 * workers,
            )
            config = LearnerConfig(
                backend="verl",
                verl=settings,
                critic={"warmup_updates": 1 if phase == "warmup" else 0, "warmup_epochs": epochs},
                speed={"micro_batch_size": micro},
                ppo_epochs=epochs,
                mini_batch_size=mini,
            )
            learner = VerlLearner(policy, config)
            try:
                m = learner.update(trajectories)
                timings = learner.last_timings
            finally:
                learner.close()
            warmup = phase == "warmup"
            train_flops = 3 * epochs * (critic_forward + (0.0 if warmup else actor_forward))
            scoring_flops = critic_forward + (0.0 if warmup else actor_forward)
            train_s = timings.critic_train_s + timings.actor_train_s
            trained_tokens = (1 if warmup else 2) * epochs * tokens
            results.append(
                VerlBenchResult(
                    device=torch.cuda.get_device_name(0) if on_gpu and torch.cuda.is_available() else device,
                    workers=workers,
                    family=family,
                    size=size,
                    parameters=params,
                    rows=rows,
                    phase=phase,
                    steps=m.steps,
                    tokens=tokens,
                    response_tokens=m.response_tokens,
                    padding_share=round(1 - tokens / (padded * len(lengths)), 4),
                    epochs=epochs,
                    token_budget=token_budget,
                    remove_padding=remove_padding,
                    gradient_checkpointing=gradient_checkpointing,
                    offload=offload,
                    fused_kernels=fused_kernels,
                    prepare_s=round(m.prepare_s, 2),
                    values_s=round(m.values_s, 2),
                    log_probs_s=round(m.proximal_s, 2),
                    critic_train_s=round(timings.critic_train_s, 2),
                    actor_train_s=round(timings.actor_train_s, 2),
                    weight_sync_s=round(timings.weight_sync_s, 2),
                    total_s=round(m.total_s, 2),
                    train_tokens_per_s=round(trained_tokens / train_s, 1),
                    update_flops=train_flops + scoring_flops,
                    mfu_train=round(train_flops / train_s / (peak * workers), 4) if peak else None,
                    mfu_update=round((train_flops + scoring_flops) / m.total_s / (peak * workers), 4) if peak else None,
                    peak_memory_gib=timings.peak_memory_gib,
                )
            )
    return results
