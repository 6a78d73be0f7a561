"""Measure HFPolicy sampling on a tiny VLM: latency per batch, per request, tokens per second.

    darwin bench policy                       # qwen2_vl, batches 1 and 8, 16 tokens
    darwin bench policy --batch 1,8,32 --family qwen2_5_vl --device cuda

Each batch holds distinct random screenshots at the configured screen size; a random
tiny model almost never samples EOS, so responses run ``--new-tokens`` steps
(``tokens_per_s`` counts the tokens actually generated). Timings are the median of
``--repeats`` runs after one warm-up and include preprocessing (chat template, image
processor); they vary with machine load, so compare numbers taken in one run.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np
import torch

from darwin.models.config import TinyVLMConfig
from darwin.models.factory import build_tiny_vlm
from darwin.policies.hf import HFPolicy, HFPolicyConfig
from darwin.types import ChatMessage, Prompt


@dataclass(frozen=True)
class PolicyBenchResult:
    """One batch size's measurements."""

    family: str
    device: str
    threads: int
    batch: int
    prompt_tokens: int
    new_tokens: float
    """Mean response length actually generated."""
    batch_ms: float
    ms_per_request: float
    tokens_per_s: float


def _prompts(cfg: TinyVLMConfig, batch: int, seed: int) -> list[Prompt]:
    rng = np.random.default_rng(seed)
    return [
        Prompt(
            messages=(
                ChatMessage(
                    role="user",
                    text=f"Open Settings and turn on dark theme ({i}).",
                    images=(rng.integers(0, 256, (cfg.screen_height, cfg.screen_width, 3), dtype=np.uint8),),
                ),
            )
        )
        for i in range(batch)
    ]


def benchmark(
    config: TinyVLMConfig,
    batches: list[int],
    *,
    new_tokens: int = 16,
    repeats: int = 5,
    device: str = "cpu",
) -> list[PolicyBenchResult]:
    """Time ``HFPolicy.generate_sync`` for each batch size (up to ``new_tokens`` steps)."""
    vlm = build_tiny_vlm(config, seed=0)
    vlm.model.to(device)  # type: ignore[arg-type]  # transformers wraps PreTrainedModel.to with functools.wraps, whose stub loses the bound self
    policy = HFPolicy(vlm, HFPolicyConfig(max_new_tokens=new_tokens, seed=0))
    out = []
    for batch in batches:
        prompts = _prompts(config, batch, seed=batch)
        policy.generate_sync(prompts)  # warm-up
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            gens = policy.generate_sync(prompts)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        generated = sum(len(g.response_ids) for g in gens)
        median = statistics.median(times)
        out.append(
            PolicyBenchResult(
                family=config.family,
                device=device,
                threads=torch.get_num_threads(),
                batch=batch,
                prompt_tokens=len(gens[0].prompt_ids),
                new_tokens=round(generated / batch, 1),
                batch_ms=round(median * 1000, 1),
                ms_per_request=round(median * 1000 / batch, 1),
                tokens_per_s=round(generated / median, 1),
            )
        )
    policy.close()
    return out
