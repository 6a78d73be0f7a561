"""The warm-start checkpoint directory: writing it (:func:`save_warm_start`) and loading it
back into the exact agent and model (:func:`load_warm_start` -> :class:`WarmStart`).

Besides the model's own files (``VLM.save_pretrained``) a checkpoint holds
:data:`AGENT_FILE` (which agent, memory and screen size it was trained for) and
:data:`SFT_FILE` (the SFT metadata, written last). See docs/sft.md for the layout.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from darwin.agents.tiny import TinyAgent, TinyAgentConfig
from darwin.memory.sliding_window import SlidingWindowConfig, SlidingWindowMemory
from darwin.sft.config import SFT_FORMAT_VERSION

if TYPE_CHECKING:
    from darwin.models.factory import VLM
    from darwin.sft.training import SFTResult

logger = logging.getLogger(__name__)

AGENT_FILE = "darwin_agent.json"
"""Which agent (and memory, screen size) the checkpoint was trained for."""
SFT_FILE = "darwin_sft.json"
"""SFT metadata: config, its hash, data statistics, training curve, timings."""


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

    def make_agent(self) -> TinyAgent:
        """A fresh agent with the checkpoint's prompt format and memory."""
        return TinyAgent(self.agent_config, SlidingWindowMemory(self.memory_config))


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
    if record.get("format_version") != SFT_FORMAT_VERSION or record.get("kind") != "tiny":
        raise ValueError(
            f"{record_file}: expected a tiny agent record of format_version {SFT_FORMAT_VERSION}, got "
            f"kind={record.get('kind')!r} format_version={record.get('format_version')!r}; retrain with `darwin sft`"
        )
    metadata_file = src / SFT_FILE
    metadata = json.loads(metadata_file.read_text(encoding="utf-8")) if metadata_file.is_file() else {}
    vlm = load_tiny_vlm(src)
    w, h = (int(v) for v in record["observation_size"])
    tiny = vlm.tiny_config
    if tiny is not None and (tiny.screen_width, tiny.screen_height) != (w, h):
        raise ValueError(f"{record_file}: observation_size {w}x{h} differs from the model's screen "
                         f"{tiny.screen_width}x{tiny.screen_height}")
    return WarmStart(
        path=src, vlm=vlm, agent_config=TinyAgentConfig.model_validate(record["agent"]),
        memory_config=SlidingWindowConfig.model_validate(record["memory"]), observation_size=(w, h),
        max_new_tokens=int(record.get("max_new_tokens", 64)), metadata=metadata,
    )
