"""Agent formats: the prompt and output format a model speaks, chosen as a component of kind
``"agent_format"`` (:mod:`darwin.components`): a built-in name or the import path of a
:class:`~darwin.agents.vlm.VLMAgent` subclass, used by ``darwin eval --agent-format`` and an
experiment's ``agent.format``.

    >>> make_agent("uitars-1.5").convention.kind, make_agent("uitars-1.0").convention.kind
    ('resized_image', 'relative')
    >>> make_agent("uitars1.5")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    darwin.components.ComponentError: agent_format 'uitars1.5' is not built in (did you mean 'uitars-1.5'?)...
"""

from __future__ import annotations

from darwin.agents.vlm import VLMAgent
from darwin.components import BUILTINS, ComponentSpec, build_component
from darwin.memory.base import Memory

AGENT_FORMATS: tuple[str, ...] = tuple(BUILTINS["agent_format"])
"""The built-in formats' names."""


def make_agent(spec: ComponentSpec | str, memory: Memory | None = None) -> VLMAgent:
    """A fresh agent of format ``spec`` (a name, an import path, or a spec with kwargs), with an
    optional memory (None: the agent's default); an unknown name raises with the close match."""
    agent = build_component("agent_format", ComponentSpec.model_validate(spec), memory=memory)
    assert isinstance(agent, VLMAgent)  # checked by build_component
    return agent
