"""Failure-filter curriculum (MobileRL): sample less of tasks that keep failing.

Follows the failure curriculum filtering of MobileRL, ``AndroidWorldCurriculumManager`` in
``training/verl/workers/reward_manager/curriculum.py`` of github.com/xuyifan-0731/MobileRL-iclr:
each task counts its consecutive failures ``f`` (a success resets it to 0), and is sampled
with weight ``exp(-f)`` while ``f <= max_failures`` (MobileRL: 3) and weight 0 beyond. MobileRL
keeps such a task out until it succeeds; here it comes back after a cool-down, so a task the
policy could not solve early gets another chance once the policy has moved on.

    >>> from darwin.curricula.base import EpisodeOutcome
    >>> from darwin.curricula.failure_filter import FailureFilterCurriculum
    >>> from darwin.task_registry import task_set
    >>> from darwin.types import TerminationReason
    >>> cur = FailureFilterCurriculum(task_set("base8")[:2], max_failures=1, cooldown_episodes=2)
    >>> fail = EpisodeOutcome("amazon_0", False, 32, TerminationReason.STEP_BUDGET)
    >>> cur.update(cur.tasks[0], fail)
    >>> {k: round(v, 4) for k, v in cur.weights().items()}  # e^-1 : e^0, normalised
    {'amazon_0': 0.2689, 'booking.com_0': 0.7311}
    >>> cur.update(cur.tasks[0], fail)  # f = 2 > max_failures: filtered out
    >>> cur.weights()
    {'amazon_0': 0.0, 'booking.com_0': 1.0}
    >>> win = EpisodeOutcome("booking.com_0", True, 9, TerminationReason.SUCCESS)
    >>> for _ in range(2):  # two episodes of other tasks: the cool-down is over
    ...     cur.update(cur.tasks[1], win)
    >>> cur.failure_counts()  # back at f = max_failures
    {'amazon_0': 1, 'booking.com_0': 0}
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from darwin.curricula._util import (
    _check_int,
    _check_tasks,
    _lookup,
    _rng_from_json,
    _rng_to_json,
)
from darwin.curricula.base import Curriculum, EpisodeOutcome
from darwin.types import Task


class FailureFilterCurriculum(Curriculum):
    """Samples each task with weight ``exp(-f)``, ``f`` its consecutive failures; 0 past a cap.

    Semantics:

    * ``outcome.success is False`` adds 1 to the task's ``f``; ``True`` resets ``f`` to 0 (as in
      MobileRL, where any non-zero reward resets the count); ``None`` (unscored: infrastructure
      truncation, error, goal already held) changes nothing, not even a cool-down clock, since
      no verdict was reached and nothing is trained on.
    * Weight ``exp(-f)`` for ``f <= max_failures``, 0 beyond (the task is *filtered*).
    * A filtered task's cool-down starts when it is filtered: once ``cooldown_episodes`` scored
      episodes of *other* tasks have finished, it comes back with ``f = max_failures`` (the
      smallest non-zero weight), so one more failure filters it again. Its own episodes still
      in flight do not restart the clock; a success among them un-filters it at once (``f = 0``).
    * If every task is filtered, :meth:`next_task` draws uniformly among all tasks (MobileRL
      falls back to uniform sampling when all weights are 0), and :meth:`weights` says so.

    :meth:`update` may be called from several asyncio workers of one event loop; no locking is
    needed. :meth:`state_dict` holds the counts, the cool-down clocks and the generator state,
    so a resumed run draws the same tasks as an uninterrupted one.

    Args:
        tasks: the tasks to choose from (at least one, distinct ids).
        max_failures: the most consecutive failures a task may have and still be sampled
            (``>= 0``; MobileRL uses 3).
        cooldown_episodes: how many scored episodes of other tasks a filtered task sits out
            (``>= 1``).
        seed: seeds this curriculum's own generator (never the global one).
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        *,
        max_failures: int = 3,
        cooldown_episodes: int = 32,
        seed: int = 0,
    ) -> None:
        self.tasks = _check_tasks(tasks, "FailureFilterCurriculum")
        self.max_failures = _check_int(
            "max_failures", max_failures, minimum=0, hint="consecutive failures before a task is filtered out, e.g. 3"
        )
        self.cooldown_episodes = _check_int(
            "cooldown_episodes",
            cooldown_episodes,
            minimum=1,
            hint="episodes of other tasks a filtered task sits out, e.g. 32",
        )
        _check_int("seed", seed, minimum=None, hint="an integer such as 0")
        self.rng = random.Random(seed)
        self._failures: dict[str, int] = {t.id: 0 for t in self.tasks}
        self._cooldown: dict[str, int] = {}
        """Filtered task id -> scored episodes of other tasks finished since it was filtered."""

    def next_task(self) -> Task:
        raw = self._raw_weights()
        if sum(raw) <= 0:
            return self.rng.choice(self.tasks)
        return self.rng.choices(self.tasks, weights=raw)[0]

    def update(self, task: Task, outcome: EpisodeOutcome) -> None:
        _lookup(self._failures, task, outcome, "FailureFilterCurriculum")
        if outcome.success is None:
            return
        tid = task.id
        if outcome.success:
            self._failures[tid] = 0
            self._cooldown.pop(tid, None)
        else:
            self._failures[tid] += 1
            if self._failures[tid] > self.max_failures:
                self._cooldown.setdefault(tid, 0)
        for other in list(self._cooldown):
            if other == tid:
                continue
            self._cooldown[other] += 1
            if self._cooldown[other] >= self.cooldown_episodes:
                del self._cooldown[other]
                self._failures[other] = self.max_failures

    def weights(self) -> dict[str, float]:
        """The probability that :meth:`next_task` draws each task, by task id (sums to 1).

        Filtered tasks get 0, unless every task is filtered: then all get ``1 / len(tasks)``.
        """
        raw = self._raw_weights()
        total = sum(raw)
        if total <= 0:
            return {t.id: 1.0 / len(self.tasks) for t in self.tasks}
        return {t.id: w / total for t, w in zip(self.tasks, raw, strict=True)}

    def failure_counts(self) -> dict[str, int]:
        """Each task's current consecutive-failure count ``f``, by task id (for logging)."""
        return dict(self._failures)

    def state_dict(self) -> dict[str, Any]:
        return {"failures": dict(self._failures), "cooldown": dict(self._cooldown), "rng": _rng_to_json(self.rng)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (also after a JSON round trip).

        Tasks the state does not mention start fresh (``f = 0``); a task id the state mentions
        but this curriculum lacks raises ``ValueError``.
        """
        failures, cooldown = state["failures"], state["cooldown"]
        unknown = sorted((set(failures) | set(cooldown)) - set(self._failures))
        if unknown:
            raise ValueError(
                f"state mentions tasks this curriculum lacks: {', '.join(unknown)}; "
                "build the curriculum with the same tasks as the run that saved it"
            )
        self._failures = {tid: int(failures.get(tid, 0)) for tid in self._failures}
        # Clocks only for filtered tasks (a state saved with another max_failures still loads).
        self._cooldown = {tid: int(cooldown.get(tid, 0)) for tid, f in self._failures.items() if f > self.max_failures}
        _rng_from_json(self.rng, state["rng"])

    def _raw_weights(self) -> list[float]:
        out = []
        for t in self.tasks:
            f = self._failures[t.id]
            out.append(math.exp(-f) if f <= self.max_failures else 0.0)
        return out
