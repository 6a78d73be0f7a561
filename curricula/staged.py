"""Difficulty-staged curriculum (AndroidWorld-Generalization): easy, then easy + medium, then all.

AndroidWorld-Generalization trains on easy tasks first, then on easy and medium ones, then
on all of them, and reports 49.1% success against 45.1% for training on everything from the
start. Here a stage is the set of tasks whose ``Task.difficulty`` (1 easy, 2 medium, 3 hard)
is at most the stage's cap; tasks are drawn uniformly within the current stage, and the
curriculum moves to the next stage when the stage's success rate over its last ``window``
scored episodes reaches ``advance_success``, or after ``advance_after`` finished episodes in
the stage, whichever comes first.

    >>> from darwin.curricula.staged import DifficultyStagedCurriculum
    >>> from darwin.curricula.base import EpisodeOutcome
    >>> from darwin.types import Task, TerminationReason, VerifierSpec
    >>> tasks = [Task(id=f"t{d}", instruction="Do it.", app="App", difficulty=d,
    ...               verifier=VerifierSpec(predicate="p")) for d in (1, 2, 3)]
    >>> cur = DifficultyStagedCurriculum(tasks, window=2, advance_success=0.5)
    >>> cur.stage, [t.id for t in cur.stage_tasks()]
    (0, ['t1'])
    >>> for _ in range(2):  # two successes: 100% over the window of 2 >= 50%
    ...     cur.update(tasks[0], EpisodeOutcome("t1", True, 4, TerminationReason.SUCCESS))
    >>> cur.stage, cur.weights()
    (1, {'t1': 0.5, 't2': 0.5, 't3': 0.0})
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from darwin.curricula._util import (
    SuccessWindows,
    _check_int,
    _check_outcome,
    _check_tasks,
    _normalised,
    _rng_from_json,
    _rng_to_json,
)
from darwin.curricula.base import Curriculum, EpisodeOutcome
from darwin.types import Task

logger = logging.getLogger(__name__)

_STAGE = "stage"  # the one key of the stage's success window


class StagedConfig(BaseModel):
    """Settings of :class:`DifficultyStagedCurriculum` (validated when built; frozen)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    stages: tuple[int, ...] = Field(
        (1, 2, 3),
        min_length=1,
        description="the hardest difficulty of each stage, increasing: (1, 2, 3) = easy, easy + medium, all "
        "(AndroidWorld-Generalization); stages that add no task are skipped",
    )
    advance_success: float | None = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="move on when the stage's success rate over its last `window` scored episodes reaches this; "
        "None: only after `advance_after` episodes",
    )
    window: int = Field(32, ge=1, description="scored episodes of the current stage that the success rate reads")
    advance_after: int | None = Field(
        256,
        ge=1,
        description="move on after this many finished episodes in a stage, whatever the success rate; None: only by success",
    )

    @model_validator(mode="after")
    def _check(self) -> StagedConfig:
        problems = []
        if any(d not in (1, 2, 3) for d in self.stages):
            problems.append(f"stages must hold difficulties 1, 2 or 3 (Task.difficulty), got {list(self.stages)}")
        if any(b <= a for a, b in zip(self.stages, self.stages[1:], strict=False)):
            problems.append(
                f"stages must increase (each stage adds harder tasks), got {list(self.stages)}; e.g. (1, 2, 3)"
            )
        if self.advance_success is None and self.advance_after is None:
            problems.append(
                "advance_success and advance_after are both None: the curriculum would never leave its "
                "first stage; set one of them (e.g. advance_success=0.5)"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self


class DifficultyStagedCurriculum(Curriculum):
    """Uniform draws among the tasks of the current difficulty stage; later stages add harder tasks.

    Semantics:

    * Stage ``k`` holds the tasks with ``difficulty <= stages[k]``. Stages that hold no task,
      or no task more than the stage before, are skipped; every task must be in the last
      stage (a task harder than ``stages[-1]`` raises ``ValueError``).
    * Each finished episode counts towards the stage's ``advance_after``; its verdict, when it
      has one (``outcome.success`` is not ``None``), joins the stage's success window. With a
      full window whose success rate is ``>= advance_success``, or ``advance_after`` episodes,
      the next stage starts with an empty window and count (logged). The last stage is final.
    * Episodes started in an earlier stage that finish after a change count for the new one
      (its tasks include the earlier ones).

    :meth:`state_dict` holds the stage (by its difficulty cap), its count and window and the
    generator state, so a resumed run draws the same tasks as an uninterrupted one.

    Args:
        tasks: the tasks (at least one, distinct ids).
        config: a :class:`StagedConfig`, or its fields as keyword arguments.
        seed: seeds this curriculum's own generator (never the global one).
    """

    def __init__(
        self, tasks: Sequence[Task], config: StagedConfig | None = None, *, seed: int = 0, **overrides: Any
    ) -> None:
        if config is not None and overrides:
            raise TypeError("pass either a StagedConfig or keyword overrides, not both")
        self.config = config if config is not None else StagedConfig.model_validate(overrides)
        self.tasks = _check_tasks(tasks, "DifficultyStagedCurriculum")
        _check_int("seed", seed, minimum=None, hint="an integer such as 0")
        too_hard = [t.id for t in self.tasks if t.difficulty > self.config.stages[-1]]
        if too_hard:
            raise ValueError(
                f"tasks {', '.join(too_hard[:5])}{' ...' if len(too_hard) > 5 else ''} are harder than the last stage "
                f"(difficulty <= {self.config.stages[-1]}) and would never run; add {max(t.difficulty for t in self.tasks)} to stages"
            )
        self.caps: list[int] = []
        """The difficulty caps of the stages actually run (empty and repeated stages skipped)."""
        self._stage_tasks: list[list[Task]] = []
        for cap in self.config.stages:
            members = [t for t in self.tasks if t.difficulty <= cap]
            if members and (not self._stage_tasks or len(members) > len(self._stage_tasks[-1])):
                self.caps.append(cap)
                self._stage_tasks.append(members)
        self.rng = random.Random(seed)
        self.stage = 0
        """Index of the current stage in :attr:`caps`."""
        self.stage_episodes = 0
        """Finished episodes since the current stage started."""
        self._window = SuccessWindows([_STAGE], window=self.config.window, prior_success=0.0, prior_weight=0.0)
        self._ids = {t.id for t in self.tasks}

    def stage_tasks(self) -> list[Task]:
        """The tasks of the current stage."""
        return list(self._stage_tasks[self.stage])

    def stage_success(self) -> float | None:
        """The current stage's success rate over its window; ``None`` before a full window."""
        if self._window.count(_STAGE) < self.config.window:
            return None
        return self._window.estimate(_STAGE)

    def next_task(self) -> Task:
        return self.rng.choice(self._stage_tasks[self.stage])

    def update(self, task: Task, outcome: EpisodeOutcome) -> None:
        _check_outcome(self._ids, task, outcome, "DifficultyStagedCurriculum")
        self.stage_episodes += 1
        if outcome.success is not None:
            self._window.record(_STAGE, outcome.success)
        if self.stage + 1 >= len(self.caps):
            return
        cfg = self.config
        success = self.stage_success()
        if cfg.advance_success is not None and success is not None and success >= cfg.advance_success:
            why = f"success {success:.0%} over the last {cfg.window} scored episodes >= {cfg.advance_success:.0%}"
        elif cfg.advance_after is not None and self.stage_episodes >= cfg.advance_after:
            why = f"{self.stage_episodes} episodes in the stage"
        else:
            return
        self.stage += 1
        logger.info(
            "staged curriculum: stage %d/%d (difficulty <= %d, %d tasks) starts after %s",
            self.stage + 1,
            len(self.caps),
            self.caps[self.stage],
            len(self._stage_tasks[self.stage]),
            why,
        )
        self.stage_episodes = 0
        self._window.clear(_STAGE)

    def weights(self) -> dict[str, float]:
        """The probability that :meth:`next_task` draws each task, by task id (0 outside the stage)."""
        members = {t.id for t in self._stage_tasks[self.stage]}
        return _normalised([t.id for t in self.tasks], [float(t.id in members) for t in self.tasks])

    def state_dict(self) -> dict[str, Any]:
        return {
            "max_difficulty": self.caps[self.stage],
            "stage_episodes": self.stage_episodes,
            "window": self._window.state_dict()[_STAGE],
            "rng": _rng_to_json(self.rng),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (also after a JSON round trip); a stage this
        curriculum does not have (other tasks or stages) raises ``ValueError``."""
        cap = int(state["max_difficulty"])
        if cap not in self.caps:
            raise ValueError(
                f"state is at the stage of difficulty <= {cap}, which this curriculum lacks (its stages: {self.caps}); "
                "build it with the same tasks and stages as the run that saved it"
            )
        self.stage = self.caps.index(cap)
        self.stage_episodes = int(state["stage_episodes"])
        self._window.load_state_dict({_STAGE: state["window"]})
        _rng_from_json(self.rng, state["rng"])
