"""Self-verification: before an episode ends on ``finished``, a checker looks at the screen.

When the acting agent says it is done (``finished`` or ``answer``), the checker (the
agent's own policy, ``"self"``, or another model through LiteLLM) sees the goal, the
agent's message and the current screen, and answers whether the task is complete. If it
judges the task unfinished, the episode goes on (the ``finished`` step becomes an ordinary
step) and the agent's next goal text carries the checker's reason, at most
``max_rejections`` times per phase. The step budget still bounds the phase.

Every judgement is a turn of the ``"verifier"`` agent, stored with the episode: its
message reads ``complete: yes|no|unknown; reason: ...``, so the store holds (screen, goal,
judgement) triples a learned verifier can be trained on, with the rule verdict beside them.

    >>> from darwin.workflows.self_verify import parse_judgement
    >>> parse_judgement("Answer: no\\nReason: the alarm list is still empty")
    (False, 'the alarm list is still empty')
    >>> parse_judgement("Yes, dark theme is on.")
    (True, 'Yes, dark theme is on.')
    >>> parse_judgement("I cannot tell.")
    (None, 'I cannot tell.')
"""

from __future__ import annotations

import re
import weakref

from pydantic import BaseModel, ConfigDict, Field

from darwin.actions import Answer, Finished
from darwin.types import Decision, Observation
from darwin.verifiers.base import Verifier
from darwin.workflows.advisers import AdviserSpec, build_adviser, consult, short
from darwin.workflows.step import LifecycleWorkflow, PhaseTurns, StepConfig

__all__ = ["VERIFIER", "SelfVerifyConfig", "SelfVerifyWorkflow", "parse_judgement"]

VERIFIER = "verifier"
"""Role name of the checker's turns (``Transition.agent``)."""

CHECKER_SYSTEM = (
    "You check whether a phone task is complete by looking at the current screen. "
    "Reply in two lines: 'Answer: yes' or 'Answer: no', then 'Reason: <one sentence>'."
)

_ANSWER = re.compile(r"answer\s*[:=]\s*\**\s*(yes|no)\b", re.IGNORECASE)
_REASON = re.compile(r"reason\s*[:=]\s*(.+)", re.IGNORECASE | re.DOTALL)
_LEADING = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)


def parse_judgement(text: str) -> tuple[bool | None, str]:
    """``(complete, reason)`` from a checker's answer; ``complete`` is None when it says neither."""
    match = _ANSWER.search(text) or _LEADING.search(text.strip())
    complete = None if match is None else match.group(1).lower() == "yes"
    reason_match = _REASON.search(text)
    reason = (reason_match.group(1) if reason_match else text).strip()
    return complete, " ".join(reason.split())


class SelfVerifyConfig(BaseModel):
    """How often the checker may send the agent back to work."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_rejections: int = Field(2, ge=0, le=64, description="times per phase the checker may refuse a 'finished'")
    reason_chars: int = Field(200, ge=16, le=2000, description="longest checker reason shown to the agent")


class SelfVerifyWorkflow(LifecycleWorkflow):
    """The step loop with a check before every ``finished`` / ``answer`` is accepted.

    Args:
        checker: the checking model (:data:`~darwin.workflows.advisers.AdviserSpec`): ``"self"``
            (the agent verifies its own outcome), a LiteLLM config dict, or a Policy.
        verifier, config: as :class:`~darwin.workflows.step.StepWorkflow` (the verifier gives
            the reward; the checker only decides whether the agent goes on).
        check_config: a :class:`SelfVerifyConfig` (or its fields as a dict).
    """

    def __init__(
        self,
        checker: AdviserSpec = "self",
        verifier: Verifier | None = None,
        config: StepConfig | None = None,
        check_config: SelfVerifyConfig | dict[str, object] | None = None,
    ) -> None:
        super().__init__(verifier=verifier, config=config)
        self.checker = build_adviser(checker, VERIFIER)
        self.check_config = SelfVerifyConfig.model_validate(check_config or {})  # an instance passes through
        self._rejections: weakref.WeakKeyDictionary[PhaseTurns, list[str]] = weakref.WeakKeyDictionary()

    async def step_goal(self, turns: PhaseTurns) -> str:
        reasons = self._rejections.get(turns)
        if not reasons:
            return turns.goal
        return f"{turns.goal}\nNot finished yet: {short(reasons[-1], self.check_config.reason_chars)}"

    async def confirm_finish(self, turns: PhaseTurns, observation: Observation, decision: Decision) -> bool:
        reasons = self._rejections.setdefault(turns, [])
        if len(reasons) >= self.check_config.max_rejections:
            return True
        action = decision.action
        said = action.content if isinstance(action, (Finished, Answer)) and action.content else ""
        user = (
            f"Task: {turns.goal}\nThe agent says it is finished"
            + (f": {said}" if said else ".")
            + ("\nIs the task complete on this screen?")
        )

        def summarise(text: str) -> str:
            complete, reason = parse_judgement(text)
            verdict = "unknown" if complete is None else ("yes" if complete else "no")
            return f"complete: {verdict}; reason: {reason}"

        text, _ = await consult(
            turns, VERIFIER, self.checker, CHECKER_SYSTEM, user, (observation.screenshot,), summarise
        )
        complete, reason = parse_judgement(text)
        if complete is False:
            reasons.append(reason or "the checker judged the task unfinished")
            return False
        return True  # complete, or no judgement: the agent's own decision stands
