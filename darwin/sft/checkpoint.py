"""The warm-start checkpoint directory: writing it (:func:`save_warm_start`). Loading it back
into the exact agent and model (:func:`load_warm_start` -> :class:`WarmStart`) is the agent's
side, :mod:`darwin.agents.checkpoint`.

Besides the model's own files (``VLM.save_pretrained``) a checkpoint holds
:data:`AGENT_FILE` (which agent, memory and screen size it was trained for) and
:data:`SFT_FILE` (the SFT metadata, written last). See docs/sft.md for the layout.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from darwin.agents.checkpoint import (
    AGENT_FILE,
    SFT_FILE,
    SFT_FORMAT_VERSION,
)

__all__ = [
    "recommended_max_new_tokens",
    "save_warm_start",
]

if TYPE_CHECKING:
    from darwin.sft.training import SFTResult

logger = logging.getLogger(__name__)


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
