"""Goal text from screenshots: a model (any LiteLLM model) says what an explorer's actions achieved.

The stand-in describer (:mod:`darwin.hindsight.describer`) reads the JSON state; a phone
without one shows only its screen. :class:`ModelDescriber` sends the app's label, the screen
before the first action, the screen after the last one and (optionally) the actions in words
to a multimodal model through :class:`~darwin.policies.litellm.LiteLLMPolicy` (its retries,
usage, cost and errors), and asks for one imperative goal sentence, or for word that nothing
lasting changed. The answer is read strictly (:func:`parse_description`): a reply that is not
one JSON object with a boolean ``changed``, a ``goal`` that is more than one sentence, a
question, a report ("The agent turned on...") or too long is **refused** with the reason, and
so is a request that failed for good. A missing or rejected key raises
:class:`~darwin.policies.litellm.PolicyAuthError` at once.

    >>> parse_description('{"changed": true, "goal": "In Clock, turn on the 07:30 alarm"}')
    Description(kind='goal', text='In Clock, turn on the 07:30 alarm.', completion=None)
    >>> parse_description('{"changed": false, "reason": "only scrolled"}').kind
    'unchanged'
    >>> print(parse_description("The agent turned on an alarm.").text)
    no JSON object in the reply: 'The agent turned on an alarm.'
    >>> parse_description('{"changed": true, "goal": "The alarm is on."}').text  # doctest: +ELLIPSIS
    'the goal reads as a report, not an instruction (it should start with a verb): ...'
    >>> ModelDescriberConfig().llm.temperature  # the default model's; an llm given is taken as it is
    0.0
    >>> describer = ModelDescriber(llm={"model": "openai/my-vlm", "api_base": "http://127.0.0.1:8000/v1",
    ...                                 "temperature": 0.2, "max_tokens": 128})
    >>> describer.config.llm.temperature, describer.config.show_actions
    (0.2, True)
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from darwin.actions import Action
from darwin.json_replies import json_values
from darwin.png import decode_png
from darwin.policies.litellm import Completion, LiteLLMPolicy, LiteLLMPolicyConfig, PolicyRequestError
from darwin.problems import validation_summary
from darwin.types import ChatMessage, Prompt
from darwin.verifiers.judge.llm_judge import check_model_name, describe_action, fit_image

__all__ = [
    "DESCRIBER_SYSTEM",
    "Description",
    "DescriberConfigError",
    "ModelDescriber",
    "ModelDescriberConfig",
    "checked_describer_config",
    "validated_config",
    "parse_description",
]

DESCRIBER_SYSTEM = (
    "You watch an agent that explored a phone app with no task: it tapped, typed and scrolled at will. "
    "You see the screen before its first action and the screen after its last one. Say what the actions "
    "achieved that lasts: a change of the app's data or settings (an alarm added or switched on, a note "
    "saved, an item put in the cart, a setting changed), as one imperative sentence that could be given to "
    "someone starting from the first screen as their task, and that the last screen shows to be done. "
    "Moving between screens, scrolling or opening a menu changes nothing that lasts. Describe only what "
    "the screens show; if nothing lasting changed, or you cannot tell, say so."
)
"""The describer's system message."""


class DescriberConfigError(ValueError):
    """A describer configuration that cannot work; the message names the setting and the fix."""


def _default_llm() -> LiteLLMPolicyConfig:
    return LiteLLMPolicyConfig(model="gemini/gemini-2.5-flash", max_tokens=256, temperature=0.0)


class ModelDescriberConfig(BaseModel):
    """What the describer sends and how it asks (validated when built; frozen; holds no secrets).

    ``llm`` holds the model settings (the LiteLLM model name, ``api_base`` for a local
    OpenAI-compatible server, ``api_key_env``, ``temperature``, ``max_tokens``, timeouts and
    retries): :class:`~darwin.policies.litellm.LiteLLMPolicyConfig`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    llm: LiteLLMPolicyConfig = Field(
        default_factory=_default_llm,
        description="the describing model (default: gemini-2.5-flash, temperature 0, at most 256 tokens)",
    )
    show_actions: bool = Field(default=True, description="list the actions between the two screens, in words")
    max_actions: int = Field(default=40, ge=1, le=1000, description="most actions listed (the latest are kept)")
    max_side: int = Field(
        default=768, ge=64, le=4096, description="longest side of a screenshot sent, in pixels (never upscaled)"
    )
    max_goal_chars: int = Field(default=200, ge=20, le=2000, description="a longer goal sentence is refused")
    check_model: bool = Field(
        default=True, description="without api_base: fail at once if LiteLLM does not know the model"
    )


DescriptionKind = Literal["goal", "unchanged", "refused"]


@dataclass(frozen=True)
class Description:
    """What the describer made of one reply.

    ``kind`` is ``"goal"`` (``text``: the goal sentence), ``"unchanged"`` (``text``: the
    model's reason why nothing lasting changed) or ``"refused"`` (``text``: why no goal came:
    an unusable reply, quoted, or a request that failed for good). ``completion`` is the reply
    with its tokens and cost (``None`` when no reply came, or from :func:`parse_description`).
    """

    kind: DescriptionKind
    text: str
    completion: Completion | None = None

    @property
    def goal(self) -> str | None:
        """The goal sentence, or ``None`` when there is none."""
        return self.text if self.kind == "goal" else None


# An imperative starts with a verb: these words start a report or a description instead.
_NOT_IMPERATIVE = {"i", "we", "you", "he", "she", "it", "they", "the", "a", "an", "this", "that", "agent", "user"}
_APP_LEAD = re.compile(r"^(?:in|on)\s+[^,]{1,60},\s*", re.IGNORECASE)
_SENTENCE_BREAK = re.compile(r"[.!?]\s+(?=[A-Z])")


def _refused(reason: str, reply: str) -> Description:
    return Description("refused", f"{reason}: {' '.join(reply.split())[:200]!r}")


def parse_description(reply: str, max_goal_chars: int = 200) -> Description:
    """The describer's reply read strictly (see the module docstring).

    The reply must hold exactly one JSON object (code fences and words around it are allowed)
    with a boolean ``changed``; ``true`` needs a ``goal``: one imperative sentence of at most
    ``max_goal_chars`` characters, not a question (a final full stop is added where missing);
    ``false`` may give a ``reason`` and no goal. Anything else is ``refused``, quoting the reply.
    """
    objects = [v for v in json_values(reply) if isinstance(v, dict)]
    if not objects:
        return _refused("no JSON object in the reply", reply)
    if len(objects) > 1:
        return _refused(f"{len(objects)} JSON objects in the reply, one expected", reply)
    (answer,) = objects
    changed = answer.get("changed")
    if not isinstance(changed, bool):
        return _refused("'changed' is not true or false", reply)
    goal = answer.get("goal")
    if not changed:
        if isinstance(goal, str) and goal.strip():
            return _refused("'changed' is false but the reply gives a goal", reply)
        reason = answer.get("reason")
        return Description("unchanged", " ".join(str(reason).split()) if reason else "nothing lasting changed")
    if not isinstance(goal, str) or not goal.strip():
        return _refused("'changed' is true but there is no 'goal' sentence", reply)
    goal = " ".join(goal.split())
    if len(goal) > max_goal_chars:
        return _refused(f"the goal has {len(goal)} characters, more than max_goal_chars={max_goal_chars}", reply)
    if goal.endswith("?"):
        return _refused("the goal is a question, not an instruction", reply)
    if _SENTENCE_BREAK.search(goal.rstrip(".!")):
        return _refused("the goal is more than one sentence", reply)
    first = _APP_LEAD.sub("", goal).split(" ", 1)[0].strip("\"'").lower()
    if first in _NOT_IMPERATIVE:
        return _refused("the goal reads as a report, not an instruction (it should start with a verb)", reply)
    if goal[-1] not in ".!":
        goal += "."
    return Description("goal", goal)


Screen = np.ndarray | bytes
"""A screenshot: an ``(H, W, 3)`` uint8 array or PNG bytes (as an exploration keeps them)."""


def _array(screen: Screen) -> np.ndarray:
    return decode_png(screen) if isinstance(screen, bytes) else screen


class ModelDescriber:
    """Asks a model what an explorer's actions achieved (see the module docstring).

    Args:
        config: a :class:`ModelDescriberConfig` (or its fields as a dict); or leave it out
            and pass the config's fields as keywords.
        policy: the LiteLLM policy to ask (default: one built from ``config.llm``).

    Raises :class:`DescriberConfigError` for a bad configuration, or (without ``api_base`` and
    with ``check_model``) a model name LiteLLM does not know.
    """

    def __init__(
        self,
        config: ModelDescriberConfig | Mapping[str, Any] | None = None,
        *,
        policy: LiteLLMPolicy | None = None,
        **fields: Any,
    ) -> None:
        self.config = checked_describer_config(config, fields)
        self.policy = policy or LiteLLMPolicy(self.config.llm)

    def preflight(self) -> None:
        """Fail now, naming the variable to set, if the model's API key is missing
        (:meth:`~darwin.policies.litellm.LiteLLMPolicy.check_credentials`)."""
        self.policy.check_credentials()

    def prompt(self, app: str, before: Screen, after: Screen, actions: Sequence[Action] = ()) -> Prompt:
        """The request: the system message, then both screens (before, after) and the text."""
        cfg = self.config
        lines = [
            f"App: {app}",
            "Image 1 is the screen before the first action; image 2 is the screen after the last action.",
        ]
        if cfg.show_actions and actions:
            shown = list(actions)[-cfg.max_actions :]
            lines.append(f"The actions, in order ({len(actions)}):")
            if len(shown) < len(actions):
                lines.append(f"(the first {len(actions) - len(shown)} are left out)")
            first = len(actions) - len(shown) + 1
            lines += [f"{first + i}. {describe_action(action)}" for i, action in enumerate(shown)]
        lines += [
            "Reply with one JSON object and nothing else:",
            f'- if something lasting changed: {{"changed": true, "goal": "In {app}, <one imperative sentence>."}}',
            '- if not, or you cannot tell: {"changed": false, "reason": "<why>"}',
        ]
        images = (fit_image(_array(before), cfg.max_side), fit_image(_array(after), cfg.max_side))
        return Prompt(
            messages=(
                ChatMessage(role="system", text=DESCRIBER_SYSTEM),
                ChatMessage(role="user", text="\n".join(lines), images=images),
            )
        )

    async def describe(self, app: str, before: Screen, after: Screen, actions: Sequence[Action] = ()) -> Description:
        """What the actions between the two screens achieved in ``app`` (its launcher label)."""
        prompt = self.prompt(app, before, after, actions)
        try:
            (completion,) = await self.policy.complete([prompt])
        except PolicyRequestError as exc:  # PolicyAuthError passes: no description can work around it
            return Description("refused", f"the describer could not be reached ({exc})")
        parsed = parse_description(completion.text, self.config.max_goal_chars)
        return dataclasses.replace(parsed, completion=completion)


ConfigT = TypeVar("ConfigT", bound=BaseModel)


def validated_config(
    cls: type[ConfigT], config: ConfigT | Mapping[str, Any] | None, fields: Mapping[str, Any], label: str
) -> ConfigT:
    """``config`` as given (then ``fields`` must be empty), or ``cls`` validated from the mapping
    ``config`` updated with ``fields``; a :class:`DescriberConfigError` names what is wrong."""
    if isinstance(config, cls):
        if fields:
            raise DescriberConfigError(f"pass either a {cls.__name__} or its fields, not both")
        return config
    try:
        return cls.model_validate({**dict(config or {}), **fields})
    except ValidationError as exc:
        raise DescriberConfigError(f"invalid {label} config: {validation_summary(exc)}") from None


def checked_describer_config(
    config: ModelDescriberConfig | Mapping[str, Any] | None, fields: Mapping[str, Any]
) -> ModelDescriberConfig:
    """``config`` (or ``fields``) validated, the model's name checked (see :class:`ModelDescriber`)."""
    checked = validated_config(ModelDescriberConfig, config, fields, "describer")
    if checked.check_model and checked.llm.api_base is None:
        try:
            check_model_name(checked.llm.model, role="describer")
        except ValueError as exc:
            raise DescriberConfigError(str(exc)) from None
    return checked
