"""Learnability curriculum: favour tasks the policy solves about half the time.

A task's learnability is ``p * (1 - p)`` for its success rate ``p``: zero for tasks that are
always solved or never solved (no learning signal for group-relative advantages), largest
(0.25) at ``p = 0.5``. Each task keeps a running estimate of ``p`` over its last ``window``
scored episodes, shrunk towards a prior so that a task with few episodes is neither dropped
nor over-sampled, and the next task is drawn with probability proportional to its
learnability, never below a floor.

    >>> from darwin.curricula.base import EpisodeOutcome
    >>> from darwin.curricula.learnability import LearnabilityCurriculum
    >>> from darwin.task_registry import task_set
    >>> from darwin.types import TerminationReason
    >>> cur = LearnabilityCurriculum(task_set("base8")[:2], seed=0)
    >>> cur.success_estimates()  # no episodes yet: the prior
    {'amazon_0': 0.5, 'booking.com_0': 0.5}
    >>> cur.update(cur.tasks[0], EpisodeOutcome("amazon_0", True, 7, TerminationReason.SUCCESS))
    >>> round(cur.success_estimates()["amazon_0"], 4)  # (1 + 0.5 * 2) / (1 + 2)
    0.6667
    >>> {k: round(v, 4) for k, v in cur.weights().items()}  # 0.2222 vs 0.25, normalised
    {'amazon_0': 0.4706, 'booking.com_0': 0.5294}
    >>> cur.next_task().id in ("amazon_0", "booking.com_0")
    True
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from darwin.curricula._util import (
    SuccessWindows,
    _check_fraction,
    _check_int,
    _check_outcome,
    _check_prior,
    _check_tasks,
    _draw,
    _normalised,
    _rng_from_json,
    _rng_to_json,
)
from darwin.curricula.base import Curriculum, EpisodeOutcome
from darwin.types import Task


class LearnabilityCurriculum(Curriculum):
    """Samples tasks proportionally to ``max(p * (1 - p), floor * 0.25)``.

    ``p`` is the task's smoothed success rate over its last ``window`` scored episodes::

        p = (successes + prior_success * prior_weight) / (episodes + prior_weight)

    (``p = prior_success`` when both ``episodes`` and ``prior_weight`` are 0). Episodes whose
    ``outcome.success`` is ``None`` (unscored: infrastructure truncations, errors, goals that
    already held) are ignored. Should every weight be 0 (only possible with ``floor=0`` and
    ``prior_weight=0``), the next task is drawn uniformly.

    :meth:`update` may be called from several asyncio workers of one event loop; no locking
    is needed. :meth:`state_dict` holds the per-task windows and the generator state, so a
    resumed run draws the same tasks as an uninterrupted one.

    Args:
        tasks: the tasks to choose from (at least one, distinct ids).
        floor: the smallest weight, as a fraction of the peak learnability 0.25, in ``[0, 1]``.
            Keeps mastered and hopeless tasks in rotation so their estimates can change.
        prior_success: the success rate assumed before any episode, in ``[0, 1]``.
        prior_weight: how many pseudo-episodes the prior counts for (``>= 0``).
        window: how many of a task's most recent scored episodes the estimate uses (``>= 1``).
        seed: seeds this curriculum's own generator (never the global one).
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        *,
        floor: float = 0.05,
        prior_success: float = 0.5,
        prior_weight: float = 2.0,
        window: int = 20,
        seed: int = 0,
    ) -> None:
        self.tasks = _check_tasks(tasks, "LearnabilityCurriculum")
        self.floor = _check_fraction(
            "floor", floor, "the fraction of the peak weight 0.25 kept as a minimum, e.g. 0.05"
        )
        self.prior_success, self.prior_weight = _check_prior(prior_success, prior_weight)
        self.window = _check_int(
            "window", window, minimum=1, hint="the number of recent scored episodes per task, e.g. 20"
        )
        _check_int("seed", seed, minimum=None, hint="an integer such as 0")
        self.rng = random.Random(seed)
        self._windows = SuccessWindows(
            [t.id for t in self.tasks],
            window=self.window,
            prior_success=self.prior_success,
            prior_weight=self.prior_weight,
        )

    def next_task(self) -> Task:
        return _draw(self.rng, self.tasks, self._raw_weights())

    def update(self, task: Task, outcome: EpisodeOutcome) -> None:
        _check_outcome(self._windows, task, outcome, "LearnabilityCurriculum")
        if outcome.success is not None:
            self._windows.record(task.id, outcome.success)

    def success_estimates(self) -> dict[str, float]:
        """Each task's smoothed success rate ``p``, by task id (for logging)."""
        return self._windows.estimates()

    def weights(self) -> dict[str, float]:
        """The probability that :meth:`next_task` draws each task, by task id (sums to 1)."""
        return _normalised([t.id for t in self.tasks], self._raw_weights())

    def state_dict(self) -> dict[str, Any]:
        return {"history": self._windows.state_dict(), "rng": _rng_to_json(self.rng)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (also after a JSON round trip).

        Tasks the state does not mention start with no episodes; a task id the state
        mentions but this curriculum lacks raises ``ValueError``.
        """
        self._windows.load_state_dict(state["history"])
        _rng_from_json(self.rng, state["rng"])

    def _raw_weights(self) -> list[float]:
        minimum = self.floor * 0.25
        out = []
        for t in self.tasks:
            p = self._windows.estimate(t.id)
            out.append(max(p * (1.0 - p), minimum))
        return out
