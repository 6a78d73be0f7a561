"""Reverse curriculum (Backplay, reverse curriculum generation): episodes start late in a
demonstration and move back as the policy succeeds from there.

A task the warm start never solves teaches nothing: every episode fails, and with per-task
whitening all its advantages are zero. Starting it one step before the goal gives successes
to learn from; once the task's success from ``remaining`` steps before the end reaches
``advance_at`` over the last ``window`` scored episodes, its episodes start ``step`` steps
earlier, until they start at the beginning (the demonstration was no longer than
``remaining``), where the task stays. Per task, independently. The demonstration is the
simulator's shortest plan from the phone's own state (:class:`~darwin.types.DemoStart`), so it
suits SimPhones, in process or served over ADB. Evaluations always start at the beginning (they
never go through the curriculum). Tasks with a setup phase always start at the beginning.

    >>> from darwin.curricula.base import EpisodeOutcome
    >>> from darwin.curricula.reverse import ReverseCurriculum
    >>> from darwin.task_registry import task_set
    >>> from darwin.types import TerminationReason
    >>> cur = ReverseCurriculum(task_set("base8")[:1], window=2, advance_at=0.5)
    >>> task = cur.next_task()
    >>> task.start.remaining
    1
    >>> win = EpisodeOutcome(task.id, True, 1, TerminationReason.SUCCESS, start_step=4)
    >>> cur.update(task, win); cur.update(task, win)
    >>> cur.remaining()
    {'amazon_0': 2}
    >>> task = cur.next_task()  # two steps before the end now
    >>> cur.update(task, EpisodeOutcome(task.id, True, 3, TerminationReason.SUCCESS, start_step=0))
    >>> cur.remaining(), cur.next_task().start is None  # the demonstration was no longer: at the beginning
    ({'amazon_0': None}, True)

Backplay: Resnick et al. 2018; reverse curriculum generation: Florensa et al. 2017.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from typing import Any

from darwin.curricula._util import _check_fraction, _check_int, _check_tasks, _rng_from_json, _rng_to_json
from darwin.curricula.base import Curriculum, EpisodeOutcome
from darwin.types import DemoStart, Task


class ReverseCurriculum(Curriculum):
    """Draws tasks uniformly; each task's episodes start ``remaining`` steps before the end of
    its demonstration, and ``remaining`` grows by ``step`` each time the task's success over
    its last ``window`` scored episodes from there reaches ``advance_at``.

    Args:
        tasks: the tasks (at least one).
        seed: seeds this curriculum's own RNG.
        first_remaining: the demonstration steps left to the agent at first.
        step: how many steps earlier the start moves on each advance.
        window: scored episodes from the current start that decide an advance.
        advance_at: the success rate over the window that moves the start back.
        from_start_fraction: the share of episodes that start at the beginning anyway (the task
            as evaluated), besides those of tasks that reached it.
        inside_below: if set, every task starts at the beginning at first, and only a task whose
            success over its first ``window`` scored episodes from the beginning is below this
            starts inside the demonstration from then on; the others stay at the beginning. The
            tasks the policy can already do then keep their whole budget (``None``: every task
            starts inside at once).
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        seed: int = 0,
        first_remaining: int = 1,
        step: int = 1,
        window: int = 6,
        advance_at: float = 0.5,
        from_start_fraction: float = 0.0,
        inside_below: float | None = None,
    ) -> None:
        self.tasks = _check_tasks(tasks, "ReverseCurriculum")
        hint = "see docs/curricula.md, 'Reverse curriculum'"
        self.first_remaining = _check_int("first_remaining", first_remaining, minimum=1, hint=hint)
        self.step = _check_int("step", step, minimum=1, hint=hint)
        self.window = _check_int("window", window, minimum=1, hint=hint)
        self.advance_at = _check_fraction("advance_at", advance_at, hint)
        self.from_start_fraction = _check_fraction("from_start_fraction", from_start_fraction, hint)
        self.inside_below = None if inside_below is None else _check_fraction("inside_below", inside_below, hint)
        self.rng = random.Random(seed)
        # tasks still measured from the beginning before the curriculum decides where they start
        self._probing: set[str] = (
            set() if self.inside_below is None else {t.id for t in self.tasks if not _has_setup(t)}
        )
        # None: the task starts at the beginning (reached it, has a setup phase, or is probing)
        self._remaining: dict[str, int | None] = {
            t.id: None if _has_setup(t) or t.id in self._probing else self.first_remaining for t in self.tasks
        }
        self._recent: dict[str, deque[bool]] = {t.id: deque(maxlen=self.window) for t in self.tasks}

    def remaining(self) -> dict[str, int | None]:
        """Per task: the demonstration steps its episodes leave to the agent (``None``: it starts at the beginning)."""
        return dict(self._remaining)

    def next_task(self) -> Task:
        task = self.rng.choice(self.tasks)
        remaining = self._remaining[task.id]
        if remaining is None or self.rng.random() < self.from_start_fraction:
            return task
        return task.model_copy(update={"start": DemoStart(remaining=remaining)})

    def probing(self) -> set[str]:
        """The tasks whose first episodes from the beginning are still being scored (``inside_below``)."""
        return set(self._probing)

    def update(self, task: Task, outcome: EpisodeOutcome) -> None:
        if task.id in self._probing:
            self._probe(task, outcome)
            return
        remaining = self._remaining.get(task.id)
        if remaining is None or task.start is None or task.start.remaining != remaining or outcome.success is None:
            return  # from the beginning, from an older start, or not scored: says nothing about this start
        if outcome.start_step == 0:  # the whole demonstration fit in `remaining`: this is the beginning
            self._remaining[task.id] = None
            return
        recent = self._recent[task.id]
        recent.append(outcome.success)
        if len(recent) == self.window and sum(recent) / self.window >= self.advance_at:
            self._remaining[task.id] = remaining + self.step
            recent.clear()

    def _probe(self, task: Task, outcome: EpisodeOutcome) -> None:
        if task.start is not None or outcome.success is None:
            return
        recent = self._recent[task.id]
        recent.append(outcome.success)
        if len(recent) < self.window:
            return
        assert self.inside_below is not None  # only set when probing
        self._probing.discard(task.id)
        if sum(recent) / self.window < self.inside_below:
            self._remaining[task.id] = self.first_remaining
        recent.clear()

    def state_dict(self) -> dict[str, Any]:
        return {
            "probing": sorted(self._probing),
            "remaining": dict(self._remaining),
            "recent": {k: list(v) for k, v in self._recent.items()},
            "rng": _rng_to_json(self.rng),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._probing = set(state["probing"])
        self._remaining.update({k: None if v is None else int(v) for k, v in state["remaining"].items()})
        for k, values in state["recent"].items():
            self._recent[k] = deque((bool(v) for v in values), maxlen=self.window)
        _rng_from_json(self.rng, state["rng"])


def _has_setup(task: Task) -> bool:
    return task.lifecycle is not None and task.lifecycle.setup is not None
