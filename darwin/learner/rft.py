"""The accepted episodes a rejection-sampling fine-tune trains on (:class:`AcceptedEpisodes`;
the loss it minimises is :func:`darwin.models.scoring.response_nll`).

``LearnerConfig.finetunes.rft`` interleaves RL with MobileRL's iterative SFT: the learner keeps the most
recent training episodes whose verifier accepted the execution phase, and every
``finetunes.rft.every`` actor updates fine-tunes the actor on their steps
(:meth:`~darwin.learner.local.LocalLearner.rejection_finetune`).

    >>> from darwin.task_registry import get_task
    >>> from darwin.types import Phase, Termination, TerminationReason, Trajectory
    >>> from darwin.verifiers.base import Verdict
    >>> def episode(eid, success):
    ...     return Trajectory(eid, get_task("amazon_0"), termination=Termination(TerminationReason.AGENT_FINISHED),
    ...                       verdicts={Phase.EXECUTION: Verdict(success)})
    >>> kept = AcceptedEpisodes(capacity=2)
    >>> kept.add([episode("a", True), episode("b", False), episode("c", True), episode("d", True)])
    3
    >>> [t.episode_id for t in kept.trajectories]
    ['c', 'd']
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import TypedDict

from darwin.types import Outcome, Trajectory

__all__ = ["AcceptedEpisodes", "RftMetrics"]


class RftMetrics(TypedDict, total=False):
    """What a rejection-sampling fine-tune reports: the ``rft_*`` fields of
    :class:`~darwin.learner.metrics.UpdateMetrics` (the losses only when it trained)."""

    rft_steps: int
    rft_episodes: int
    rft_loss_first: float
    rft_loss_last: float
    rft_s: float


class AcceptedEpisodes:
    """The most recent ``capacity`` trajectories whose outcome is :attr:`Outcome.SUCCESS`
    (the verifier accepted them; episodes already done before the agent acted, unverified
    ones and infrastructure truncations never count). Checkpointed with the learner."""

    def __init__(self, capacity: int) -> None:
        self._kept: deque[Trajectory] = deque(maxlen=capacity)

    def add(self, trajectories: Iterable[Trajectory]) -> int:
        """Keep the accepted ones of ``trajectories``; returns how many were kept."""
        accepted = [t for t in trajectories if t.outcome == Outcome.SUCCESS]
        self._kept.extend(accepted)
        return len(accepted)

    @property
    def trajectories(self) -> list[Trajectory]:
        """Oldest first."""
        return list(self._kept)

    def __len__(self) -> int:
        return len(self._kept)

    def state(self) -> list[Trajectory]:
        return list(self._kept)

    def restore(self, trajectories: Iterable[Trajectory]) -> None:
        self._kept.clear()
        self._kept.extend(trajectories)
