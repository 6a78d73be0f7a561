"""Hierarchical planning: a planner writes sub-goals, the acting agent works on the current one.

The planner (any model: the agent's own policy, or an LLM through LiteLLM) sees the goal
and the current screen and writes the remaining sub-goals as a numbered list. The acting
agent (the executor) sees the goal plus ``Sub-goal: <the first one>``. The planner is asked
again (replanning) when the executor has spent ``steps_per_subgoal`` steps on a sub-goal, or
when the screen has not changed for ``stall_steps`` steps (the sub-goal stalls), at most
``max_plans`` times per phase. Every plan is a turn of the ``"planner"`` agent in the
trajectory (stored, never trained unless the experiment names that agent).

    >>> from darwin.workflows.planner import PlannerWorkflow, parse_subgoals
    >>> parse_subgoals("Plan:\\n1. Open Settings\\n2) Tap Display\\n- Turn on dark theme")
    ['Open Settings', 'Tap Display', 'Turn on dark theme']
    >>> PlannerWorkflow(planner="self").planner_config.steps_per_subgoal
    4
"""

from __future__ import annotations

import hashlib
import re
import weakref
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from darwin.verifiers.base import Verifier
from darwin.workflows.advisers import AdviserSpec, build_adviser, consult, short
from darwin.workflows.step import LifecycleWorkflow, PhaseTurns, StepConfig

__all__ = ["PLANNER", "PlannerConfig", "PlannerWorkflow", "parse_subgoals"]

PLANNER = "planner"
"""Role name of the planner's turns (``Transition.agent``)."""

_ITEM = re.compile(r"^\s*(?:\d+\s*[.):]|[-*•])\s*(.+?)\s*$")

PLANNER_SYSTEM = (
    "You plan phone tasks for an agent that taps, types and swipes. Given the goal and the current "
    "screen, list the remaining sub-goals, one short imperative per line, numbered 1., 2., ... "
    "Write nothing else."
)


class PlannerConfig(BaseModel):
    """When the planner is consulted and how much of its plan the executor sees."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    steps_per_subgoal: int = Field(4, ge=1, le=256, description="executor steps on one sub-goal before replanning")
    stall_steps: int = Field(
        2, ge=1, le=64, description="replan when the screen has not changed over this many executor steps"
    )
    max_plans: int = Field(6, ge=1, le=256, description="planner calls per phase (the first plan included)")
    max_subgoals: int = Field(8, ge=1, le=64, description="sub-goals kept from one plan")
    subgoal_chars: int = Field(160, ge=16, le=2000, description="longest sub-goal shown to the executor")


def parse_subgoals(text: str, limit: int = 64) -> list[str]:
    """The sub-goals of a planner's answer: numbered or bulleted lines, else non-empty lines."""
    lines = [line for line in text.splitlines() if line.strip()]
    items = [m.group(1) for m in (_ITEM.match(line) for line in lines) if m is not None]
    if not items:  # a plain list without numbers still counts, headings aside
        items = [line.strip() for line in lines if not line.rstrip().endswith(":")]
    return [item for item in items if item][:limit]


@dataclass
class _Plan:
    subgoals: list[str] = field(default_factory=list)
    plans: int = 0
    steps_on_current: int = 0
    screens: list[str] = field(default_factory=list)
    """Digests of the screens the executor saw since the current plan."""


class PlannerWorkflow(LifecycleWorkflow):
    """Planner + executor over the task's lifecycle phases (setup, execution, teardown).

    Args:
        planner: the planner's model (:data:`~darwin.workflows.advisers.AdviserSpec`):
            ``"self"``, a LiteLLM config dict, or a Policy.
        verifier, config: as :class:`~darwin.workflows.step.StepWorkflow`.
        planner_config: a :class:`PlannerConfig` (or its fields as a dict).
    """

    def __init__(
        self,
        planner: AdviserSpec = "self",
        verifier: Verifier | None = None,
        config: StepConfig | None = None,
        planner_config: PlannerConfig | dict[str, object] | None = None,
    ) -> None:
        super().__init__(verifier=verifier, config=config)
        self.planner = build_adviser(planner, PLANNER)
        self.planner_config = PlannerConfig.model_validate(planner_config or {})  # an instance passes through
        self._plans: weakref.WeakKeyDictionary[PhaseTurns, _Plan] = weakref.WeakKeyDictionary()

    async def step_goal(self, turns: PhaseTurns) -> str:
        cfg = self.planner_config
        plan = self._plans.setdefault(turns, _Plan())
        assert turns.screenshot is not None
        plan.screens.append(hashlib.blake2b(turns.screenshot.tobytes(), digest_size=8).hexdigest())
        stalled = len(plan.screens) > cfg.stall_steps and len(set(plan.screens[-cfg.stall_steps - 1 :])) == 1
        due = plan.plans == 0 or plan.steps_on_current >= cfg.steps_per_subgoal or stalled
        if due and plan.plans < cfg.max_plans:
            await self._replan(turns, plan, stalled)
        plan.steps_on_current += 1
        if not plan.subgoals:
            return turns.goal
        return f"{turns.goal}\nSub-goal: {short(plan.subgoals[0], cfg.subgoal_chars)}"

    async def _replan(self, turns: PhaseTurns, plan: _Plan, stalled: bool) -> None:
        cfg = self.planner_config
        lines = [f"Goal: {turns.goal}"]
        if plan.subgoals:
            why = "the screen has not changed" if stalled else f"{plan.steps_on_current} steps were spent on it"
            lines.append(f"The agent was working on: {plan.subgoals[0]} ({why}).")
        done = [t.decision for t in turns.actor_steps[-6:]]
        if done:
            lines.append(
                "Its last actions: "
                + "; ".join(d.action.type if d.action is not None else "invalid output" for d in done)
            )
        lines.append("Remaining sub-goals from this screen:")
        assert turns.screenshot is not None
        text, _ = await consult(turns, PLANNER, self.planner, PLANNER_SYSTEM, "\n".join(lines), (turns.screenshot,))
        subgoals = parse_subgoals(text, cfg.max_subgoals)
        plan.plans += 1
        if subgoals:  # an empty answer keeps the previous plan (the executor is never left without one it had)
            plan.subgoals = subgoals
        plan.steps_on_current = 0
        plan.screens = plan.screens[-1:]
