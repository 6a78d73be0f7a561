"""Agent formats: the prompt and output format a model speaks, chosen as a component of kind
``"agent_format"`` (:mod:`darwin.components`): a built-in name or the import path of a
:class:`~darwin.agents.vlm.VLMAgent` subclass, used by ``darwin eval --agent-format`` and an
experiment's ``agent.format``; and the actors of ``darwin eval --agent litellm:<model>``, a
hosted model speaking a format (:func:`litellm_actors`).

    >>> make_agent("uitars-1.5").convention.kind, make_agent("uitars-1.0").convention.kind
    ('resized_image', 'relative')
    >>> make_agent("uitars1.5")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    darwin.components.ComponentError: agent_format 'uitars1.5' is not built in (did you mean 'uitars-1.5'?)...
"""

from __future__ import annotations

from darwin.agents.actors import Actors, AgentChoiceError
from darwin.agents.base import Actor, ModelActor
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


def litellm_actors(
    *,
    model: str | None = None,
    temperature: float | None = None,
    agent_format: str = "uitars-1.5",
    api_base: str | None = None,
    api_key_env: str | None = None,
    max_new_tokens: int | None = None,
) -> Actors:
    """``--agent litellm:<model>``: any LiteLLM model, one policy for every phone, each phone's
    actor an agent of ``agent_format`` around it. Everything that can be wrong (the model name,
    the settings, the format, a missing key) fails here, before any phone starts."""
    from darwin.policies.litellm import LiteLLMPolicy, LiteLLMPolicyConfig

    if not model:
        raise AgentChoiceError(
            "litellm:<model> needs a LiteLLM model name, e.g. litellm:openai/ui-tars-1.5-7b", "--agent"
        )
    fields: dict[str, object] = {
        "model": model,
        "api_base": api_base,
        "api_key_env": api_key_env,
        "temperature": temperature,
    }
    if max_new_tokens is not None:  # unset: the config's own default
        fields["max_tokens"] = max_new_tokens
    try:
        policy = LiteLLMPolicy(LiteLLMPolicyConfig(**fields))
    except ValueError as exc:  # pydantic's ValidationError: names the bad field, never echoes values
        raise AgentChoiceError(str(exc), "--agent/--api-base/--api-key-env/--temperature") from None
    try:
        make_agent(agent_format)  # an unknown format is named before anything starts
    except ValueError as exc:
        raise AgentChoiceError(str(exc), "--agent-format") from None
    policy.check_credentials()  # a missing key stops here (RunAbort), before any phone starts

    def make(i: int) -> Actor:
        return ModelActor(make_agent(agent_format), policy)

    return Actors(make)
