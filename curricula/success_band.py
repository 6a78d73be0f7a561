"""Success-band curriculum (MobileRL): favour tasks solved sometimes, not always or never.

Follows MobileRL's ``GaussianCurriculumManager`` (``training/verl/workers/reward_manager/
curriculum.py`` of github.com/xuyifan-0731/MobileRL-iclr): a task whose success rate ``p``
lies inside the band ``[low, high]`` (MobileRL: ``[0.2, 0.8]``) gets weight 1; outside it the
weight decays as a Gaussian centred on the band's middle, ``exp(-(p - c)^2 / (2 sigma^2))``
with MobileRL's ``sigma = sqrt(0.25 / (2 ln 5))``, so a task at 0% or 100% keeps weight 0.2.
(As in MobileRL the weight steps down at the band's edge: from 1 to 0.56 at ``p`` just
below 0.2.) Beyond MobileRL, ``p`` is estimated over a sliding window of recent scored
episodes and shrunk towards a prior (:class:`~darwin.curricula._util.SuccessWindows`, as in
:class:`~darwin.curricula.learnability.LearnabilityCurriculum`), and a floor keeps every task sampled.

With template instances (``group_by="template"``, the default) the instances of one template
share one estimate and one weight, split evenly among them: a template with many instances
is not drawn more often for it.

    >>> from darwin.curricula.base import EpisodeOutcome
    >>> from darwin.curricula.success_band import SuccessBandCurriculum
    >>> from darwin.task_registry import task_set
    >>> from darwin.types import TerminationReason
    >>> cur = SuccessBandCurriculum(task_set("base8")[:2], prior_weight=0.0, seed=0)
    >>> fail = EpisodeOutcome("amazon_0", False, 32, TerminationReason.STEP_BUDGET)
    >>> cur.update(cur.tasks[0], fail)          # p = 0: Gaussian weight 0.2
    >>> {k: round(v, 4) for k, v in cur.band_weights().items()}
    {'amazon_0': 0.2, 'booking.com_0': 1.0}
    >>> {k: round(v, 4) for k, v in cur.weights().items()}   # 0.2 : 1, normalised
    {'amazon_0': 0.1667, 'booking.com_0': 0.8333}
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from darwin.curricula._util import (
    SuccessWindows,
    _check_int,
    _check_outcome,
    _check_tasks,
    _draw,
    _normalised,
    _rng_from_json,
    _rng_to_json,
)
from darwin.curricula.base import Curriculum, EpisodeOutcome
from darwin.types import Task

MOBILERL_SIGMA = math.sqrt(0.25 / (2 * math.log(5)))
"""MobileRL's width: the weight at ``p = 0`` and ``p = 1`` is ``exp(-ln 5) = 0.2``."""


class SuccessBandConfig(BaseModel):
    """Settings of :class:`SuccessBandCurriculum` (validated when built; frozen)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    low: float = Field(0.2, ge=0.0, le=1.0, description="lower edge of the band of weight 1 (MobileRL: 0.2)")
    high: float = Field(0.8, ge=0.0, le=1.0, description="upper edge of the band of weight 1 (MobileRL: 0.8)")
    sigma: float = Field(
        MOBILERL_SIGMA,
        gt=0.0,
        le=10.0,
        description="width of the Gaussian outside the band, centred on the band's middle "
        "(MobileRL: sqrt(0.25 / (2 ln 5)) = 0.279, weight 0.2 at 0% and 100%)",
    )
    floor: float = Field(0.05, ge=0.0, le=1.0, description="the smallest weight (keeps every task in rotation)")
    window: int = Field(20, ge=1, description="recent scored episodes per task (or template) that the estimate reads")
    prior_success: float = Field(
        0.5, ge=0.0, le=1.0, description="success rate assumed before any episode (MobileRL: 0.5)"
    )
    prior_weight: float = Field(2.0, ge=0.0, le=1e6, description="pseudo-episodes the prior counts for")
    group_by: Literal["template", "task"] = Field(
        "template",
        description="'template': instances of one template share an estimate and a weight (tasks without a template "
        "stand alone); 'task': every task on its own",
    )

    @model_validator(mode="after")
    def _check(self) -> SuccessBandConfig:
        if self.low > self.high:
            raise ValueError(f"low = {self.low} is above high = {self.high}; the band is [low, high], e.g. [0.2, 0.8]")
        return self


def band_weight(p: float, config: SuccessBandConfig) -> float:
    """The weight of success rate ``p``: 1 inside ``[low, high]``, else the Gaussian, never below ``floor``.

    >>> cfg = SuccessBandConfig()
    >>> [round(band_weight(p, cfg), 4) for p in (0.0, 0.1, 0.2, 0.5, 0.8, 0.9, 1.0)]
    [0.2, 0.357, 1.0, 1.0, 1.0, 0.357, 0.2]
    """
    if config.low <= p <= config.high:
        return 1.0
    centre = (config.low + config.high) / 2
    return max(math.exp(-((p - centre) ** 2) / (2 * config.sigma**2)), config.floor)


class SuccessBandCurriculum(Curriculum):
    """Samples tasks in proportion to the success-band weight of their (template's) success rate.

    Semantics:

    * The key of a task is its template (``group_by="template"``; a task without one is its
      own key) or its id (``group_by="task"``). Each key keeps its last ``window`` scored
      outcomes (``outcome.success`` not ``None``; unscored episodes change nothing) and
      estimates ``p = (successes + prior_success * prior_weight) / (episodes + prior_weight)``.
    * A key's weight is :func:`band_weight` of ``p``; a task's probability is its key's
      weight divided by the key's number of tasks, normalised over all tasks.

    :meth:`update` may be called from several asyncio workers of one event loop; no locking
    is needed. :meth:`state_dict` holds the windows and the generator state, so a resumed
    run draws the same tasks as an uninterrupted one.

    Args:
        tasks: the tasks to choose from (at least one, distinct ids).
        config: a :class:`SuccessBandConfig`, or its fields as keyword arguments.
        seed: seeds this curriculum's own generator (never the global one).
    """

    def __init__(
        self, tasks: Sequence[Task], config: SuccessBandConfig | None = None, *, seed: int = 0, **overrides: Any
    ) -> None:
        if config is not None and overrides:
            raise TypeError("pass either a SuccessBandConfig or keyword overrides, not both")
        self.config = config if config is not None else SuccessBandConfig.model_validate(overrides)
        self.tasks = _check_tasks(tasks, "SuccessBandCurriculum")
        _check_int("seed", seed, minimum=None, hint="an integer such as 0")
        self.rng = random.Random(seed)
        self._key = {t.id: self.key(t) for t in self.tasks}
        self._members = Counter(self._key.values())
        cfg = self.config
        self._windows = SuccessWindows(
            list(self._members), window=cfg.window, prior_success=cfg.prior_success, prior_weight=cfg.prior_weight
        )

    def key(self, task: Task) -> str:
        """What ``task``'s estimate is kept under: its template or its id (``group_by``)."""
        if self.config.group_by == "template" and task.template is not None:
            return task.template
        return task.id

    def next_task(self) -> Task:
        return _draw(self.rng, self.tasks, self._raw_weights())

    def update(self, task: Task, outcome: EpisodeOutcome) -> None:
        _check_outcome(self._key, task, outcome, "SuccessBandCurriculum")
        if outcome.success is not None:
            self._windows.record(self._key[task.id], outcome.success)

    def success_estimates(self) -> dict[str, float]:
        """Each key's smoothed success rate ``p`` (for logging)."""
        return self._windows.estimates()

    def band_weights(self) -> dict[str, float]:
        """Each key's weight before normalisation (1 inside the band)."""
        return {k: band_weight(p, self.config) for k, p in self._windows.estimates().items()}

    def weights(self) -> dict[str, float]:
        """The probability that :meth:`next_task` draws each task, by task id (sums to 1)."""
        return _normalised([t.id for t in self.tasks], self._raw_weights())

    def state_dict(self) -> dict[str, Any]:
        return {"history": self._windows.state_dict(), "rng": _rng_to_json(self.rng)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (also after a JSON round trip); keys the state
        does not mention start with no episodes, a key it mentions that this curriculum lacks
        raises ``ValueError``."""
        self._windows.load_state_dict(state["history"], what=f"{self.config.group_by}s")
        _rng_from_json(self.rng, state["rng"])

    def _raw_weights(self) -> list[float]:
        by_key = self.band_weights()
        return [by_key[self._key[t.id]] / self._members[self._key[t.id]] for t in self.tasks]
