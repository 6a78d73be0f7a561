"""Argument checks, success estimates, weighted draws and checkpoint helpers shared by the adaptive curricula."""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Container, Mapping, Sequence
from typing import Any, TypeGuard, TypeVar

from darwin.curricula.base import EpisodeOutcome
from darwin.types import Task

T = TypeVar("T")


def _is_real(x: object) -> TypeGuard[int | float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _check_fraction(name: str, value: object, hint: str) -> float:
    if not _is_real(value) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1] ({hint}), got {value!r}")
    return float(value)


def _check_int(name: str, value: object, *, minimum: int | None, hint: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or (minimum is not None and value < minimum):
        bound = "an integer" if minimum is None else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {bound} ({hint}), got {value!r}")
    return value


def _check_tasks(tasks: Sequence[Task], owner: str) -> list[Task]:
    tasks = list(tasks)
    if not tasks:
        raise ValueError(f"{owner} needs at least one task; pass e.g. darwin.task_registry.task_set('base8')")
    seen: set[str] = set()
    for t in tasks:
        if not isinstance(t, Task):
            raise ValueError(f"tasks must be darwin.types.Task objects, got {type(t).__name__}")
        if t.id in seen:
            raise ValueError(f"tasks must have distinct ids; {t.id!r} appears more than once (drop the duplicate)")
        seen.add(t.id)
    return tasks


def _lookup(table: dict[str, Any], task: Task, outcome: EpisodeOutcome, owner: str) -> Any:
    _check_outcome(table, task, outcome, owner)
    return table[task.id]


def _check_outcome(known: Container[str], task: Task, outcome: EpisodeOutcome, owner: str) -> None:
    """``update(task, outcome)`` arguments checked: a task the curriculum knows, its own outcome."""
    if task.id not in known:
        raise ValueError(
            f"update() got task {task.id!r}, which this {owner} was not built with; "
            "pass only tasks from next_task(), or add it to the curriculum's tasks"
        )
    if outcome.task_id != task.id:
        raise ValueError(
            f"update() got task {task.id!r} with an outcome for {outcome.task_id!r}; pass the outcome of that task's episode"
        )


def _rng_to_json(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def _rng_from_json(rng: random.Random, state: Sequence[Any]) -> None:
    version, internal, gauss = state
    rng.setstate((version, tuple(internal), gauss))


def _check_prior(prior_success: object, prior_weight: object) -> tuple[float, float]:
    """The prior of a :class:`SuccessWindows` estimate, checked."""
    success = _check_fraction("prior_success", prior_success, "e.g. 0.5")
    if not _is_real(prior_weight) or not math.isfinite(prior_weight) or prior_weight < 0:
        raise ValueError(
            f"prior_weight must be a finite number >= 0 (pseudo-episodes of the prior, e.g. 2.0), got {prior_weight!r}"
        )
    return success, float(prior_weight)


class SuccessWindows:
    """Each key's last ``window`` scored outcomes and a success rate shrunk towards a prior::

        p = (successes + prior_success * prior_weight) / (episodes + prior_weight)

    (``p = prior_success`` when both ``episodes`` and ``prior_weight`` are 0). Keys are task
    ids or template ids; the curricula that estimate success rates share this.

        >>> windows = SuccessWindows(["a", "b"], window=3, prior_success=0.5, prior_weight=2.0)
        >>> for outcome in (True, True, False, True):
        ...     windows.record("a", outcome)
        >>> windows.estimates()  # a: (2 + 1) / (3 + 2); b: the prior
        {'a': 0.6, 'b': 0.5}
    """

    def __init__(self, keys: Sequence[str], *, window: int, prior_success: float, prior_weight: float) -> None:
        self.window = window
        self.prior_success = prior_success
        self.prior_weight = prior_weight
        self._history: dict[str, deque[bool]] = {k: deque(maxlen=window) for k in keys}

    def __contains__(self, key: object) -> bool:
        return key in self._history

    def record(self, key: str, success: bool) -> None:
        self._history[key].append(bool(success))

    def estimate(self, key: str) -> float:
        history = self._history[key]
        n = len(history)
        if n + self.prior_weight == 0:
            return self.prior_success
        return (sum(history) + self.prior_success * self.prior_weight) / (n + self.prior_weight)

    def estimates(self) -> dict[str, float]:
        return {k: self.estimate(k) for k in self._history}

    def count(self, key: str) -> int:
        """How many scored outcomes the key's window holds."""
        return len(self._history[key])

    def clear(self, key: str) -> None:
        self._history[key].clear()

    def state_dict(self) -> dict[str, list[int]]:
        return {k: [int(s) for s in h] for k, h in self._history.items()}

    def load_state_dict(self, history: Mapping[str, Sequence[int]], what: str = "tasks") -> None:
        """Restore :meth:`state_dict` output; keys it does not mention start empty, a key it
        mentions that this object lacks raises ``ValueError``."""
        unknown = sorted(set(history) - set(self._history))
        if unknown:
            raise ValueError(
                f"state mentions {what} this curriculum lacks: {', '.join(unknown)}; "
                f"build the curriculum with the same {what} as the run that saved it"
            )
        for key in self._history:
            self._history[key] = deque((bool(s) for s in history.get(key, [])), maxlen=self.window)


def _normalised(ids: Sequence[str], raw: Sequence[float]) -> dict[str, float]:
    """``raw`` weights as probabilities by id; uniform when they sum to 0."""
    total = sum(raw)
    if total <= 0:
        return {i: 1.0 / len(ids) for i in ids}
    return {i: w / total for i, w in zip(ids, raw, strict=True)}


def _draw(rng: random.Random, items: Sequence[T], raw: Sequence[float]) -> T:
    """One item drawn in proportion to ``raw``; uniformly when the weights sum to 0."""
    if sum(raw) <= 0:
        return rng.choice(items)
    return rng.choices(items, weights=raw)[0]
