"""Reflection (two agents): a reflector reviews each step's effect and passes the actor a note.

After every acting step the reflector (the agent's own policy, ``"self"``, or another model
through LiteLLM, as MobileUse's step-level reflection) sees the screen before and after the
step and the action taken, and writes a short note: did the action do what it should, what
to do next. The actor's next goal text carries ``Note: <note>``. Each note is a turn of the
``"reflector"`` agent in the trajectory (stored; out of the actor's loss).

    >>> from darwin.workflows.reflection import ReflectionWorkflow
    >>> ReflectionWorkflow(reflector="self").reflection_config.every
    1
"""

from __future__ import annotations

import weakref

from pydantic import BaseModel, ConfigDict, Field

from darwin.actions import action_to_json
from darwin.verifiers.base import Verifier
from darwin.workflows.advisers import AdviserSpec, build_adviser, consult, short
from darwin.workflows.step import LifecycleWorkflow, PhaseTurns, StepConfig

__all__ = ["REFLECTOR", "ReflectionConfig", "ReflectionWorkflow"]

REFLECTOR = "reflector"
"""Role name of the reflector's turns (``Transition.agent``)."""

REFLECTOR_SYSTEM = (
    "You review a phone agent's last step. The first image is the screen before the step, the second "
    "the screen after it. In one or two sentences: did the action have the intended effect, and what "
    "should the agent do next?"
)


class ReflectionConfig(BaseModel):
    """How often the reflector is asked and how much of its note the actor sees."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    every: int = Field(1, ge=1, le=256, description="reflect after every n-th acting step")
    note_chars: int = Field(300, ge=16, le=4000, description="longest note shown to the actor")


class ReflectionWorkflow(LifecycleWorkflow):
    """The step loop with a reflector's note on the effect of the previous step.

    Args:
        reflector: the reflector's model (:data:`~darwin.workflows.advisers.AdviserSpec`).
        verifier, config: as :class:`~darwin.workflows.step.StepWorkflow`.
        reflection_config: a :class:`ReflectionConfig` (or its fields as a dict).
    """

    def __init__(
        self,
        reflector: AdviserSpec = "self",
        verifier: Verifier | None = None,
        config: StepConfig | None = None,
        reflection_config: ReflectionConfig | dict[str, object] | None = None,
    ) -> None:
        super().__init__(verifier=verifier, config=config)
        self.reflector = build_adviser(reflector, REFLECTOR)
        self.reflection_config = ReflectionConfig.model_validate(reflection_config or {})  # an instance passes through
        self._notes: weakref.WeakKeyDictionary[PhaseTurns, str] = weakref.WeakKeyDictionary()

    async def step_goal(self, turns: PhaseTurns) -> str:
        cfg = self.reflection_config
        steps = turns.actor_steps
        if steps and len(steps) % cfg.every == 0 and turns.screenshot is not None:
            last = steps[-1]
            decision = last.decision
            if decision.action is not None:
                did = action_to_json(decision.action)
            else:
                did = "an unparseable output (nothing happened)"
            user = f"Goal: {turns.goal}\nThe agent's last action: {did}"
            text, _ = await consult(
                turns,
                REFLECTOR,
                self.reflector,
                REFLECTOR_SYSTEM,
                user,
                (last.observation.screenshot, turns.screenshot),
                lambda t: short(t, cfg.note_chars),
            )
            self._notes[turns] = short(text, cfg.note_chars)
        note = self._notes.get(turns)
        return turns.goal if not note else f"{turns.goal}\nNote: {note}"
