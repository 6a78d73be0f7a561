"""Agent formats by name: the prompt and output format a model speaks (one registry, used by
``darwin eval --agent-format`` and an experiment's ``agent.format``).

    >>> make_agent("uitars-1.5").convention.kind, make_agent("uitars-1.0").convention.kind
    ('resized_image', 'relative')
    >>> make_agent("uitars1.5")
    Traceback (most recent call last):
    ValueError: unknown agent format 'uitars1.5' (did you mean 'uitars-1.5'?); formats: uitars-1.5, uitars-1.0, qwen2.5, qwen3, tiny
"""

from __future__ import annotations

import difflib
from collections.abc import Callable

from darwin.agents.qwen import QwenVLAgent
from darwin.agents.tiny import TinyAgent
from darwin.agents.uitars import UITarsAgent
from darwin.agents.vlm import VLMAgent
from darwin.memory.base import Memory

AGENT_FORMATS: dict[str, Callable[[Memory | None], VLMAgent]] = {
    "uitars-1.5": lambda memory: UITarsAgent(memory=memory, version="1.5"),
    "uitars-1.0": lambda memory: UITarsAgent(memory=memory, version="1.0"),
    "qwen2.5": lambda memory: QwenVLAgent(memory=memory, version="2.5"),
    "qwen3": lambda memory: QwenVLAgent(memory=memory, version="3"),
    "tiny": lambda memory: TinyAgent(memory=memory),
}
"""Each format's agent, built with an optional memory (None: the agent's default)."""


def make_agent(name: str, memory: Memory | None = None) -> VLMAgent:
    """A fresh agent of format ``name``; an unknown name raises with the close match."""
    try:
        build = AGENT_FORMATS[name]
    except KeyError:
        close = difflib.get_close_matches(name, AGENT_FORMATS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown agent format {name!r}{hint}; formats: {', '.join(AGENT_FORMATS)}") from None
    return build(memory)
