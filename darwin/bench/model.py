"""Measure a tiny VLM on this machine: parameters, build time, forward and generate latency.

    darwin bench model --family qwen2_vl --preset A --batch 8

Timings are the median of ``--repeats`` runs after one warm-up, on random 252x560
screenshots, with ``torch.inference_mode``. They vary with machine load (other processes
sharing the cores); compare numbers taken in one run.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from darwin.models.config import TinyVLMConfig
from darwin.models.factory import VLM, build_tiny_vlm


@dataclass(frozen=True)
class ModelBenchResult:
    """One configuration's measurements (milliseconds unless named otherwise)."""

    family: str
    parameters: int
    visual_tokens: int
    prompt_tokens: int
    batch: int
    threads: int
    build_ms: float
    forward_ms: float
    generate_ms: float
    generate_tokens: int


def _batch(vlm: VLM, batch: int, seed: int) -> dict[str, torch.Tensor]:
    cfg = vlm.tiny_config
    if cfg is None:
        raise ValueError("benchmark needs a tiny model (its screen size comes from tiny_config)")
    rng = np.random.default_rng(seed)
    convs = [
        [
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "image": rng.integers(0, 256, (cfg.screen_height, cfg.screen_width, 3), dtype=np.uint8),
                    },
                    {"type": "text", "text": f"Open Settings and turn on dark theme ({i})."},
                ],
            }
        ]
        for i in range(batch)
    ]
    return dict(vlm.build_inputs(convs))


def _median_ms(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def benchmark(config: TinyVLMConfig, *, batch: int = 8, new_tokens: int = 16, repeats: int = 5) -> ModelBenchResult:
    """Build ``config`` and time one forward and one ``generate`` of ``new_tokens`` tokens."""
    start = time.perf_counter()
    vlm = build_tiny_vlm(config, seed=0)
    build_ms = (time.perf_counter() - start) * 1000
    inputs = _batch(vlm, batch, seed=0)
    with torch.inference_mode(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        forward_ms = _median_ms(lambda: vlm.model(**inputs), repeats)
        generate_ms = _median_ms(
            lambda: vlm.model.generate(**inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens),  # type: ignore[operator]  # PreTrainedModel's stub lacks generate; the Qwen2-VL class mixes in GenerationMixin
            repeats,
        )
    return ModelBenchResult(
        family=config.family,
        parameters=vlm.num_parameters(),
        visual_tokens=config.visual_tokens,
        prompt_tokens=int(inputs["input_ids"].shape[1]),
        batch=batch,
        threads=torch.get_num_threads(),
        build_ms=round(build_ms, 1),
        forward_ms=round(forward_ms, 1),
        generate_ms=round(generate_ms, 1),
        generate_tokens=new_tokens,
    )
