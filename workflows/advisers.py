"""Other agents inside a workflow: the model behind a planner, a reflector or a checker.

Multi-agent workflows (:mod:`darwin.workflows.planner`, :mod:`~darwin.workflows.self_verify`,
:mod:`~darwin.workflows.reflection`) consult a second model for words, not for phone
actions. That model is named by an :data:`AdviserSpec`:

- ``"self"``: the acting agent's own policy (the model being trained; its turns carry token
  ids and log-probs, so an experiment may even train it: ``LearnerConfig.trained_agent``);
- a :class:`~darwin.policies.litellm.LiteLLMPolicyConfig` or its fields as a dict (any
  hosted or OpenAI-compatible model through LiteLLM; the key comes from the environment);
- any :class:`~darwin.policies.base.Policy` object (in Python code).

Each consultation is recorded in the trajectory as a turn of its role (``agent="planner"``
...), with the prompt, the generation and the words (``Decision.message``), so it is stored
with the episode and kept out of the acting agent's loss.

    >>> from darwin.workflows.advisers import build_adviser
    >>> build_adviser({"model": "openai/gpt-4o-mini", "api_key_env": "OPENAI_API_KEY"}, "planner").config.model
    'openai/gpt-4o-mini'
    >>> build_adviser("self", "planner") is None      # resolved per episode from the actor
    True
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Literal

import numpy as np
from pydantic import ValidationError

from darwin.agents.base import Actor, ModelActor
from darwin.policies.base import Policy
from darwin.policies.litellm import LiteLLMPolicy, LiteLLMPolicyConfig, PolicyAuthError
from darwin.problems import validation_summary
from darwin.types import ChatMessage, Decision, Observation, Prompt, Termination, TerminationReason
from darwin.workflows.step import AdviserError, PhaseTurns

logger = logging.getLogger(__name__)

AdviserSpec = Literal["self"] | LiteLLMPolicyConfig | Mapping[str, object] | Policy
"""Who a workflow consults: ``"self"``, a LiteLLM config (or its dict), or a Policy."""

__all__ = ["AdviserSpec", "build_adviser", "consult", "short"]


def build_adviser(spec: AdviserSpec, role: str) -> Policy | None:
    """The policy ``spec`` names (``None`` for ``"self"``: the actor's policy, per episode).

    Raises ``ValueError`` naming the role and the fix when ``spec`` is none of the forms.
    """
    if isinstance(spec, str):
        if spec != "self":
            raise ValueError(
                f"{role}: {spec!r} is not a model spec; use 'self' (the acting agent's policy), "
                "a LiteLLM config dict such as {'model': 'openai/gpt-4o-mini', 'api_key_env': 'OPENAI_API_KEY'}, "
                "or a Policy object"
            )
        return None
    if isinstance(spec, Policy):
        return spec
    if isinstance(spec, LiteLLMPolicyConfig):
        return LiteLLMPolicy(spec)
    if isinstance(spec, Mapping):
        try:
            return LiteLLMPolicy(LiteLLMPolicyConfig.model_validate(dict(spec)))
        except ValidationError as exc:
            problems = validation_summary(exc)
            raise ValueError(f"{role}: invalid LiteLLM config ({problems})") from None
    raise ValueError(f"{role}: expected 'self', a LiteLLM config or a Policy, got {type(spec).__name__}")


def _policy_for(adviser: Policy | None, actor: Actor, role: str) -> Policy:
    if adviser is not None:
        return adviser
    if isinstance(actor, ModelActor):
        return actor.policy
    raise AdviserError(
        Termination(
            TerminationReason.ERROR,
            f"{role}='self' needs a model actor (ModelActor) but the actor is {type(actor).__name__}; "
            "name a model for the role instead",
        )
    )


async def consult(
    turns: PhaseTurns,
    role: str,
    adviser: Policy | None,
    system: str,
    user: str,
    images: tuple[np.ndarray, ...],
    summarise: Callable[[str], str] | None = None,
) -> tuple[str, Decision]:
    """Ask ``role``'s model once and record the turn; returns ``(text, decision)``.

    ``summarise`` turns the raw text into the recorded message (default: the text). A
    request that fails for good ends the phase: an authentication or configuration problem
    as an error, anything else (a server down after its retries) as an infrastructure
    truncation, each with the role in the cause.
    """
    policy = _policy_for(adviser, turns.actor, role)
    prompt = Prompt(
        messages=(ChatMessage(role="system", text=system), ChatMessage(role="user", text=user, images=images))
    )
    try:
        (generation,) = await policy.generate([prompt])
    except PolicyAuthError as exc:
        raise AdviserError(Termination(TerminationReason.ERROR, f"{role}: {exc}")) from None
    except Exception as exc:  # noqa: BLE001 - becomes the phase's termination cause
        logger.warning("%s failed on %s: %s", role, turns.task.id, exc)
        raise AdviserError(
            Termination(TerminationReason.INFRA_TRUNCATED, f"{role}: {type(exc).__name__}: {exc}"[:500])
        ) from exc
    text = generation.text
    message = summarise(text) if summarise is not None else text
    decision = Decision(action=None, message=message or "(empty)", generation=generation, prompt=prompt)
    if turns.screenshot is None:
        raise RuntimeError(
            f"{role}: consulted before the phase's first screenshot (call it from step_goal/confirm_finish)"
        )
    observation = Observation(
        screenshot=turns.screenshot,
        goal=turns.goal,
        device_size=turns.env.device_size,
        task_id=turns.task.id,
        phase=turns.phase,
        step=turns.step,
    )
    turns.record(role, observation, decision)
    return text, decision


def short(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters.

    >>> short("a\\n b  c", 4)
    'a b…'
    """
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"
