"""Memory modules hold the agent state between steps (the paper's context processing).

An agent asks its memory which past interactions and images to put in the prompt.

    >>> from darwin.memory.base import Memory
    >>> class LastOnly(Memory):
    ...     def select(self, history):
    ...         return list(history[-1:])
    >>> LastOnly().select([1, 2, 3])
    [3]
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from darwin.types import Transition


class Memory(ABC):
    """Chooses what of the episode history goes into the next prompt."""

    @abstractmethod
    def select(self, history: Sequence[Transition]) -> list[Transition]:
        """The past transitions to show, oldest first."""

    def reset(self) -> None:
        """Forget per-episode state (called when an episode starts)."""
