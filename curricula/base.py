"""Curricula choose the next task and learn from outcomes.

>>> from darwin.curricula.base import Curriculum
>>> from darwin.task_registry import task_set
>>> class First(Curriculum):
...     def __init__(self, tasks):
...         self.tasks = tasks
...     def next_task(self):
...         return self.tasks[0]
>>> First(task_set("base8")).next_task().id
'amazon_0'
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from darwin.types import Task, TerminationReason


@dataclass(frozen=True)
class EpisodeOutcome:
    """What a curriculum learns from one finished episode."""

    task_id: str
    success: bool | None
    steps: int
    termination: TerminationReason
    start_step: int = 0
    """Demonstration steps played before the agent's first (``Trajectory.start_step``; 0: from the beginning)."""


class Curriculum(ABC):
    """Picks tasks. Override :meth:`update` to adapt, and the state methods to resume."""

    @abstractmethod
    def next_task(self) -> Task:
        """The task for the next episode on a free phone."""

    def update(self, task: Task, outcome: EpisodeOutcome) -> None:
        """Learn from a finished episode (static curricula ignore it)."""

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state for checkpoints."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output."""

    def close(self) -> None:
        """Release what the curriculum holds open (a model's thread, a database); default: nothing.

        Called once by the run's cleanup, also after an error; it must be safe to call twice.
        """
