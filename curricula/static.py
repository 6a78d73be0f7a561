"""Stage-1 curriculum: a hand-picked task list, sampled uniformly, round-robin or by weight."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Literal

from darwin.curricula.base import Curriculum
from darwin.types import Task


class StaticCurriculum(Curriculum):
    """A fixed task list.

    Args:
        tasks: the tasks (at least one).
        mode: ``"uniform"`` (independent draws), ``"round_robin"`` (in order, cycling) or
            ``"weighted"`` (draws proportional to ``weights``).
        seed: seeds this curriculum's own RNG (never the global one).
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        mode: Literal["uniform", "round_robin", "weighted"] = "round_robin",
        weights: Sequence[float] | None = None,
        seed: int = 0,
    ) -> None:
        if not tasks:
            raise ValueError("StaticCurriculum needs at least one task")
        if mode not in ("uniform", "round_robin", "weighted"):
            raise ValueError(f"mode must be 'uniform', 'round_robin' or 'weighted', got {mode!r}")
        if mode == "weighted":
            if weights is None or len(weights) != len(tasks):
                raise ValueError(
                    f"mode='weighted' needs one weight per task ({len(tasks)}), got {None if weights is None else len(weights)}"
                )
            if any(w < 0 for w in weights) or sum(weights) <= 0:
                raise ValueError("weights must be >= 0 with a positive sum")
        self.tasks = list(tasks)
        self.mode = mode
        self.weights = list(weights) if weights is not None else None
        self.rng = random.Random(seed)
        self.cursor = 0

    def next_task(self) -> Task:
        if self.mode == "round_robin":
            task = self.tasks[self.cursor % len(self.tasks)]
            self.cursor += 1
            return task
        if self.mode == "weighted":
            return self.rng.choices(self.tasks, weights=self.weights)[0]
        return self.rng.choice(self.tasks)

    def state_dict(self) -> dict[str, Any]:
        return {"cursor": self.cursor, "rng": self.rng.getstate()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.cursor = int(state["cursor"])
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
