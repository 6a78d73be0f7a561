"""What the memory's model is asked: the system prompts, and an episode written out as text
(part of :mod:`darwin.memory.llm`).
"""

from __future__ import annotations

from collections.abc import Sequence

from darwin.memory.base import default_render
from darwin.memory.llm_answers import clean_text
from darwin.types import ACTOR, Phase, Trajectory, Transition

DISTILL_SYSTEM = (
    "You maintain the long-term memory of an agent that operates a phone by looking at "
    "screenshots. From one finished episode, write (1) a short summary of what the agent did "
    "and how it ended, useful the next time it attempts a similar task, and (2) knowledge about "
    "the app that will help in future tasks: where a screen, setting or control is, how a "
    "control behaves, which path works and which does not. Only state what the episode shows. "
    "Each fact is one self-contained sentence that names the screen or control it is about."
)
SUMMARY_SYSTEM = (
    "You keep a running summary of a phone-using agent's progress in its current task, so that "
    "its older steps can be left out of its prompt. Keep what the rest of the task needs: what "
    "was done, which screen the agent reached, what did not work."
)


# --------------------------------------------------------------------------- prompts


def action_text(transition: Transition, limit: int = 200) -> str:
    """One step as the memory model reads it: ``click(x=540, y=1200)``, the model's thought
    when it wrote one, the agent when it is not the actor, the phase when not execution."""
    decision = transition.decision
    if decision.action is not None:
        data = decision.action.model_dump(mode="json")
        name = data.pop("type")
        text = f"{name}(" + ", ".join(f"{k}={v!r}" for k, v in data.items()) + ")"
    elif decision.message is not None:
        text = f"said: {clean_text(decision.message, limit) or '(nothing)'}"
    else:
        reason = decision.parse_error.reason if decision.parse_error is not None else "no action"
        text = f"invalid output ({clean_text(reason, limit) or 'unreadable'})"
    thought = default_render(transition).summary
    if thought and decision.message is None:
        text += f" - thought: {clean_text(thought, limit)}"
    tags = [
        t
        for t in (
            transition.phase.value if transition.phase != Phase.EXECUTION else "",
            transition.agent if transition.agent != ACTOR else "",
        )
        if t
    ]
    return (f"[{', '.join(tags)}] " if tags else "") + text


def _step_lines(steps: Sequence[Transition], max_steps: int, first_number: int = 1) -> list[str]:
    lines = [f"{first_number + i}. {action_text(t)}" for i, t in enumerate(steps)]
    if len(lines) > max_steps:
        head, tail = max_steps // 2, max_steps - max_steps // 2
        lines = lines[:head] + [f"... ({len(lines) - max_steps} steps not shown) ..."] + lines[-tail:]
    return lines


def _outcome(trajectory: Trajectory) -> str:
    verdict = {True: "succeeded", False: "failed", None: "not verified"}[trajectory.success]
    termination = trajectory.termination
    if termination is None:
        return verdict
    cause = f": {clean_text(termination.cause, 200)}" if termination.cause else ""
    return f"{verdict} (ended by {termination.reason.value}{cause})"
