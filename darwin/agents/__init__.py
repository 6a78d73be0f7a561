"""Agents: who chooses actions. VLM agents build prompts (psi) and parse responses (xi).

    >>> from darwin.agents import QwenVLAgent, TinyAgent, UITarsAgent
    >>> UITarsAgent(version="1.0").convention.kind, QwenVLAgent(version="2.5").convention.kind
    ('relative', 'resized_image')

See docs/agents.md for prompt formats, coordinate conventions and writing your own agent.
"""

from darwin.agents.base import Actor, Agent, ModelActor
from darwin.agents.coords import (
    CoordinateConvention,
    DeviceCoordinates,
    RelativeCoordinates,
    ResizedImageCoordinates,
    smart_resize,
)
from darwin.agents.qwen import QwenVLAgent, QwenVLConfig
from darwin.agents.tiny import TinyAgent, TinyAgentConfig
from darwin.agents.uitars import UITarsAgent, UITarsConfig
from darwin.agents.vlm import OffScreen, ParsedOutput, VLMAgent

__all__ = [
    "Actor",
    "Agent",
    "CoordinateConvention",
    "DeviceCoordinates",
    "ModelActor",
    "OffScreen",
    "ParsedOutput",
    "QwenVLAgent",
    "QwenVLConfig",
    "RelativeCoordinates",
    "ResizedImageCoordinates",
    "TinyAgent",
    "TinyAgentConfig",
    "UITarsAgent",
    "UITarsConfig",
    "VLMAgent",
    "smart_resize",
]
