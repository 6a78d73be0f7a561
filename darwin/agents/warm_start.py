"""A warm-start checkpoint as the agent reads it: the tiny model and how to run it.

``darwin sft`` writes the directory (:func:`darwin.sft.training.save_warm_start`): the
model in Hugging Face layout, :data:`AGENT_FILE` (the agent's prompt format, memory, screen
size and response cap) and :data:`SFT_FILE` (how it was trained). Acting with one
(:class:`~darwin.agents.pool.ActorPool`, ``darwin eval --agent tiny:<dir>``) needs only this
module, not the SFT code.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from darwin.agents.tiny import TinyAgent, TinyAgentConfig
from darwin.memory.sliding_window import SlidingWindowConfig, SlidingWindowMemory

if TYPE_CHECKING:
    from darwin.agents.vlm import VLMAgent
    from darwin.memory.base import Memory
    from darwin.models.factory import VLM

__all__ = ["AGENT_FILE", "SFT_FILE", "SFT_FORMAT_VERSION", "WarmStart", "load_warm_start"]

SFT_FORMAT_VERSION = 1
"""Version of the checkpoint's agent record (and of the SFT recipe: it is part of the SFT config hash)."""
AGENT_FILE = "darwin_agent.json"
"""Which agent (and memory, screen size) the checkpoint was trained for."""
SFT_FILE = "darwin_sft.json"
"""SFT metadata: config, its hash, data statistics, training curve, timings."""


@dataclass
class WarmStart:
    """A loaded warm-start checkpoint: the model and how to run it."""

    path: Path
    vlm: VLM
    agent_config: TinyAgentConfig
    memory_config: SlidingWindowConfig
    observation_size: tuple[int, int]
    max_new_tokens: int
    metadata: dict[str, Any]
    agent_format: str | None = None
    """An agent format (:mod:`darwin.agents.formats`: a built-in name or an import path) for a checkpoint fine-tuned under a
    named format (``darwin sft --model``); ``None``: the tiny agent of ``agent_config``."""

    def make_agent(self) -> TinyAgent:
        """A fresh agent with the checkpoint's prompt format and memory (tiny checkpoints)."""
        return TinyAgent(self.agent_config, SlidingWindowMemory(self.memory_config))

    def make_any_agent(self, memory: Memory | None = None) -> VLMAgent:
        """A fresh agent of the checkpoint's format, with ``memory`` (default: the checkpoint's)."""
        memory = memory if memory is not None else SlidingWindowMemory(self.memory_config)
        if self.agent_format is None:
            return TinyAgent(self.agent_config, memory)
        from darwin.agents.formats import make_agent

        return make_agent(self.agent_format, memory)


def load_warm_start(path: str | os.PathLike[str]) -> WarmStart:
    """Load a checkpoint written by :func:`~darwin.sft.training.train_sft` / ``darwin sft``."""
    from darwin.models.factory import load_tiny_vlm

    src = Path(path)
    record_file = src / AGENT_FILE
    if not src.is_dir() or not record_file.is_file():
        raise FileNotFoundError(f"no checkpoint at {src}; run `darwin sft --out {src}` first")
    try:
        record = json.loads(record_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{record_file}: not valid JSON ({exc})") from exc
    if record.get("format_version") != SFT_FORMAT_VERSION or record.get("kind") not in ("tiny", "format"):
        raise ValueError(
            f"{record_file}: expected a tiny or format agent record of format_version {SFT_FORMAT_VERSION}, got "
            f"kind={record.get('kind')!r} format_version={record.get('format_version')!r}; retrain with `darwin sft`"
        )
    metadata_file = src / SFT_FILE
    metadata = json.loads(metadata_file.read_text(encoding="utf-8")) if metadata_file.is_file() else {}
    if record["kind"] == "format":  # `darwin sft --model`: any Qwen2-VL-family checkpoint under a named format
        from darwin.models.factory import load_vlm

        w, h = (int(v) for v in record["observation_size"])
        return WarmStart(
            path=src,
            vlm=load_vlm(src),
            agent_config=TinyAgentConfig(),
            memory_config=SlidingWindowConfig.model_validate(record["memory"]),
            observation_size=(w, h),
            max_new_tokens=int(record.get("max_new_tokens", 256)),
            metadata=metadata,
            agent_format=str(record["format"]),
        )
    vlm = load_tiny_vlm(src)
    w, h = (int(v) for v in record["observation_size"])
    tiny = vlm.tiny_config
    if tiny is not None and (tiny.screen_width, tiny.screen_height) != (w, h):
        raise ValueError(
            f"{record_file}: observation_size {w}x{h} differs from the model's screen "
            f"{tiny.screen_width}x{tiny.screen_height}"
        )
    return WarmStart(
        path=src,
        vlm=vlm,
        agent_config=TinyAgentConfig.model_validate(record["agent"]),
        memory_config=SlidingWindowConfig.model_validate(record["memory"]),
        observation_size=(w, h),
        max_new_tokens=int(record.get("max_new_tokens", 64)),
        metadata=metadata,
    )
