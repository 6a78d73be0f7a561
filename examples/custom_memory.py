"""Extension point: the memory, which chooses what of the episode so far goes into the prompt.

A memory is a :class:`darwin.memory.base.Memory` subclass. Its contract:

- ``select(history) -> list[Transition]`` (the one required method): the past transitions to
  show, oldest first, taken from ``history``, the actor's steps of the phase so far (the tiny
  agent leaves unparseable steps out of it, unless its ``invalid_history`` is ``"mark"``);
- ``window(history, render, reserved_tokens=..., image_tokens=...)``: what the agent calls;
  the default renders :meth:`select`'s transitions as text with no past screenshots, and
  ``SlidingWindowMemory`` overrides it to add past screenshots and a prompt-token budget;
- optional hooks: ``start_episode(task)`` (default: ``reset()``), ``observe(history)``
  (awaited before each prompt, for work such as summarising with a model) and
  ``end_episode(trajectory)`` (for memories that learn across episodes);
- the experiment builds one memory per phone as ``cls(**kwargs)``; with ``memory=None`` the
  agent keeps the memory its warm start was trained with (a sliding window of 8).

This file's :class:`FirstAndRecentMemory` shows the episode's first step and the ``recent``
most recent ones. The first action usually opens the app, so it keeps in view where the
episode started, which a plain window of ``N`` loses after ``N`` steps, while the prompt
stays at most ``recent + 1`` entries long whatever the horizon.

The warm start was trained on prompts from its sliding window, so another memory changes what
the model reads; whether that helps is an experiment. Everything else is
``examples/spa_bench.py``'s default experiment (its warm start is shared through the cache):

    darwin run examples/custom_memory.py --dry-run                     # build and validate everything
    darwin run examples/custom_memory.py --run-dir runs/first_recent   # train (~20 min on 2 cores)
    darwin run examples/custom_memory.py --set memory=null --run-dir runs/window   # the warm start's own memory
    darwin compare runs/first_recent runs/window
    darwin run examples/custom_memory.py --set 'memory.kwargs={"recent": 2}'

Pitfalls: return transitions from ``history`` (the agent renders them), oldest first, without
duplicates. One memory object serves one phone, episode after episode: clear per-episode
state in ``reset``. The class is named by import path, ``f"{__name__}:FirstAndRecentMemory"``,
which ``darwin run`` resolves because it imports this file as the module
``darwin_experiment_custom_memory`` (docs/experiments.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from darwin.components import ComponentSpec
from darwin.memory.base import Memory
from darwin.run.config import ExperimentConfig
from darwin.run.load import load_experiment
from darwin.types import Transition


class FirstAndRecentMemory(Memory):
    """The episode's first step and the ``recent`` most recent steps, as text.

    Args:
        recent: how many of the most recent steps to show besides the first (``>= 0``).
    """

    def __init__(self, recent: int = 3) -> None:
        self.check_arguments(recent=recent)
        self.recent = recent

    @classmethod
    def check_arguments(cls, recent: int = 3) -> None:
        """The value, checked by ``darwin run --dry-run`` without building the memory."""
        if isinstance(recent, bool) or not isinstance(recent, int) or recent < 0:
            raise ValueError(f"recent must be an integer >= 0 (steps shown besides the first, e.g. 3), got {recent!r}")

    def select(self, history: Sequence[Transition]) -> list[Transition]:
        if len(history) <= self.recent + 1:
            return list(history)
        return [history[0], *history[len(history) - self.recent :]]


def build(preset: str) -> ExperimentConfig:
    """``examples/spa_bench.py``'s ``preset`` with :class:`FirstAndRecentMemory` in every agent."""
    base = load_experiment(Path(__file__).with_name("spa_bench.py"), preset)
    return ExperimentConfig.model_validate(
        {
            **base.model_dump(),
            "name": f"custom_memory{'' if preset == 'default' else '_' + preset}",
            "memory": ComponentSpec(name=f"{__name__}:FirstAndRecentMemory", kwargs={"recent": 3}),
            "notes": "examples/spa_bench.py with a memory of the first step and the 3 most recent ones.",
        }
    )
