"""Fine-tuning any Qwen2-VL-family checkpoint under a named agent format (``darwin sft --model``).

:func:`finetune` loads a checkpoint in Hugging Face layout (``darwin.models.factory.load_vlm``),
gathers demonstrations from the SimPhone oracle, run databases (verifier-accepted episodes:
rejection sampling when the run is an RL run) and JSONL files
(:mod:`darwin.sft.sources`), builds every training example with the agent that acts at run
time (:func:`~darwin.sft.sources.build_examples`), trains on ``prompt -> response + EOS``
with the learner's masked log-probs (full fine-tune, or LoRA merged back into the weights),
measures held-out action match per action type before and after (greedy, and sampled at
temperature 1), and writes a checkpoint directory that ``darwin eval --agent tiny:<dir>``
and an experiment's ``checkpoint`` load as they are (:data:`~darwin.agents.warm_start.AGENT_FILE`
records ``kind: "format"``). The default warm start (:func:`~darwin.sft.training.train_sft`)
is a separate path and unchanged. See docs/sft.md.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from darwin.agents.warm_start import AGENT_FILE, SFT_FILE, SFT_FORMAT_VERSION
from darwin.memory.sliding_window import SlidingWindowConfig, SlidingWindowMemory
from darwin.problems import problems_message
from darwin.sft.sources import DemoEpisode, Example

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from darwin.agents.vlm import VLMAgent
    from darwin.models.factory import VLM
    from darwin.sft.encoding import EncodedDemos
    from darwin.sft.training import StepStats

logger = logging.getLogger(__name__)

__all__ = [
    "ActionMatch",
    "FinetuneConfig",
    "FinetuneResult",
    "OracleSource",
    "action_match",
    "finetune",
    "gather_examples",
]

LORA_TARGETS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""The language model's linear layers LoRA adapts by default (the vision tower stays frozen)."""


class OracleSource(BaseModel):
    """SimPhone oracle demonstrations (as the default warm start collects them)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tasks: tuple[str, ...] = Field(("base8",), min_length=1, description="task ids, set names or task files")
    phones: int = Field(8, ge=1, le=4096, description="demonstration phones (seeds phone_seed, phone_seed+1, ...)")
    episodes: int = Field(32, ge=1, le=1_000_000, description="demonstration episodes in all")
    phone_seed: int = Field(1000, ge=0, description="first demo phone seed (evaluation phones start at 0)")
    heldout_phones: int = Field(2, ge=0, le=1024, description="held-out phones (seeds after the demo phones)")
    heldout_episodes: int = Field(8, ge=0, le=100_000, description="held-out episodes in all")
    launch_by_name: bool = Field(True, description="launcher taps demonstrated as open_app('<app>')")
    prefer_typing: bool = Field(
        False, description="type a task's words into a field rather than tap a widget showing them (SFTConfig)"
    )


class FinetuneConfig(BaseModel):
    """Everything :func:`finetune` needs; validated when built (one error lists every problem)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(description="a Qwen2-VL-family checkpoint directory in Hugging Face layout")
    agent_format: str = Field(
        "uitars-1.5",
        description="the prompt/output format (darwin.agents.formats): uitars-1.5, uitars-1.0, qwen2.5, qwen3, tiny, "
        "or the import path of a VLMAgent class",
    )
    observation_size: tuple[int, int] = Field(
        (252, 560),
        description="(W, H) of the screenshots the agent is given; multiples of 28 within the processor's pixel budget",
    )
    memory: SlidingWindowConfig = Field(
        default_factory=SlidingWindowConfig, description="the agent's sliding-window memory"
    )

    oracle: OracleSource | None = Field(None, description="SimPhone oracle demonstrations; None: none")
    runs: tuple[str, ...] = Field(
        (), description="run directories / run.db files / SQLAlchemy URLs: their verifier-accepted episodes"
    )
    jsonl: tuple[str, ...] = Field((), description="JSONL demonstration files (docs/sft.md)")
    heldout_fraction: float = Field(
        0.25, ge=0, lt=1, description="share of the run and JSONL episodes held out for action match (by episode)"
    )

    lora_rank: int = Field(
        0, ge=0, le=1024, description="0: full fine-tune; else LoRA of this rank, merged into the weights when saved"
    )
    lora_alpha: float = Field(16.0, gt=0, description="LoRA scaling numerator (scale = alpha / rank)")
    lora_targets: tuple[str, ...] = Field(LORA_TARGETS, min_length=1, description="module names LoRA adapts")

    steps: int = Field(100, ge=1, le=1_000_000, description="optimizer steps")
    batch_size: int = Field(8, ge=1, le=4096, description="examples per optimizer step")
    lr: float = Field(1e-3, gt=0, le=1.0, description="peak AdamW learning rate")
    weight_decay: float = Field(0.01, ge=0, le=1.0, description="AdamW weight decay (matrices only)")
    warmup_steps: int = Field(5, ge=0, description="linear warm-up steps")
    min_lr_ratio: float = Field(0.1, ge=0, le=1.0, description="final learning rate / lr")
    grad_clip: float | None = Field(1.0, gt=0, description="global gradient-norm clip; None = off")
    seed: int = Field(0, ge=0, description="held-out split, batch order and sampled evaluation")
    sampled_match: bool = Field(True, description="also measure action match of temperature-1 samples")
    threads: int = Field(2, ge=1, le=1024, description="torch CPU threads")

    def problems(self) -> list[str]:
        """Every inconsistency, each with its fix ([] if none)."""
        from darwin.components import ComponentError, ComponentSpec, check_component

        out: list[str] = []
        try:
            check_component("agent_format", ComponentSpec(name=self.agent_format), memory=None)
        except ComponentError as exc:
            out.append(f"agent_format: {exc}")
        w, h = self.observation_size
        if w <= 0 or h <= 0 or w % 28 or h % 28:
            out.append(
                f"observation_size={w}x{h} must be positive multiples of 28 (the merged patch), e.g. "
                f"{max(28, w // 28 * 28)}x{max(28, h // 28 * 28)}"
            )
        if self.oracle is None and not self.runs and not self.jsonl:
            out.append("no demonstrations: give oracle, runs (--from-run) or jsonl (--from-jsonl)")
        if self.warmup_steps >= self.steps and self.steps > 1:
            out.append(f"warmup_steps={self.warmup_steps} must be below steps={self.steps}")
        return out

    @model_validator(mode="after")
    def _check(self) -> FinetuneConfig:
        problems = self.problems()
        if problems:
            raise ValueError(problems_message("FinetuneConfig", problems))
        return self

    def make_agent(self) -> VLMAgent:
        """A fresh agent of ``agent_format`` with the configured memory (what acts at run time)."""
        from darwin.agents.formats import make_agent

        return make_agent(self.agent_format, SlidingWindowMemory(self.memory))

    def oracle_demo_config(self) -> Any:
        """The :class:`~darwin.sft.config.SFTConfig` whose demonstration fields ``oracle`` sets."""
        from darwin.sft.config import SFTConfig

        assert self.oracle is not None
        o = self.oracle
        return SFTConfig(
            tasks=o.tasks,
            phones=o.phones,
            episodes=max(o.episodes, o.phones),
            phone_seed=o.phone_seed,
            heldout_phones=o.heldout_phones,
            heldout_episodes=o.heldout_episodes,
            launch_by_name=o.launch_by_name,
            prefer_typing=o.prefer_typing,
            observation_size=self.observation_size,
            seed=self.seed,
        )


@dataclass(frozen=True)
class ActionMatch:
    """Held-out action match: the share of steps whose generated response parses to the
    demonstrated action (coordinates in the format's own rounding), overall and per action type."""

    steps: int
    greedy: float
    sampled: float | None
    per_type: dict[str, dict[str, float | int | None]] = field(default_factory=dict)
    """``{action type: {"steps": n, "greedy": share, "sampled": share | None}}``."""


@dataclass
class FinetuneResult:
    """What :func:`finetune` produced."""

    vlm: VLM
    config: FinetuneConfig
    metadata: dict[str, Any]
    before: ActionMatch | None
    after: ActionMatch | None
    path: Path | None = None


def _split(episodes: Sequence[DemoEpisode], fraction: float, seed: int) -> tuple[list[DemoEpisode], list[DemoEpisode]]:
    """Hold out ``fraction`` of the episodes (at least one when there are two or more)."""
    if fraction <= 0 or len(episodes) < 2:
        return list(episodes), []
    n_held = min(len(episodes) - 1, max(1, round(fraction * len(episodes))))
    order = np.random.default_rng(seed).permutation(len(episodes))
    held = set(order[:n_held].tolist())
    return [e for i, e in enumerate(episodes) if i not in held], [e for i, e in enumerate(episodes) if i in held]


def gather_examples(config: FinetuneConfig) -> tuple[list[Example], list[Example], dict[str, Any]]:
    """Train and held-out examples from every configured source, built by the run-time agent,
    and what they contain (per source: episodes and steps)."""
    from darwin.sft.sources import (
        build_examples,
        episodes_from_jsonl,
        episodes_from_oracle,
        episodes_from_run,
    )

    train_eps: list[DemoEpisode] = []
    held_eps: list[DemoEpisode] = []
    stats: dict[str, Any] = {}
    if config.oracle is not None:
        demo_cfg = config.oracle_demo_config()
        got, oracle_held = episodes_from_oracle(demo_cfg), episodes_from_oracle(demo_cfg, heldout=True)
        train_eps += got
        held_eps += oracle_held
        stats["oracle"] = {"episodes": len(got), "heldout_episodes": len(oracle_held)}
    pooled: list[DemoEpisode] = []
    for run in config.runs:
        got = episodes_from_run(run, config.observation_size)
        if not got:
            logger.warning("%s: no verifier-accepted episodes", run)
        stats[f"run:{run}"] = {
            "episodes": len(got),
            "verifiers": sorted({e.verdict.verifier_kind for e in got if e.verdict}),
        }
        pooled += got
    for path in config.jsonl:
        got = episodes_from_jsonl(path, config.observation_size)
        stats[f"jsonl:{path}"] = {"episodes": len(got)}
        pooled += got
    tr, he = _split(pooled, config.heldout_fraction, config.seed)
    train_eps += tr
    held_eps += he
    train = build_examples(config.make_agent, train_eps)
    held = build_examples(config.make_agent, held_eps)
    if not train:
        raise ValueError("no training examples: the sources hold no usable steps (see the warnings above)")
    stats["train"] = {"episodes": len(train_eps), "steps": len(train)}
    stats["heldout"] = {"episodes": len(held_eps), "steps": len(held)}
    return train, held, stats


def _generate(vlm: VLM, prompts: Sequence[Any], *, temperature: float, seed: int, max_new_tokens: int) -> list[str]:
    from darwin.policies.hf import HFPolicy, HFPolicyConfig

    out: list[str] = []
    with HFPolicy(vlm, HFPolicyConfig(temperature=temperature, seed=seed, max_new_tokens=max_new_tokens)) as policy:
        for start in range(0, len(prompts), 16):
            out.extend(g.text for g in policy.generate_sync(list(prompts[start : start + 16])))
    return out


def action_match(
    vlm: VLM,
    agent: VLMAgent,
    examples: Sequence[Example],
    *,
    sampled: bool = True,
    seed: int = 0,
    max_new_tokens: int = 64,
) -> ActionMatch:
    """Greedy (and temperature-1 sampled) action match of ``vlm`` on ``examples``, per action type."""
    was_training = vlm.model.training
    vlm.model.eval()
    try:
        prompts = [e.prompt for e in examples]
        runs = {"greedy": _generate(vlm, prompts, temperature=0.0, seed=seed, max_new_tokens=max_new_tokens)}
        if sampled:
            runs["sampled"] = _generate(vlm, prompts, temperature=1.0, seed=seed, max_new_tokens=max_new_tokens)
    finally:
        vlm.model.train(was_training)
    hits: dict[str, list[bool]] = {}
    per_type: dict[str, dict[str, list[bool]]] = {}
    for label, texts in runs.items():
        hits[label] = []
        for text, ex in zip(texts, examples, strict=True):
            ok = agent.parse(text, ex.observation).action == ex.action
            hits[label].append(ok)
            per_type.setdefault(ex.action.type, {}).setdefault(label, []).append(ok)

    def share(values: list[bool] | None) -> float | None:
        return None if values is None else (sum(values) / len(values) if values else 0.0)

    return ActionMatch(
        steps=len(examples),
        greedy=share(hits["greedy"]) or 0.0,
        sampled=share(hits.get("sampled")),
        per_type={
            t: {"steps": len(v["greedy"]), "greedy": share(v["greedy"]), "sampled": share(v.get("sampled"))}
            for t, v in sorted(per_type.items())
        },
    )


def heldout_loss(vlm: VLM, encoded: EncodedDemos, batch_size: int = 16) -> float:
    """Mean target-token NLL (EOS included) under the policy's masked distribution."""
    import torch

    from darwin.models.scoring import compute_response_logprobs, forbidden_mask

    forbidden = forbidden_mask(vlm.forbidden_token_ids(), vlm.vocab_size)
    nll, tokens = 0.0, 0
    was_training = vlm.model.training
    vlm.model.eval()
    try:
        with torch.inference_mode():
            for start in range(0, len(encoded), batch_size):
                inputs, targets = encoded.batch(list(range(start, min(start + batch_size, len(encoded)))))
                lp, mask = compute_response_logprobs(vlm.model, inputs, targets, forbidden=forbidden, temperature=1.0)
                nll -= float(lp.sum())
                tokens += int(mask.sum())
    finally:
        vlm.model.train(was_training)
    return nll / max(tokens, 1)


def finetune(
    config: FinetuneConfig,
    out: str | os.PathLike[str] | None = None,
    *,
    on_step: Callable[[StepStats], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> FinetuneResult:
    """Fine-tune ``config.model`` under ``config.agent_format`` on the configured
    demonstrations; measure held-out loss and action match before and after; save to ``out``.

    The loss is the mean NLL of the response tokens (and EOS) under the masked distribution the
    policy samples from (:func:`~darwin.models.scoring.compute_response_logprobs`), on inputs built
    as :class:`~darwin.policies.hf.HFPolicy` builds them. Global RNGs are never touched.
    """
    import torch

    from darwin.models.factory import load_vlm
    from darwin.models.scoring import compute_response_logprobs, forbidden_mask, response_nll
    from darwin.sft.encoding import encode_demonstrations
    from darwin.sft.training import StepStats, _batches, _torch_threads, _versions, lr_at

    phase = on_phase or (lambda name: None)
    started = time.perf_counter()
    with _torch_threads(config.threads):
        phase("demonstrations")
        train, held, data_stats = gather_examples(config)
        phase("encoding")
        vlm = load_vlm(config.model)
        agent = config.make_agent()
        encoded = encode_demonstrations(vlm, train)
        encoded_held = encode_demonstrations(vlm, held) if held else None
        max_target = max(len(t) for t in encoded.target_ids)
        cap = max(32, 2 * max_target)
        phase("held-out (before)")
        before_loss = heldout_loss(vlm, encoded_held) if encoded_held is not None else None
        before = (
            action_match(vlm, agent, held, sampled=config.sampled_match, seed=config.seed, max_new_tokens=cap)
            if held
            else None
        )

        phase("training")
        model = vlm.model
        if config.lora_rank:
            from peft import LoraConfig, get_peft_model

            peft_model = get_peft_model(
                model,
                LoraConfig(
                    r=config.lora_rank,
                    lora_alpha=config.lora_alpha,  # type: ignore[arg-type]  # peft annotates int; a float scales the same (alpha / r)
                    lora_dropout=0.0,
                    target_modules=list(config.lora_targets),
                ),
            )
            # the adapters sit inside it; darwin's scoring needs its own class (peft types it nn.Module)
            model = cast("PreTrainedModel", peft_model.get_base_model())
        model.train()
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(
            [
                {"params": [p for p in params if p.ndim >= 2], "weight_decay": config.weight_decay},
                {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
            ],
            lr=config.lr,
            betas=(0.9, 0.95),
            eps=1e-8,
        )
        forbidden = forbidden_mask(vlm.forbidden_token_ids(), vlm.vocab_size)
        batches = _batches(len(encoded), config.batch_size, torch.Generator().manual_seed(config.seed))
        losses: list[float] = []
        t = time.perf_counter()
        for step in range(config.steps):
            tick = time.perf_counter()
            lr = lr_at(step, config)
            for group in optimizer.param_groups:
                group["lr"] = lr
            inputs, targets = encoded.batch(next(batches))
            logprobs, mask = compute_response_logprobs(model, inputs, targets, forbidden=forbidden, temperature=1.0)
            loss = response_nll(logprobs, mask)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if config.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
            optimizer.step()
            value = float(loss.detach())
            if not math.isfinite(value):
                raise FloatingPointError(f"fine-tune loss became {value} at step {step + 1}: lower lr")
            losses.append(value)
            if on_step is not None:
                now = time.perf_counter()
                n_tokens = int(inputs["attention_mask"].sum()) + int(mask.sum())
                on_step(StepStats(step + 1, config.steps, value, lr, n_tokens / max(now - tick, 1e-9), now - started))
        training_s = time.perf_counter() - t
        if config.lora_rank:
            vlm.model = cast("PreTrainedModel", peft_model.merge_and_unload())  # the base model, adapters merged
        vlm.model.eval()
        phase("held-out (after)")
        after_loss = heldout_loss(vlm, encoded_held) if encoded_held is not None else None
        after = (
            action_match(vlm, agent, held, sampled=config.sampled_match, seed=config.seed, max_new_tokens=cap)
            if held
            else None
        )

    verdicts: dict[str, int] = {}
    for ex in train:
        if ex.verdict is not None:
            verdicts[ex.verdict.verifier_kind] = verdicts.get(ex.verdict.verifier_kind, 0) + 1
    metadata: dict[str, Any] = {
        "format_version": SFT_FORMAT_VERSION,
        "kind": "finetune",
        "config": config.model_dump(mode="json"),
        "model": {"source": config.model, "family": vlm.family, "parameters": vlm.num_parameters()},
        "data": {**data_stats, "train_steps_accepted_by": verdicts, "max_target_tokens": max_target},
        "training": {
            "steps_run": len(losses),
            "first_loss": losses[0],
            "final_loss": float(np.mean(losses[-min(10, len(losses)) :])),
            "loss_curve": [round(v, 5) for v in losses[:: max(1, len(losses) // 100)]],
            "heldout_loss_before": before_loss,
            "heldout_loss_after": after_loss,
            "action_match_before": None if before is None else asdict(before),
            "action_match_after": None if after is None else asdict(after),
        },
        "examples": [
            {
                "episode_id": e.episode_id,
                "step": e.step,
                "task_id": e.task_id,
                "source": e.source,
                "verdict": None if e.verdict is None else asdict(e.verdict),
            }
            for e in train[:2000]
        ],
        "wall_time_s": {"training_s": round(training_s, 2), "total_s": round(time.perf_counter() - started, 2)},
        "versions": _versions(),
    }
    result = FinetuneResult(vlm=vlm, config=config, metadata=metadata, before=before, after=after)
    if out is not None:
        result.path = save_finetuned(result, out, max_new_tokens=cap)
    return result


def save_finetuned(result: FinetuneResult, out: str | os.PathLike[str], *, max_new_tokens: int) -> Path:
    """Write the model in Hugging Face layout plus the agent record (``kind: "format"``) and the metadata."""
    path = Path(out)
    result.vlm.save_pretrained(path)
    config = result.config
    record = {
        "format_version": SFT_FORMAT_VERSION,
        "kind": "format",
        "format": config.agent_format,
        "memory": config.memory.model_dump(mode="json"),
        "observation_size": list(config.observation_size),
        "max_new_tokens": max_new_tokens,
    }
    for name, data in ((AGENT_FILE, record), (SFT_FILE, result.metadata)):
        tmp = path / (name + ".tmp")
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path / name)
    logger.info("saved fine-tuned %s checkpoint to %s", config.agent_format, path)
    return path
