"""The learner contract: what a run needs of a learner, whichever backend trains.

:class:`~darwin.learner.local.LocalLearner` (in process, transformers) and
:class:`~darwin.learner.verl_learner.VerlLearner` (verl's FSDP workers) both implement
:class:`Learner`, and their classes both are a :class:`LearnerClass`;
:func:`darwin.run.build.learner_class` picks one and the recipe sees only this contract
(the type checker holds both to it: tests/test_typecheck.py).

Both build on :class:`LearnerBase`, which writes the update once: the refusal of a batch with
no verdict, the critic warm-up, negative pruning, the counters, the weight push and the log
line. A backend supplies two steps, training on the batch and reporting what it did. A learner
that trains nothing and reports how many trajectories it saw::

    >>> from dataclasses import replace
    >>> from darwin.learner.config import LearnerConfig
    >>> from darwin.learner.metrics import skipped_update_metrics
    >>> class Counting(LearnerBase[int]):
    ...     def __init__(self, policy, config):
    ...         self.policy, self.config = policy, config
    ...         self.updates, self.policy_version, self.step_scores = 0, 0, ()
    ...     def actor_state_dict(self):
    ...         return {}
    ...     def _train_update(self, trajectories, group_ids, *, warmup):
    ...         return len(trajectories)
    ...     def _finish_update(self, trained, *, warmup, version_before, started, trained_at, synced):
    ...         done = skipped_update_metrics([], reason="", update=self.updates, policy_version=self.policy_version)
    ...         return replace(done, stage="counted", trajectories=trained, actor_updated=not warmup)
    >>> class Receiver:
    ...     def load_weights(self, state, version): self.version = version
    >>> learner = Counting(Receiver(), LearnerConfig(critic={"warmup_updates": 1}, infra_only_updates="train"))
    >>> [(m.update, m.actor_updated, m.policy_version) for m in (learner.update([]), learner.update([]))]
    [(1, False, 0), (2, True, 1)]
    >>> learner.policy.version  # the actor's weights were pushed after the second update
    1
"""

from __future__ import annotations

import logging
import os
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

import torch
from pydantic import JsonValue

from darwin.learner.metrics import fmt_metric, skipped_update_metrics
from darwin.learner.step_rows import actor_skip_reason
from darwin.learner.update_batch import prune_negatives

if TYPE_CHECKING:
    from darwin.learner.checkpoint import ResumeState
    from darwin.learner.config import LearnerConfig
    from darwin.learner.metrics import UpdateMetrics
    from darwin.learner.networks import TrainablePolicy
    from darwin.learner.verl_runtime import WeightReceiver
    from darwin.types import StepScore, Trajectory

logger = logging.getLogger(__name__)


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


TrainedT = TypeVar("TrainedT")
"""What a backend's :meth:`LearnerBase._train_update` hands to its :meth:`LearnerBase._finish_update`."""


class LearnerBase(ABC, Generic[TrainedT]):
    """The update skeleton both learners share (see the module docstring for an example).

    A subclass sets ``policy``, ``config``, ``updates``, ``policy_version`` and ``step_scores``
    in its ``__init__`` and implements :meth:`actor_state_dict`, :meth:`_train_update` and
    :meth:`_finish_update`; :meth:`update` calls them in this order:

    1. a batch with no verdict (``infra_only_updates = 'skip'``) trains nothing and is counted;
    2. negative pruning (``levers.negative_pruning``), drawn from :meth:`_pruning_rng`;
    3. ``_train_update``: the backend's rows, advantages and training (critic only in warm-up);
    4. the update is counted; after an actor update the policy gets the actor's weights with
       ``version + 1``;
    5. ``_finish_update``: the update's metrics (and what the backend does after the weight push).
    """

    policy: WeightReceiver
    config: LearnerConfig
    updates: int
    policy_version: int
    step_scores: tuple[StepScore, ...]

    @property
    def in_warmup(self) -> bool:
        """Whether the next :meth:`update` trains only the critic."""
        return self.config.uses_critic and self.updates < self.config.critic.warmup_updates

    @abstractmethod
    def actor_state_dict(self) -> dict[str, torch.Tensor]:
        """The actor's full weights (HF key names, CPU), pushed to the policy after an actor update."""

    @abstractmethod
    def _train_update(
        self, trajectories: list[Trajectory], group_ids: Sequence[Hashable] | None, *, warmup: bool
    ) -> TrainedT:
        """Build the rows of ``trajectories``, estimate advantages and train: the critic, and the
        actor unless ``warmup``. Leaves the counters alone."""

    @abstractmethod
    def _finish_update(
        self,
        trained: TrainedT,
        *,
        warmup: bool,
        version_before: int,
        started: float,
        trained_at: float,
        synced: float,
    ) -> UpdateMetrics:
        """The metrics of the update ``trained`` describes; ``updates`` and ``policy_version``
        are already counted, the weights pushed. ``started``, ``trained_at`` and ``synced`` are
        ``time.perf_counter()`` readings at the start, after training and after the push."""

    def _pruning_rng(self) -> random.Random:
        """The generator negative pruning draws from (a fresh, reproducible one per update)."""
        return random.Random(self.config.seed * 1_000_003 + self.updates)

    def update(
        self, trajectories: Sequence[Trajectory], *, group_ids: Sequence[Hashable] | None = None
    ) -> UpdateMetrics:
        """One update on completed trajectories; blocking (from asyncio code, run it in a thread).

        With ``infra_only_updates = 'skip'`` (the default), a batch that holds no verdict
        (:func:`~darwin.learner.step_rows.actor_skip_reason`: unverified trajectories left out, the
        rest all infrastructure truncations, or nothing left) trains nothing: no actor step, no
        critic step, no positive replay; the update is counted and its metrics say
        ``actor_skipped_reason``. The actor must not move, since every reward of such a batch
        says how the phones failed, not how the agent did; the critic is left alone too, since
        with ``truncation='zero'`` its targets there are all zero and would teach it that the
        states the phones failed in are worth nothing (not the agent's doing). A skipped update
        during the critic warm-up counts as one of its updates.
        """
        cfg = self.config
        started = time.perf_counter()
        self.step_scores = ()
        skip = actor_skip_reason(trajectories) if cfg.infra_only_updates == "skip" else None
        if skip is not None:
            self.updates += 1
            metrics = skipped_update_metrics(
                trajectories,
                reason=skip,
                update=self.updates,
                policy_version=self.policy_version,
                total_s=time.perf_counter() - started,
            )
            logger.info(
                "update %d skipped (%s): %d trajectories, %d infrastructure truncations, %d unverified; "
                "the actor and the critic keep their weights",
                metrics.update,
                skip,
                len(trajectories),
                metrics.dropped_infra_trajectories,
                metrics.unverified_trajectories,
            )
            return metrics
        warmup = self.in_warmup
        version_before = self.policy_version
        kept, pruned = list(trajectories), 0
        if cfg.levers.negative_pruning:
            kept, group_ids, pruned = prune_negatives(
                kept,
                group_ids,
                max_negatives_per_positive=cfg.levers.max_negatives_per_positive,
                rng=self._pruning_rng(),
            )
        trained = self._train_update(kept, group_ids, warmup=warmup)
        trained_at = time.perf_counter()
        self.updates += 1
        if not warmup:
            self.policy_version += 1
            self.policy.load_weights(self.actor_state_dict(), self.policy_version)
        metrics = self._finish_update(
            trained,
            warmup=warmup,
            version_before=version_before,
            started=started,
            trained_at=trained_at,
            synced=time.perf_counter(),
        )
        metrics = replace(metrics, pruned_trajectories=pruned)
        logger.info(
            "update %d (%s): %d steps, policy v%d, value loss %s, policy loss %s, %.1fs",
            metrics.update,
            metrics.stage,
            metrics.steps,
            metrics.policy_version,
            fmt_metric(metrics.value_loss),
            fmt_metric(metrics.policy_loss),
            metrics.total_s,
        )
        return metrics
