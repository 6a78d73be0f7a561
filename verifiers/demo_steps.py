"""Step-level rewards from demonstrations (Mobile-R1's action-level stage): each of the
agent's steps is scored against the demonstration step of the same task at the same index.

A demonstration is a JSONL episode (:mod:`darwin.sft.records`, docs/sft.md) whose
``task_id`` names the task; a step may give ``target_box`` (``[x1, y1, x2, y2]`` in device
pixels), the element its action targets. A step matches when the agent's action has the
demonstrated type and:

- ``click`` / ``long_press`` / ``scroll`` / ``drag`` (start point): the point lies inside the
  target box (without a box: within ``tolerance_px`` of the demonstrated point); ``scroll``
  also needs the same direction;
- ``type``: the text is exactly the demonstrated text; ``open_app``: the same app (case
  ignored); ``answer`` / ``finished``: the type is enough.

The verdict's ``reward`` is the share of matched steps over the longer of the two step lists
(extra or missing steps count as misses) and the per-step scores are in ``reason``;
``success`` is ``reward >= success_threshold``. A task without a demonstration is unverified
(``success=None``). With several demonstrations of a task the best-matching one counts. It
plugs in as any verifier does, e.g. ``--set verifier.name=darwin.verifiers.demo_steps:DemoStepVerifier
--set 'verifier.kwargs={"demonstrations": ["demos.jsonl"]}'``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from darwin.actions import Action, Click, Drag, LongPress, OpenApp, Scroll, Type
from darwin.types import ACTOR, Transition, Verdict
from darwin.verifiers.base import VerificationRequest, Verifier

__all__ = ["DemoStep", "DemoStepConfig", "DemoStepVerifier", "score_step"]


class DemoStepConfig(BaseModel):
    """Settings of :class:`DemoStepVerifier` (validated when built)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    demonstrations: tuple[str, ...] = Field(min_length=1, description="JSONL demonstration files (docs/sft.md)")
    tolerance_px: int = Field(
        0, ge=0, description="without a target_box: how far (device pixels) a point may be from the demonstrated one"
    )
    success_threshold: float = Field(1.0, gt=0, le=1.0, description="share of matched steps that counts as success")


class DemoStep(BaseModel):
    """One demonstrated step as the verifier reads it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: Action
    target_box: tuple[int, int, int, int] | None = None


def _point(action: Action) -> tuple[int, int] | None:
    if isinstance(action, (Click, LongPress, Scroll)):
        return action.x, action.y
    if isinstance(action, Drag):
        return action.x1, action.y1
    return None


def score_step(action: Action | None, demo: DemoStep, tolerance_px: int = 0) -> float:
    """1.0 when ``action`` matches the demonstrated step (see the module docstring), else 0.0."""
    want = demo.action
    if action is None or action.type != want.type:
        return 0.0
    if isinstance(want, Type):
        return float(isinstance(action, Type) and action.content == want.content)
    if isinstance(want, OpenApp):
        return float(isinstance(action, OpenApp) and action.app.casefold() == want.app.casefold())
    if isinstance(want, Scroll) and isinstance(action, Scroll) and action.direction != want.direction:
        return 0.0
    got, target = _point(action), _point(want)
    if got is None or target is None:
        return 1.0
    if demo.target_box is not None:
        x1, y1, x2, y2 = demo.target_box
        return float(x1 <= got[0] <= x2 and y1 <= got[1] <= y2)
    return float(abs(got[0] - target[0]) <= tolerance_px and abs(got[1] - target[1]) <= tolerance_px)


class DemoStepVerifier(Verifier):
    """Scores the agent's steps against a demonstration of the same task (step-level reward)."""

    kind = "demo_steps"

    def __init__(
        self,
        demonstrations: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        tolerance_px: int = 0,
        success_threshold: float = 1.0,
    ) -> None:
        from darwin.sft.records import load_records

        files = (demonstrations,) if isinstance(demonstrations, (str, os.PathLike)) else tuple(demonstrations)
        self.config = DemoStepConfig(
            demonstrations=tuple(str(f) for f in files), tolerance_px=tolerance_px, success_threshold=success_threshold
        )
        self.demos: dict[str, list[tuple[DemoStep, ...]]] = {}
        for path in self.config.demonstrations:
            for loaded in load_records(path):
                if loaded.record.task_id is None:
                    continue
                steps = tuple(DemoStep(action=s.action, target_box=s.target_box) for s in loaded.record.steps)
                self.demos.setdefault(loaded.record.task_id, []).append(steps)

    @property
    def cheap(self) -> bool:
        return True  # reads only the transitions

    @property
    def reads_screen(self) -> bool:
        return False

    def scores(self, transitions: Sequence[Transition], demo: Sequence[DemoStep]) -> list[float]:
        """Per-step scores of the actor's steps against ``demo`` (missing or extra steps score 0)."""
        actions = [t.decision.action for t in transitions if t.agent == ACTOR and t.decision.message is None]
        n = max(len(actions), len(demo))
        return [
            score_step(actions[i] if i < len(actions) else None, demo[i], self.config.tolerance_px)
            if i < len(demo)
            else 0.0
            for i in range(n)
        ]

    async def verify(self, request: VerificationRequest) -> Verdict:
        candidates = self.demos.get(request.task.id)
        if not candidates:
            return Verdict(
                success=None,
                reason=f"no demonstration of task {request.task.id!r} in {', '.join(self.config.demonstrations)}",
            )
        best = max(
            (self.scores(request.transitions, demo) for demo in candidates), key=lambda s: sum(s) / max(len(s), 1)
        )
        reward = sum(best) / max(len(best), 1)
        return Verdict(
            success=reward >= self.config.success_threshold,
            reward=reward,
            reason="step scores " + " ".join(f"{s:.0f}" for s in best),
        )
