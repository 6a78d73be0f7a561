"""Task synthesisers (the ``task_synthesizer`` component kind): explorations in, tasks out.

A synthesiser turns one :class:`~darwin.hindsight.exploration.Exploration` into candidate
tasks (:meth:`TaskSynthesizer.candidates`): each an ordinary :class:`~darwin.types.Task` (goal
text, a rule verifier), the explorer's actions that reached the goal (its demonstration), and
the state they start from. :meth:`TaskSynthesizer.synthesize` passes the candidates through
:func:`filter_tasks`: a goal already true at the start, a duplicate verifier, or a
demonstration outside the difficulty band is dropped, with the reason kept. Write one by
overriding :meth:`~TaskSynthesizer.candidates`; an experiment names it by import path::

    >>> import asyncio
    >>> from darwin.algos.task_metrics import state_diff
    >>> from darwin.envs.sim.env import SimPhoneEnv
    >>> from darwin.hindsight.base import SynthesisedTask, TaskSynthesizer
    >>> from darwin.hindsight.exploration import explore
    >>> from darwin.predicates import lookup
    >>> from darwin.types import Task, VerifierSpec
    >>> class WholeEnd(TaskSynthesizer):
    ...     '''One task: every path changed by the end of the exploration, at once.'''
    ...     def candidates(self, exploration):
    ...         start, states = exploration.states("WholeEnd")
    ...         values = {p: lookup(states[-1], p)[1] for p in state_diff(start, states[-1])}
    ...         if not values:
    ...             return []
    ...         task = Task(id="whole-end", instruction=f"{exploration.app}: reach the state I reached.",
    ...                     app=exploration.app, verifier=VerifierSpec(predicate="state.equals",
    ...                     params={"values": values}))
    ...         return [SynthesisedTask(task, exploration.actions(len(exploration.steps)), exploration.start_state)]
    >>> run = asyncio.run(explore(SimPhoneEnv(seed=0), "Settings", steps=30, seed=1))
    >>> [t.task.id for t in WholeEnd().synthesize(run).kept]
    ['whole-end']
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import orjson

from darwin.actions import Action
from darwin.hindsight.exploration import Exploration
from darwin.predicates import State, StateCannotDecide, evaluate
from darwin.types import Task, VerifierSpec

__all__ = [
    "DifficultyBand",
    "Filtered",
    "Rejected",
    "SynthesisedTask",
    "TaskSynthesizer",
    "filter_tasks",
    "spec_key",
    "verifier_holds",
]


@dataclass(frozen=True)
class SynthesisedTask:
    """A task found in an exploration, with the explorer's own way to it.

    ``demonstration`` played from ``start_state`` (the exploration's start) reaches a state where
    the task's verifier holds; the task is meant to start from that state too (``None``: the
    phone had no state probe, and the start is known only by its screen).
    """

    task: Task
    demonstration: tuple[Action, ...]
    start_state: State | None

    @property
    def steps(self) -> int:
        """The explorer's steps to the goal: an upper bound on the task's difficulty in actions."""
        return len(self.demonstration)


@dataclass(frozen=True)
class DifficultyBand:
    """Keep tasks the explorer reached in ``min_steps`` to ``max_steps`` actions (``None``: no upper bound)."""

    min_steps: int = 1
    max_steps: int | None = None

    def __post_init__(self) -> None:
        if self.min_steps < 1:
            raise ValueError(f"DifficultyBand.min_steps must be >= 1, got {self.min_steps}")
        if self.max_steps is not None and self.max_steps < self.min_steps:
            raise ValueError(f"DifficultyBand.max_steps ({self.max_steps}) is below min_steps ({self.min_steps})")


RejectReason = Literal["already_true", "duplicate", "too_easy", "too_hard"]


@dataclass(frozen=True)
class Rejected:
    """A candidate the filters dropped, and why."""

    candidate: SynthesisedTask
    reason: RejectReason


@dataclass(frozen=True)
class Filtered:
    """The candidates kept, in order, and those dropped."""

    kept: tuple[SynthesisedTask, ...]
    rejected: tuple[Rejected, ...]


def spec_key(spec: VerifierSpec) -> bytes:
    """Two verifiers check the same thing when their keys are equal (predicate and params, key order aside)."""
    return orjson.dumps(spec.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)


def filter_tasks(
    candidates: Iterable[SynthesisedTask], band: DifficultyBand = DifficultyBand(), seen: Iterable[VerifierSpec] = ()
) -> Filtered:
    """Drop a candidate whose verifier already holds at its start state, that repeats the
    verifier of an earlier candidate or of ``seen`` (tasks from earlier explorations), or whose
    demonstration is shorter than ``band.min_steps`` or longer than ``band.max_steps``.

    A verifier the state cannot decide (``judge.goal``: a goal in words for the LLM judge) is
    never found already true here; its duplicates are the same goal sentence."""
    known = {spec_key(spec) for spec in seen}
    kept: list[SynthesisedTask] = []
    rejected: list[Rejected] = []
    for candidate in candidates:
        reason: RejectReason | None = None
        key = spec_key(candidate.task.verifier)
        if verifier_holds(candidate.task.verifier, candidate.start_state):
            reason = "already_true"
        elif key in known:
            reason = "duplicate"
        elif candidate.steps < band.min_steps:
            reason = "too_easy"
        elif band.max_steps is not None and candidate.steps > band.max_steps:
            reason = "too_hard"
        if reason is None:
            known.add(key)
            kept.append(candidate)
        else:
            rejected.append(Rejected(candidate, reason))
    return Filtered(kept=tuple(kept), rejected=tuple(rejected))


def verifier_holds(spec: VerifierSpec, state: State | None) -> bool:
    """Whether ``spec`` holds in ``state`` as far as the state can tell (a goal it cannot decide,
    ``judge.goal`` or ``screen.text``, and a phone without a probe: no)."""
    if state is None:
        return False  # a phone without a state probe: only a judge on the start screen could tell
    try:
        return evaluate(spec, state).success
    except StateCannotDecide:
        return False  # only a judge on the start screen could tell (not asked here)


class TaskSynthesizer(ABC):
    """Turns an exploration into tasks; override :meth:`candidates` (see the module docstring)."""

    band: DifficultyBand = DifficultyBand()
    """The difficulty band :meth:`synthesize` keeps; a subclass sets its own in ``__init__``."""

    @abstractmethod
    def candidates(self, exploration: Exploration) -> Sequence[SynthesisedTask]:
        """Every task the exploration suggests, unfiltered, easiest first."""

    def synthesize(self, exploration: Exploration, seen: Iterable[VerifierSpec] = ()) -> Filtered:
        """:meth:`candidates` through :func:`filter_tasks` with :attr:`band` (``seen``: verifiers already held)."""
        return filter_tasks(self.candidates(exploration), self.band, seen)
