"""The built-in ``model_hindsight`` task synthesiser: goals a model reads off screenshots, verified by the LLM judge.

For phones without a JSON state. It reads only an exploration's screenshots and actions
(:func:`~darwin.hindsight.exploration.explore` with ``keep_screenshots=True``), never a
step's ``state``:

- **cuts**: the exploration is cut after every ``stride`` actions and after its last one
  (:func:`cut_points`); each cut is a candidate demonstration, the actions from the start to it;
- **goal**: for each cut, the model describer (:class:`~darwin.hindsight.model_describer.ModelDescriber`)
  sees the start screen, the screen at the cut and the actions between, and states what they
  achieved as one imperative sentence, or that nothing lasting changed;
- **verifier**: ``judge.goal`` (:class:`~darwin.predicates.JudgedGoalParams`: the goal sentence
  and ``samples``): the LLM judge (``llm_judge``, or ``composite`` fallback ``["rule",
  "llm_judge"]``, whose rule step leaves it to the judge) decides it by the strict majority of
  ``samples`` answers;
- **filters**: :func:`~darwin.hindsight.base.filter_tasks`: the same goal sentence as an
  earlier cut or a ``seen`` task is a duplicate (the earliest cut is kept); the difficulty band
  applies to the cut's length. "Already true at the start" is not asked: the describer is shown
  the start screen and asked only for what changed since, and asking the judge too would cost
  ``samples`` more requests per candidate.

A cut the describer found unchanged, or whose reply it refused, is no candidate; it stays in
:attr:`ModelSynthesis.cuts` with the reason. The model calls are asynchronous
(:meth:`ModelHindsightSynthesizer.asynthesize`); :meth:`~ModelHindsightSynthesizer.synthesize`
runs them to the end from code outside an event loop.

    >>> cut_points(25, stride=10)
    [10, 20, 25]
    >>> from darwin.components import ComponentSpec, build_component
    >>> synthesizer = build_component("task_synthesizer", ComponentSpec(name="model_hindsight", kwargs={
    ...     "describer": {"llm": {"model": "openai/my-vlm", "api_base": "http://127.0.0.1:8000/v1"}},
    ...     "stride": 5, "samples": 3}))
    >>> synthesizer.config.stride, synthesizer.band.min_steps
    (5, 1)
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from darwin.hindsight.base import DifficultyBand, Filtered, SynthesisedTask, TaskSynthesizer, filter_tasks
from darwin.hindsight.exploration import Exploration, ExplorationError
from darwin.hindsight.model_describer import (
    Description,
    ModelDescriber,
    ModelDescriberConfig,
    checked_describer_config,
    validated_config,
)
from darwin.predicates import JUDGED_GOAL, norm
from darwin.types import Task, VerifierSpec

__all__ = ["Cut", "ModelHindsightConfig", "ModelHindsightSynthesizer", "ModelSynthesis", "cut_points"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class ModelHindsightConfig(BaseModel):
    """Settings of :class:`ModelHindsightSynthesizer` (validated when built; frozen; holds no secrets)."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    describer: ModelDescriberConfig = Field(
        default_factory=ModelDescriberConfig, description="the model describer (its llm, what it is shown)"
    )
    stride: int = Field(default=10, ge=1, le=100_000, description="cut the exploration after every this many actions")
    samples: int = Field(
        default=3, ge=1, le=15, description="the judge's answers per verdict on a synthesised task (strict majority)"
    )
    min_steps: int = Field(default=1, ge=1, description="keep tasks whose demonstration has at least this many actions")
    max_steps: int | None = Field(default=None, ge=1, description="... and at most this many (None: no bound)")

    @model_validator(mode="after")
    def _band(self) -> ModelHindsightConfig:
        if self.max_steps is not None and self.max_steps < self.min_steps:
            raise ValueError(f"max_steps ({self.max_steps}) is below min_steps ({self.min_steps})")
        return self


def cut_points(steps: int, stride: int) -> list[int]:
    """Where an exploration of ``steps`` actions is cut: after every ``stride`` actions and
    after the last one (the number of actions before each cut, ascending)."""
    return sorted({*range(stride, steps + 1, stride), steps}) if steps > 0 else []


@dataclass(frozen=True)
class Cut:
    """One cut of an exploration: ``steps`` actions from the start, and what the describer made of them."""

    steps: int
    description: Description


@dataclass(frozen=True)
class ModelSynthesis(Filtered):
    """The filtered tasks, and every cut with the describer's answer (goal, unchanged or refused, with why)."""

    cuts: tuple[Cut, ...] = ()

    @property
    def undescribed(self) -> tuple[Cut, ...]:
        """The cuts that gave no goal: nothing lasting changed, or the reply was refused."""
        return tuple(c for c in self.cuts if c.description.kind != "goal")

    @property
    def prompt_tokens(self) -> int:
        """The describer's prompt tokens over every reply (as the provider reported them)."""
        return sum(c.description.completion.prompt_tokens or 0 for c in self.cuts if c.description.completion)

    @property
    def completion_tokens(self) -> int:
        """The describer's completion tokens over every reply."""
        return sum(c.description.completion.completion_tokens or 0 for c in self.cuts if c.description.completion)

    @property
    def cost_usd(self) -> float | None:
        """The describer's price in US dollars (LiteLLM's price map); ``None`` when no reply was priced."""
        priced = [
            c.description.completion.cost_usd
            for c in self.cuts
            if c.description.completion is not None and c.description.completion.cost_usd is not None
        ]
        return sum(priced) if priced else None


def _slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_") or "app"


def _blocking(coro: Coroutine[Any, Any, T], method: str) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    coro.close()
    raise RuntimeError(f"{method} waits for model calls and cannot run inside an event loop: await a{method} instead")


class ModelHindsightSynthesizer(TaskSynthesizer):
    """Judge-verified hindsight tasks from an exploration's screenshots (see the module docstring).

    Args:
        config: a :class:`ModelHindsightConfig` (or its fields as a dict); or leave it out and
            pass its fields as keywords, as an experiment's ``ComponentSpec(name="model_hindsight",
            kwargs={...})`` does.

    Raises :class:`~darwin.hindsight.model_describer.DescriberConfigError` for a bad configuration.
    """

    def __init__(self, config: ModelHindsightConfig | Mapping[str, Any] | None = None, **fields: Any) -> None:
        self.config = self._checked_config(config, fields)
        self.band = DifficultyBand(min_steps=self.config.min_steps, max_steps=self.config.max_steps)
        self.describer = ModelDescriber(self.config.describer)

    @staticmethod
    def _checked_config(
        config: ModelHindsightConfig | Mapping[str, Any] | None, fields: Mapping[str, Any]
    ) -> ModelHindsightConfig:
        checked = validated_config(ModelHindsightConfig, config, fields, "model_hindsight")
        checked_describer_config(checked.describer, {})  # the describer's model name, before any request
        return checked

    @classmethod
    def check_arguments(cls, config: ModelHindsightConfig | Mapping[str, Any] | None = None, **fields: Any) -> None:
        """The settings, with no model reached (``darwin run --dry-run``)."""
        cls._checked_config(config, fields)

    async def adescribe(self, exploration: Exploration) -> tuple[Cut, ...]:
        """Each cut of ``exploration`` (:func:`cut_points`) with the describer's answer, in order.

        Raises :class:`~darwin.hindsight.exploration.ExplorationError` when the exploration kept
        no screenshots."""
        start = exploration.start_screenshot
        points = cut_points(len(exploration.steps), self.config.stride)
        if start is None or any(exploration.steps[n - 1].screenshot is None for n in points):
            raise ExplorationError(
                f"the exploration of {exploration.app} kept no screenshots; the model describer reads screens: "
                "explore(..., keep_screenshots=True)"
            )
        asked = []
        for n in points:
            after = exploration.steps[n - 1].screenshot
            assert after is not None
            asked.append(self.describer.describe(exploration.app, start, after, exploration.actions(n)))
        descriptions = await asyncio.gather(*asked)
        return tuple(Cut(n, d) for n, d in zip(points, descriptions, strict=True))

    def _task(self, exploration: Exploration, goal: str) -> Task:
        digest = hashlib.blake2b(norm(goal).encode(), digest_size=5).hexdigest()
        return Task(
            id=f"model_hindsight.{_slug(exploration.app)}.{digest}",
            instruction=goal,
            app=exploration.app,
            verifier=VerifierSpec(predicate=JUDGED_GOAL, params={"goal": goal, "samples": self.config.samples}),
            source="model_hindsight",
        )

    def _candidates(self, exploration: Exploration, cuts: Sequence[Cut]) -> list[SynthesisedTask]:
        found = []
        for cut in cuts:
            goal = cut.description.goal
            if goal is not None:
                task = self._task(exploration, goal)
                found.append(SynthesisedTask(task, exploration.actions(cut.steps), exploration.start_state))
        refused = [c for c in cuts if c.description.kind == "refused"]
        if refused:
            logger.warning(
                "model_hindsight: %d of %d cuts of the %s exploration gave no goal (first: after %d actions: %s)",
                len(refused),
                len(cuts),
                exploration.app,
                refused[0].steps,
                refused[0].description.text,
            )
        return found

    async def acandidates(self, exploration: Exploration) -> list[SynthesisedTask]:
        """Every cut's task, unfiltered, in cut order (see :meth:`asynthesize` for the cuts without one)."""
        return self._candidates(exploration, await self.adescribe(exploration))

    async def asynthesize(self, exploration: Exploration, seen: Iterable[VerifierSpec] = ()) -> ModelSynthesis:
        """The candidates through :func:`~darwin.hindsight.base.filter_tasks`, and every cut with its answer."""
        cuts = await self.adescribe(exploration)
        filtered = filter_tasks(self._candidates(exploration, cuts), self.band, seen)
        return ModelSynthesis(kept=filtered.kept, rejected=filtered.rejected, cuts=cuts)

    def candidates(self, exploration: Exploration) -> list[SynthesisedTask]:
        """:meth:`acandidates`, waited for (outside an event loop only)."""
        return _blocking(self.acandidates(exploration), "candidates")

    def synthesize(self, exploration: Exploration, seen: Iterable[VerifierSpec] = ()) -> ModelSynthesis:
        """:meth:`asynthesize`, waited for (outside an event loop only)."""
        return _blocking(self.asynthesize(exploration, seen), "synthesize")
