"""Extension point: the curriculum, which picks the task a free phone runs next.

A curriculum is a :class:`darwin.curricula.base.Curriculum` subclass. Its contract:

- ``next_task() -> Task``: called by every phone that becomes free (several phones share one
  curriculum, from one asyncio event loop: no locking needed, but ``next_task`` is called
  again before earlier episodes have finished);
- ``update(task, outcome)``: called when an episode of ``task`` ends, with an
  :class:`~darwin.curricula.base.EpisodeOutcome` (``success`` is ``None`` for unscored episodes:
  infrastructure truncations, errors, goals that already held; do not count those);
- ``state_dict()`` / ``load_state_dict(state)``: JSON-serialisable state, saved with every
  checkpoint, so ``darwin run --resume`` continues with what the curriculum had learnt;
- optional ``weights() -> {task id: probability}``: logged after every update as the
  ``curriculum`` metrics group (TensorBoard ``curriculum/<task>``, ``metrics.jsonl``);
- the experiment builds it as ``cls(tasks=..., seed=..., **kwargs)``, passing ``tasks`` (the
  experiment's resolved tasks) and ``seed`` (``phones.seed``) only when ``__init__`` takes them.

This file's :class:`HardestFirstCurriculum` samples each task in proportion to its recent
failure rate: the share of its last ``window`` scored episodes that failed, counting one
failure before its first episode, so tasks never tried come first and a task is not taken
as solved after a few lucky episodes. A floor keeps solved tasks in rotation. Phones thus
spend their time where the policy fails most.

When it helps: the policy solves every task some of the time and its weak tasks should be
drilled. When it does not: a task the policy never solves takes most phones and, with a
0/1 reward, teaches nothing; the built-in ``learnability`` curriculum (weight ``p(1-p)``) is
made for that case. Compare them on the same schedule::

    darwin run examples/custom_curriculum.py --run-dir runs/hardest
    darwin run examples/custom_curriculum.py --set curriculum.name=learnability --set 'curriculum.kwargs={}' --run-dir runs/learnability
    darwin compare runs/hardest runs/learnability

Everything else is ``examples/spa_bench.py``'s default experiment (its warm start is shared
through the cache).

    darwin run examples/custom_curriculum.py --dry-run           # build and validate everything
    darwin run examples/custom_curriculum.py                     # train (~20 min on 2 cores)
    darwin run examples/custom_curriculum.py --set 'curriculum.kwargs={"window": 5, "floor": 0.2}'

Pitfalls: draw from the curriculum's own ``random.Random`` (seeded from ``seed``, saved in
the state), never the global generator, or a resumed run draws other tasks. A state that
names tasks the run does not have means the experiment's tasks changed since the checkpoint:
fail with that message rather than guess. The class is named by import path,
``f"{__name__}:HardestFirstCurriculum"``, which ``darwin run`` resolves because it imports
this file as the module ``darwin_experiment_custom_curriculum`` (docs/experiments.md).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from darwin.components import ComponentSpec
from darwin.curricula.base import Curriculum, EpisodeOutcome
from darwin.run.config import ExperimentConfig
from darwin.run.load import load_experiment
from darwin.types import Task


class HardestFirstCurriculum(Curriculum):
    """Samples tasks in proportion to ``max(floor, (failures + 1) / (episodes + 1))`` over
    each task's last ``window`` scored episodes.

    Args:
        tasks: the tasks to choose from (at least one, distinct ids; passed by the experiment).
        window: how many of a task's most recent scored episodes count (``>= 1``).
        floor: the smallest weight, in ``[0, 1]``: solved tasks keep this much.
        seed: seeds the curriculum's own generator (passed by the experiment).
    """

    def __init__(self, tasks: Sequence[Task], *, window: int = 10, floor: float = 0.1, seed: int = 0) -> None:
        self.check_arguments(tasks, window=window, floor=floor, seed=seed)
        self.tasks = list(tasks)
        self.window = window
        self.floor = float(floor)
        self.rng = random.Random(seed)
        self.outcomes: dict[str, deque[bool]] = {t.id: deque(maxlen=window) for t in self.tasks}

    @classmethod
    def check_arguments(cls, tasks: Sequence[Task], *, window: int = 10, floor: float = 0.1, seed: int = 0) -> None:
        """The values, checked by ``darwin run --dry-run`` without building the curriculum."""
        ids = [t.id for t in tasks]
        if not ids or len(set(ids)) != len(ids):
            raise ValueError(f"HardestFirstCurriculum needs at least one task and distinct task ids, got {ids}")
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(
                f"window must be an integer >= 1 (recent scored episodes per task, e.g. 10), got {window!r}"
            )
        if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0.0 <= floor <= 1.0:
            raise ValueError(
                f"floor must be a number in [0, 1] (the weight solved tasks keep, e.g. 0.1), got {floor!r}"
            )

    def failure_rate(self, task_id: str) -> float:
        """The task's smoothed recent failure rate: one failure counted before its first episode."""
        recent = self.outcomes[task_id]
        return (recent.count(False) + 1) / (len(recent) + 1)

    def weights(self) -> dict[str, float]:
        """The probability that :meth:`next_task` draws each task (logged after every update)."""
        raw = {t.id: max(self.floor, self.failure_rate(t.id)) for t in self.tasks}
        total = sum(raw.values())  # > 0: a task never scored weighs 1
        return {tid: w / total for tid, w in raw.items()}

    def next_task(self) -> Task:
        weights = self.weights()
        return self.rng.choices(self.tasks, weights=[weights[t.id] for t in self.tasks])[0]

    def update(self, task: Task, outcome: EpisodeOutcome) -> None:
        if task.id not in self.outcomes:
            raise ValueError(f"update() got task {task.id!r}, which this curriculum was not built with")
        if outcome.success is not None:  # unscored episodes say nothing about the task
            self.outcomes[task.id].append(bool(outcome.success))

    def state_dict(self) -> dict[str, Any]:
        version, internal, gauss = self.rng.getstate()
        return {
            "outcomes": {tid: [int(s) for s in recent] for tid, recent in self.outcomes.items()},
            "rng": [version, list(internal), gauss],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        unknown = sorted(set(state["outcomes"]) - set(self.outcomes))
        if unknown:
            raise ValueError(
                f"the saved curriculum state names tasks this run lacks: {', '.join(unknown)}; "
                "resume with the tasks the run started with"
            )
        for tid in self.outcomes:
            self.outcomes[tid] = deque((bool(s) for s in state["outcomes"].get(tid, [])), maxlen=self.window)
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))


def build(preset: str) -> ExperimentConfig:
    """``examples/spa_bench.py``'s ``preset`` with :class:`HardestFirstCurriculum` choosing tasks."""
    base = load_experiment(Path(__file__).with_name("spa_bench.py"), preset)
    return ExperimentConfig.model_validate(
        {
            **base.model_dump(),
            "name": f"custom_curriculum{'' if preset == 'default' else '_' + preset}",
            "curriculum": ComponentSpec(name=f"{__name__}:HardestFirstCurriculum", kwargs={"window": 10, "floor": 0.1}),
            "notes": "examples/spa_bench.py with tasks sampled in proportion to their recent failure rate (floor 0.1).",
        }
    )
