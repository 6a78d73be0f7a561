"""Evaluation of a warm start: its success on SimPhones as ``darwin eval --agent
tiny:<checkpoint>`` measures it, through the RL run's policy pool
(:class:`~darwin.agents.pool.ActorPool`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from darwin.envs.sim.perturb import PerturbationConfig
from darwin.sft.checkpoint import WarmStart
from darwin.types import ParseError, Transition

if TYPE_CHECKING:
    from darwin.evaluate import EvalReport


def parse_failures(transitions: Sequence[Transition]) -> int:
    """Steps whose model output did not parse (for reports)."""
    return sum(isinstance(t.decision.parse_error, ParseError) for t in transitions)


async def evaluate_warm_start(
    checkpoint: str | os.PathLike[str] | WarmStart,
    tasks: Sequence[str] = ("base8",),
    *,
    phones: int = 8,
    episodes: int = 3,
    temperature: float = 1.0,
    seed: int = 0,
    perturbation: PerturbationConfig | None = None,
    on_episode: Callable[[Any], None] | None = None,
) -> EvalReport:
    """Success of a checkpoint on SimPhones seeded ``seed, seed+1, ...``, as ``darwin eval
    --agent tiny:<checkpoint>`` measures it (sampled at ``temperature``; 0 = greedy)."""
    # imported here, not at the top: darwin.agents.pool itself imports darwin.sft
    from darwin.agents.pool import ActorPool
    from darwin.evaluate import evaluate, evaluation_phones
    from darwin.tasks import resolve_tasks
    from darwin.workflows.step import LifecycleWorkflow, StepConfig

    chosen = resolve_tasks(tasks)
    pool = ActorPool(checkpoint, temperature=temperature, seed=seed, max_batch=min(phones, 64))
    envs = evaluation_phones(seed, phones, perturbation=perturbation, prefix="sim")
    workflow = LifecycleWorkflow(config=StepConfig(observation_size=pool.observation_size))
    try:
        return await evaluate(chosen, envs, pool, episodes, workflow, on_episode=on_episode)
    finally:
        await pool.aclose()
