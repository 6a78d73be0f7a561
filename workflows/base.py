"""Workflows turn (phone, task, actor) into a trajectory: the interaction pattern.

Subclass :class:`Workflow` to try new patterns (planning, self-verification, several
agents); :class:`~darwin.workflows.step.StepWorkflow` is the paper's plain step loop.

    >>> import asyncio
    >>> from darwin.workflows.base import Workflow
    >>> from darwin.types import Trajectory
    >>> class DoNothing(Workflow):
    ...     async def run(self, env, task, actor, emit=None, episode_id=None):
    ...         return Trajectory(episode_id="e0", task=task)
    >>> from darwin.tasks import get_task
    >>> asyncio.run(DoNothing().run(None, get_task("amazon_0"), None)).task.id
    'amazon_0'
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from darwin.agents.base import Actor
from darwin.envs.base import PhoneEnv
from darwin.types import Task, Trajectory, Transition

Emit = Callable[[Transition], None]
"""Receives every transition the moment it happens (e.g. the replay buffer)."""


class Workflow(ABC):
    """Runs one episode of ``task`` on ``env`` with ``actor``."""

    @property
    def verifier_kind(self) -> str:
        """Name of the verifier behind this workflow's verdicts (stored with each verdict)."""
        return "custom"

    @abstractmethod
    async def run(self, env: PhoneEnv, task: Task, actor: Actor, emit: Emit | None = None, episode_id: str | None = None) -> Trajectory:
        """Play the episode, emitting transitions as they happen; return the trajectory."""

    def close(self) -> None:
        """Release what the workflow holds open (its verifier's, its advisers'); default: nothing.

        Called once by the run's cleanup, also after an error; it must be safe to call twice.
        """
