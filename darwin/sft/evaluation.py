"""Evaluation of a warm start: its success on SimPhones as ``darwin eval --agent
tiny:<checkpoint>`` measures it, through the RL run's policy pool
(:class:`~darwin.agents.pool.ActorPool`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from darwin.agents.warm_start import WarmStart
from darwin.envs.sim.perturb import PerturbationConfig
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
    samples: int = 3,
    greedy: bool = True,
    temperature: float = 1.0,
    seed: int = 0,
    perturbation: PerturbationConfig | None = None,
    on_episode: Callable[[Any], None] | None = None,
) -> EvalReport:
    """Success of a checkpoint on SimPhones seeded ``seed, seed+1, ...``, as ``darwin eval
    --agent tiny:<checkpoint> --samples SAMPLES`` measures it: the paired protocol
    (:func:`darwin.evaluate.evaluate_paired`), sampled at ``temperature``, plus one greedy
    episode per task and phone with ``greedy``."""
    # imported here, not at the top: darwin.agents.pool itself imports darwin.sft
    from darwin.agents.pool import ActorPool
    from darwin.evaluate import EvalProtocol, evaluate_paired, evaluation_phones
    from darwin.task_registry import resolve_tasks
    from darwin.workflows.step import LifecycleWorkflow, StepConfig

    chosen = resolve_tasks(tasks)
    protocol = EvalProtocol(samples=samples, greedy=greedy)
    pool = ActorPool(checkpoint, temperature=temperature, seed=seed, max_batch=min(phones, 64))
    envs = evaluation_phones(seed, phones, perturbation=perturbation)
    workflow = LifecycleWorkflow(config=StepConfig(observation_size=pool.observation_size))
    try:
        return await evaluate_paired(chosen, envs, pool, protocol, workflow, on_episode=on_episode)
    finally:
        await pool.aclose()


def success_rows(report: EvalReport) -> tuple[list[str], list[list[str]]]:
    """The columns and rows of a warm start's success table (``darwin sft``): per task and
    overall, greedy, sampled and pass@k in percent."""
    ks = sorted(report.summary().pass_at)

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}%"

    rows = []
    for task_id in [*report.task_ids, None]:
        summary = report.summary(task_id)
        rows.append(
            [
                task_id or "overall",
                pct(summary.greedy),
                pct(summary.sampled),
                *(pct(summary.pass_at.get(k)) for k in ks),
            ]
        )
    return ["task", "greedy", "sampled", *(f"pass@{k}" for k in ks)], rows
