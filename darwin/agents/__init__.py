"""Agents: who chooses actions. VLM agents build prompts (psi) and parse responses (xi).

An :class:`Actor` maps an observation to a decision; an :class:`Agent` is the prompt builder and
parser of a model, and :class:`ModelActor` chains agent and policy. The model formats are
:class:`TinyAgent`, :class:`UITarsAgent` and :class:`QwenVLAgent` (all :class:`VLMAgent`);
:class:`OracleActor` and :class:`RandomActor` are scripted:

    >>> from darwin.agents import QwenVLAgent, TinyAgent, UITarsAgent, VLMAgent
    >>> UITarsAgent(version="1.0").convention.kind, QwenVLAgent(version="2.5").convention.kind
    ('relative', 'resized_image')
    >>> issubclass(TinyAgent, VLMAgent)
    True

See docs/agents.md for prompt formats, coordinate conventions and writing your own agent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from darwin.lazy_exports import lazy_exports

__all__ = [
    "Actor",
    "ActorPool",
    "Actors",
    "Agent",
    "Geometry",
    "ModelActor",
    "OracleActor",
    "ParsedOutput",
    "QwenVLAgent",
    "QwenVLConfig",
    "RandomActor",
    "Reject",
    "TinyAgent",
    "TinyAgentConfig",
    "UITarsAgent",
    "UITarsConfig",
    "VLMAgent",
    "WarmStart",
    "build_action",
    "load_warm_start",
]

if TYPE_CHECKING:
    from darwin.agents.actors import Actors
    from darwin.agents.base import Actor, Agent, ModelActor
    from darwin.agents.pool import ActorPool
    from darwin.agents.qwen import QwenVLAgent, QwenVLConfig
    from darwin.agents.scripted import OracleActor, RandomActor
    from darwin.agents.tiny import TinyAgent, TinyAgentConfig
    from darwin.agents.uitars import UITarsAgent, UITarsConfig
    from darwin.agents.vlm import Geometry, ParsedOutput, Reject, VLMAgent, build_action
    from darwin.agents.warm_start import WarmStart, load_warm_start
else:  # hidden from type checkers, so that a misspelt name is their error
    # public name -> the module that holds it, imported on first use (darwin.lazy_exports)
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "Actor": "darwin.agents.base",
            "ActorPool": "darwin.agents.pool",
            "Actors": "darwin.agents.actors",
            "Agent": "darwin.agents.base",
            "Geometry": "darwin.agents.vlm",
            "ModelActor": "darwin.agents.base",
            "OracleActor": "darwin.agents.scripted",
            "ParsedOutput": "darwin.agents.vlm",
            "QwenVLAgent": "darwin.agents.qwen",
            "QwenVLConfig": "darwin.agents.qwen",
            "RandomActor": "darwin.agents.scripted",
            "Reject": "darwin.agents.vlm",
            "TinyAgent": "darwin.agents.tiny",
            "TinyAgentConfig": "darwin.agents.tiny",
            "UITarsAgent": "darwin.agents.uitars",
            "UITarsConfig": "darwin.agents.uitars",
            "VLMAgent": "darwin.agents.vlm",
            "WarmStart": "darwin.agents.warm_start",
            "build_action": "darwin.agents.vlm",
            "load_warm_start": "darwin.agents.warm_start",
        },
    )
