"""Training: behaviour cloning of a fresh tiny Qwen2-VL on the demonstrations.

:func:`train_sft` collects demonstrations (:mod:`darwin.sft.demonstrations`), encodes them
(:mod:`darwin.sft.encoding`) and fine-tunes on ``prompt -> action text + EOS`` with the
masked log-probs the PPO learner uses (:func:`~darwin.models.scoring.compute_response_logprobs`).
It stops *short of mastery* on purpose (a fixed step budget, optionally an earlier held-out
threshold, scored by :func:`heldout_metrics`) and saves the checkpoint with
:func:`save_warm_start`. See docs/sft.md.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from darwin.agents.tiny import TinyAgent
from darwin.agents.warm_start import AGENT_FILE, SFT_FILE, SFT_FORMAT_VERSION
from darwin.sft.config import SFTConfig
from darwin.sft.demonstrations import Demonstration, DemoStats, collect_demonstrations
from darwin.sft.encoding import EncodedDemos, encode_demonstrations
from darwin.types import Prompt

if TYPE_CHECKING:
    import torch

    from darwin.models.factory import VLM

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepStats:
    """One optimizer step, for progress displays."""

    step: int
    steps: int
    loss: float
    lr: float
    tokens_per_s: float
    """Prompt and target tokens processed per second (this step)."""
    elapsed_s: float


@dataclass(frozen=True)
class HeldoutMetrics:
    """Teacher-forced (and optionally greedy) metrics on held-out demonstrations."""

    step: int
    loss: float
    """Mean target-token negative log-likelihood (EOS included)."""
    sequence_prob: float
    """Mean probability that a temperature-1 sample reproduces the oracle's action text exactly."""
    greedy_match: float | None = None
    """Share of prompts whose greedy output is exactly the oracle's action text."""
    greedy_action_match: float | None = None
    """Share whose greedy output parses to the same action (coordinates on the agent's grid)."""


@dataclass
class SFTResult:
    """What :func:`train_sft` produced."""

    vlm: VLM
    agent: TinyAgent
    config: SFTConfig
    metadata: dict[str, Any]
    path: Path | None = None
    history: list[HeldoutMetrics] = field(default_factory=list)


class Schedule(Protocol):
    """The schedule fields :func:`lr_at` reads (an :class:`SFTConfig` or a fine-tune config)."""

    @property
    def steps(self) -> int: ...
    @property
    def warmup_steps(self) -> int: ...
    @property
    def lr(self) -> float: ...
    @property
    def min_lr_ratio(self) -> float: ...


def lr_at(step: int, config: Schedule) -> float:
    """Learning rate of optimizer step ``step`` (0-based): linear warm-up, cosine to ``min_lr_ratio``.

    >>> cfg = SFTConfig(steps=101, warmup_steps=10, lr=1.0, min_lr_ratio=0.1)
    >>> [round(lr_at(s, cfg), 3) for s in (0, 9, 10, 55, 100)]
    [0.1, 1.0, 1.0, 0.55, 0.1]
    """
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    span = max(config.steps - 1 - config.warmup_steps, 1)
    progress = min(max(step - config.warmup_steps, 0) / span, 1.0)
    floor = config.min_lr_ratio
    return config.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _batches(n: int, batch_size: int, generator: torch.Generator) -> Iterator[list[int]]:
    """Endless shuffled epochs over ``range(n)`` in batches (the last partial batch of an
    epoch is topped up from the next epoch so every batch has ``batch_size`` rows)."""
    import torch

    pending: list[int] = []
    while True:
        while len(pending) < batch_size:
            pending.extend(torch.randperm(n, generator=generator).tolist())
        yield pending[:batch_size]
        pending = pending[batch_size:]


def heldout_metrics(
    vlm: VLM,
    encoded: EncodedDemos,
    demos: Sequence[Demonstration],
    agent: TinyAgent,
    *,
    step: int,
    greedy: bool = False,
    batch_size: int = 32,
) -> HeldoutMetrics:
    """Held-out loss and sequence probability (teacher forced); greedy matches if asked."""
    import torch

    from darwin.models.scoring import compute_response_logprobs, forbidden_mask

    model = vlm.model
    was_training = model.training
    model.eval()
    forbidden = forbidden_mask(vlm.forbidden_token_ids(), vlm.vocab_size)
    nll, tokens, seq_probs = 0.0, 0, []
    try:
        with torch.inference_mode():
            for start in range(0, len(encoded), batch_size):
                idx = list(range(start, min(start + batch_size, len(encoded))))
                inputs, targets = encoded.batch(idx)
                lp, mask = compute_response_logprobs(model, inputs, targets, forbidden=forbidden, temperature=1.0)
                nll -= float(lp.sum())
                tokens += int(mask.sum())
                seq_probs.extend(torch.exp(lp.sum(-1)).tolist())
        greedy_match = action_match = None
        if greedy and demos:
            texts = greedy_outputs(
                vlm, [d.prompt for d in demos], max_new_tokens=max(len(t) for t in encoded.target_ids) + 8
            )
            greedy_match = sum(t == d.target for t, d in zip(texts, demos, strict=True)) / len(demos)
            action_match = sum(
                agent.parse(t, d.observation).action == d.action for t, d in zip(texts, demos, strict=True)
            ) / len(demos)
    finally:
        model.train(was_training)
    return HeldoutMetrics(
        step=step,
        loss=nll / max(tokens, 1),
        sequence_prob=float(np.mean(seq_probs)) if seq_probs else 0.0,
        greedy_match=greedy_match,
        greedy_action_match=action_match,
    )


def greedy_outputs(vlm: VLM, prompts: Sequence[Prompt], *, max_new_tokens: int = 64, batch_size: int = 32) -> list[str]:
    """Greedy responses of the model through :class:`~darwin.policies.hf.HFPolicy` (the rollout path)."""
    from darwin.policies.hf import HFPolicy, HFPolicyConfig

    out: list[str] = []
    with HFPolicy(vlm, HFPolicyConfig(temperature=0.0, max_new_tokens=max_new_tokens)) as policy:
        for start in range(0, len(prompts), batch_size):
            out.extend(g.text for g in policy.generate_sync(list(prompts[start : start + batch_size])))
    return out


def train_sft(
    config: SFTConfig | None = None,
    out: str | os.PathLike[str] | None = None,
    *,
    on_step: Callable[[StepStats], None] | None = None,
    on_heldout: Callable[[HeldoutMetrics], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
    on_advance: Callable[[int, int, str], None] | None = None,
) -> SFTResult:
    """Collect demonstrations, behaviour-clone a fresh tiny model, save it to ``out`` (if given).

    The loss is the mean negative log-likelihood of the target tokens (the action text and
    EOS) under the *masked* distribution the policy samples from: log-probs come from
    :func:`~darwin.models.scoring.compute_response_logprobs` with the policy's forbidden-token
    mask at temperature 1, on inputs built exactly as :class:`~darwin.policies.hf.HFPolicy`
    builds them. Training stops after ``config.steps`` optimizer steps, or earlier when the
    held-out ``stop_metric`` reaches ``stop_threshold``. Deterministic for a given config
    and thread count; global RNGs are never touched.

    ``on_phase(name)`` names each phase as it starts (``demonstrations``, ``encoding``,
    ``training``, ``held-out``) and ``on_advance(done, total, unit)`` follows the phase's work
    (episodes played, prompts encoded, optimizer steps), for progress displays.
    """
    import torch

    from darwin.models.factory import build_tiny_vlm
    from darwin.models.scoring import compute_response_logprobs, forbidden_mask, response_nll

    config = config if config is not None else SFTConfig()
    phase = on_phase or (lambda name: None)
    advance = on_advance or (lambda done, total, unit: None)
    timings: dict[str, float] = {}
    started = time.perf_counter()
    cpu_started = time.process_time()
    load_started = _load_average()
    with _torch_threads(config.threads):
        phase("demonstrations")
        t = time.perf_counter()
        # the episodes both collections play (the held-out one plays none without phones)
        episodes = (config.episodes if config.phones else 0) + (config.heldout_episodes if config.heldout_phones else 0)
        demos, stats = collect_demonstrations(config, on_episode=lambda done, _: advance(done, episodes, "episodes"))
        held, held_stats = collect_demonstrations(
            config, heldout=True, on_episode=lambda done, _: advance(config.episodes + done, episodes, "episodes")
        )
        if not demos:
            raise ValueError("no demonstrations were collected: raise episodes")
        timings["demonstrations_s"] = time.perf_counter() - t

        phase("encoding")
        t = time.perf_counter()
        vlm = build_tiny_vlm(config.resolved_model, seed=config.model_seed)
        agent = config.make_agent()
        prompts = len(demos) + len(held)
        encoded = encode_demonstrations(vlm, demos, on_chunk=lambda done, _: advance(done, prompts, "prompts"))
        encoded_held = (
            encode_demonstrations(vlm, held, on_chunk=lambda done, _: advance(len(demos) + done, prompts, "prompts"))
            if held
            else None
        )
        timings["encoding_s"] = time.perf_counter() - t
        target_lengths = [len(x) for x in encoded.target_ids]
        stats = DemoStats(
            **{
                **stats.__dict__,
                "unique_screens": int(encoded.screens.shape[0]),
                "target_tokens": sum(target_lengths),
                "max_target_tokens": max(target_lengths),
                "mean_prompt_tokens": float(np.mean([len(p) for p in encoded.prompt_ids])),
            }
        )
        logger.info(
            "%d demonstration steps from %d episodes (%d unique screens, %.0f prompt tokens on average)",
            stats.steps,
            stats.episodes,
            stats.unique_screens,
            stats.mean_prompt_tokens,
        )

        phase("training")
        t = time.perf_counter()
        model = vlm.model
        model.train()
        decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
        no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
        optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=config.lr,
            betas=(0.9, 0.95),
            eps=1e-8,
        )
        forbidden = forbidden_mask(vlm.forbidden_token_ids(), vlm.vocab_size)
        generator = torch.Generator().manual_seed(config.seed)
        batches = _batches(len(encoded), config.batch_size, generator)
        history: list[HeldoutMetrics] = []
        losses: list[float] = []
        stopped_early = False
        steps_run = 0
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
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            steps_run = step + 1
            value = float(loss.detach())
            if not math.isfinite(value):
                raise FloatingPointError(f"SFT loss became {value} at step {steps_run}: lower lr")
            losses.append(value)
            advance(steps_run, config.steps, "steps")
            if on_step is not None:
                n_tokens = int(inputs["attention_mask"].sum()) + int(mask.sum())
                now = time.perf_counter()
                on_step(StepStats(steps_run, config.steps, value, lr, n_tokens / max(now - tick, 1e-9), now - started))
            due = config.eval_every and steps_run % config.eval_every == 0 and steps_run < config.steps
            if due and encoded_held is not None:
                metrics = heldout_metrics(
                    vlm, encoded_held, held, agent, step=steps_run, greedy=config.stop_metric == "greedy_match"
                )
                history.append(metrics)
                logger.info("step %d held-out: %s", steps_run, metrics)
                if on_heldout is not None:
                    on_heldout(metrics)
                value_now = metrics.sequence_prob if config.stop_metric == "sequence_prob" else metrics.greedy_match
                if config.stop_threshold is not None and value_now is not None and value_now >= config.stop_threshold:
                    logger.info(
                        "stopping short of mastery at step %d: held-out %s %.3f >= %.3f",
                        steps_run,
                        config.stop_metric,
                        value_now,
                        config.stop_threshold,
                    )
                    stopped_early = True
                    break
        timings["training_s"] = time.perf_counter() - t
        model.eval()

        final: HeldoutMetrics | None = None
        if encoded_held is not None:
            phase("held-out")
            final = heldout_metrics(vlm, encoded_held, held, agent, step=steps_run, greedy=True)
            history.append(final)
            if on_heldout is not None:
                on_heldout(final)
    timings["total_s"] = time.perf_counter() - started
    timings["process_cpu_s"] = time.process_time() - cpu_started
    tail = losses[-min(20, len(losses)) :]
    metadata: dict[str, Any] = {
        "format_version": SFT_FORMAT_VERSION,
        "config_hash": config.config_hash(),
        "config": config.model_dump(mode="json"),
        "model": {"config": config.resolved_model.model_dump(mode="json"), "parameters": vlm.num_parameters()},
        "data": {"train": _stats_json(stats), "heldout": _stats_json(held_stats)},
        "training": {
            "steps_run": steps_run,
            "stopped_early": stopped_early,
            "first_loss": losses[0],
            "final_loss": float(np.mean(tail)),
            "loss_curve": [round(v, 5) for v in losses[:: max(1, len(losses) // 100)]],
            "heldout": [h.__dict__ for h in history],
        },
        "wall_time_s": {k: round(v, 2) for k, v in timings.items()},
        "threads": config.threads,
        "machine": {"cpu_count": os.cpu_count(), "load_average_1m": [load_started, _load_average()]},
        "versions": _versions(),
    }
    result = SFTResult(vlm=vlm, agent=agent, config=config, metadata=metadata, history=history)
    if out is not None:
        result.path = save_warm_start(result, out)
    logger.info("SFT done in %.1fs (final loss %.4f)", timings["total_s"], metadata["training"]["final_loss"])
    return result


def _load_average() -> float | None:
    """The 1-minute load average (other processes sharing the cores skew timings), if known."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _stats_json(stats: DemoStats) -> dict[str, Any]:
    return dict(stats.__dict__)


def _versions() -> dict[str, str]:
    import platform
    from importlib import metadata

    import torch
    import transformers

    try:
        darwin_version = metadata.version("darwin-mobile-agent")
    except metadata.PackageNotFoundError:
        darwin_version = "not installed"
    return {
        "darwin": darwin_version,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
    }


def recommended_max_new_tokens(max_target_tokens: int) -> int:
    """A response cap for the trained model: twice the longest target, at least 32."""
    return max(32, 2 * max_target_tokens)


def save_warm_start(result: SFTResult, out: str | os.PathLike[str]) -> Path:
    """Write the checkpoint directory (see docs/sft.md for the layout)."""
    path = Path(out)
    result.vlm.save_pretrained(path)
    config = result.config
    agent_record = {
        "format_version": SFT_FORMAT_VERSION,
        "kind": "tiny",
        "agent": config.agent.model_dump(mode="json"),
        "memory": config.memory.model_dump(mode="json"),
        "observation_size": list(config.observation_size),
        "max_new_tokens": recommended_max_new_tokens(result.metadata["data"]["train"]["max_target_tokens"]),
    }
    _write_json(path / AGENT_FILE, agent_record)
    _write_json(path / SFT_FILE, result.metadata)
    logger.info("saved warm-start checkpoint to %s", path)
    return path


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
