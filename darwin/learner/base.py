"""The learner contract: what a run needs of a learner, whichever backend trains.

:class:`~darwin.learner.local.LocalLearner` (in process, transformers) and
:class:`~darwin.learner.verl_learner.VerlLearner` (verl's FSDP workers) both implement
:class:`Learner`, and their classes both are a :class:`LearnerClass`;
:func:`darwin.run.build.learner_class` picks one and the recipe sees only this contract
(the type checker holds both to it: tests/test_typecheck.py).
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pydantic import JsonValue

if TYPE_CHECKING:
    from darwin.learner.checkpoint import ResumeState
    from darwin.learner.config import LearnerConfig
    from darwin.learner.metrics import UpdateMetrics
    from darwin.learner.networks import TrainablePolicy
    from darwin.types import StepScore, Trajectory


class Learner(Protocol):
    """A learner as a run drives it: update on completed trajectories, count, save, close."""

    config: LearnerConfig
    updates: int
    """Updates done (critic warm-up included)."""
    policy_version: int
    """The weight version the policy samples with (one more per actor update)."""
    resume_state: ResumeState | None
    """After :meth:`LearnerClass.load`: the saved pending trajectories and caller state."""
    step_scores: tuple[StepScore, ...]
    """The critic's value, the advantage and the log-prob of each step the last update trained
    on (empty where the backend does not report them); the run stores them for ``darwin view``."""

    @property
    def in_warmup(self) -> bool:
        """Whether the next :meth:`update` trains only the critic."""
        ...

    def update(
        self, trajectories: Sequence[Trajectory], *, group_ids: Sequence[Hashable] | None = None
    ) -> UpdateMetrics:
        """One update; blocking (from asyncio code, run it in a thread)."""
        ...

    def save(
        self,
        path: str | os.PathLike[str],
        *,
        pending: Sequence[Trajectory] = (),
        extra_state: Mapping[str, JsonValue] | None = None,
    ) -> Path:
        """Write a checkpoint directory atomically, with the untrained ``pending`` trajectories."""
        ...

    def close(self) -> None:
        """Release what the learner holds (verl's workers)."""
        ...


class LearnerClass(Protocol):
    """A learner's class: builds a new learner, or loads one from a checkpoint."""

    def __call__(self, policy: TrainablePolicy, config: LearnerConfig) -> Learner: ...

    def load(
        self, path: str | os.PathLike[str], policy: TrainablePolicy, *, config: LearnerConfig | None = None
    ) -> Learner: ...
