"""Evaluation: run tasks on N phones concurrently, verify, store everything, summarise.

>>> import asyncio
>>> from darwin.evaluate import evaluate
>>> from darwin.envs.sim.env import SimPhoneEnv
>>> from darwin.agents.scripted import OracleActor
>>> from darwin.tasks import task_set
>>> report = asyncio.run(evaluate(task_set("base8")[:2], [SimPhoneEnv(seed=0)], lambda i: OracleActor()))
>>> report.overall.successes, report.overall.episodes
(2, 2)
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import JsonValue

from darwin.agents.base import Actor
from darwin.algos.task_metrics import Stratum, TaskMetrics, strata, stratum_counts, summarize_task
from darwin.envs.base import PhoneEnv
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.rollout import RolloutEngine
from darwin.store import RunStore, SuccessStats
from darwin.types import Outcome, Task, Trajectory
from darwin.workflows.base import Workflow

if TYPE_CHECKING:
    from darwin.experiment import ExperimentConfig

logger = logging.getLogger(__name__)


STATS_FIELD: dict[Outcome, str] = {
    Outcome.SUCCESS: "successes",
    Outcome.FAILURE: "failures",
    Outcome.UNVERIFIED: "unverified",
    Outcome.INFRASTRUCTURE: "infra_truncated",
    Outcome.ERROR: "errors",
    Outcome.ALREADY_DONE: "already_done",
    Outcome.UNFINISHED: "unfinished",
}
"""The :class:`SuccessStats` field each :class:`~darwin.types.Outcome` counts in."""


def summarize(trajectories: Sequence[Trajectory]) -> SuccessStats:
    """Outcome counts of some episodes (infrastructure truncations never count as failures)."""
    counts = Counter(STATS_FIELD[t.outcome] for t in trajectories)
    return SuccessStats(episodes=len(trajectories), **counts)


@dataclass(frozen=True)
class EvalResult:
    """One sampled evaluation of the policy on the evaluation phones (``eval.json``)."""

    label: str
    """``warm_start`` (before RL) or ``final`` (after the last update)."""
    policy_version: int
    updates: int
    """Learner updates done when it ran (0 for the warm start)."""
    successes: int
    episodes: int
    """Verified episodes (infrastructure truncations are not counted either way)."""
    per_task: dict[str, float]
    wall_s: float
    per_set: dict[str, float] = field(default_factory=dict)
    """Success rate of each evaluated set: ``train`` (the training tasks) and every
    ``evaluation.task_sets`` entry (verified episodes only)."""
    task_metrics: dict[str, TaskMetrics] = field(default_factory=dict)
    """Per task: SR, PR, side effects, false completions, over-time and the L1-L4 stratum
    (:class:`darwin.algos.task_metrics.TaskMetrics`, as ``darwin eval`` prints them)."""

    @property
    def success_rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0


@dataclass
class EvalReport:
    """Every trajectory of an evaluation, with per-task and overall summaries."""

    run_id: str
    task_ids: list[str]
    trajectories: list[Trajectory] = field(default_factory=list)

    @property
    def per_task(self) -> dict[str, SuccessStats]:
        return {tid: summarize([t for t in self.trajectories if t.task.id == tid]) for tid in self.task_ids}

    @property
    def overall(self) -> SuccessStats:
        return summarize(self.trajectories)

    @property
    def task_metrics(self) -> dict[str, TaskMetrics]:
        """Per task: SR, PR, side effects, false completions, over-time (:mod:`darwin.algos.task_metrics`)."""
        return {tid: self.metrics_of(tid) for tid in self.task_ids}

    def metrics_of(self, task_id: str | None = None) -> TaskMetrics:
        """One task's :class:`TaskMetrics` (all episodes together for ``None``); unscored episodes are left out."""
        return summarize_task(
            (t.outcome.scored, t.metrics) for t in self.trajectories if task_id is None or t.task.id == task_id
        )

    @property
    def strata(self) -> dict[str, Stratum]:
        """MobileGym's L1-L4 stratum of each task for this agent (tasks without SR or PR left out)."""
        return strata(self.task_metrics)

    def to_json(self) -> dict[str, JsonValue]:
        """Per task and overall: outcome counts, success rate, mean steps and the episode metrics (``darwin eval --json``)."""

        def entry(stats: SuccessStats, metrics: TaskMetrics, task_id: str | None) -> dict[str, JsonValue]:
            return {
                **dataclasses.asdict(stats),
                "success_rate": stats.success_rate,
                "mean_steps": self.mean_steps(task_id),
                "metrics": metrics.to_json(),
            }

        per_task = {tid: entry(stats, self.metrics_of(tid), tid) for tid, stats in self.per_task.items()}
        return {
            "per_task": per_task,
            "overall": entry(self.overall, self.metrics_of(None), None),
            "strata": dict(self.strata),
            "strata_counts": dict(stratum_counts(self.strata)),
        }

    def mean_steps(self, task_id: str | None = None) -> float:
        chosen = [len(t) for t in self.trajectories if task_id is None or t.task.id == task_id]
        return sum(chosen) / len(chosen) if chosen else 0.0


def evaluation_phones(
    first_seed: int,
    count: int,
    *,
    perturbation: PerturbationConfig | None = None,
    locale: str = "auto",
    prefix: str = "eval",
) -> list[PhoneEnv]:
    """The SimPhones an evaluation plays on: seeded ``first_seed, first_seed + 1, ...``, named
    ``<prefix>-<seed>``, each reset to its initial state before every episode.

    This is the one phone-state rule of every evaluation: ``darwin eval``, ``darwin sft``'s
    evaluation and ``darwin run``'s evaluations build their phones here, so one checkpoint on
    the same seeds gets the same numbers from each (training phones follow
    ``phones.reset_between_episodes`` instead). ``locale="auto"`` plays Chinese task instances
    on a Chinese UI.
    """
    from darwin.envs.sim.env import SimPhoneEnv

    return [
        SimPhoneEnv(
            seed=first_seed + i,
            perturbation=perturbation or PerturbationConfig(),
            name=f"{prefix}-{first_seed + i}",
            reset_between_episodes=True,
            locale=locale,
        )
        for i in range(count)
    ]


async def evaluate(
    tasks: Sequence[Task],
    envs: Sequence[PhoneEnv],
    make_actor: Callable[[int], Actor],
    episodes_per_task: int = 1,
    workflow: Workflow | None = None,
    store: RunStore | None = None,
    run_id: str | None = None,
    on_episode: Callable[[Trajectory], None] | None = None,
) -> EvalReport:
    """Run every task ``episodes_per_task`` times, spread over ``envs`` (one worker each).

    Phones never wait for each other: a free phone takes the next pending episode. Between
    episodes each phone follows its own rule (:func:`evaluation_phones` reset to their
    initial state; a phone built with ``reset_between_episodes=False`` only returns home and
    keeps its state, paper section 3.2).
    ``make_actor(i)`` builds the actor for phone ``i``. This is the training engine
    (:meth:`darwin.rollout.RolloutEngine.run_episodes`) fed a fixed queue with no learner:
    episodes are played, stored and verified exactly as in training.
    """
    if not envs:
        raise ValueError("evaluate needs at least one phone")
    report = EvalReport(run_id=run_id or uuid.uuid4().hex, task_ids=[t.id for t in tasks])
    engine = RolloutEngine(
        envs, make_actor, workflow=workflow, store=store, run_id=report.run_id if store else None, on_episode=on_episode
    )
    report.trajectories = await engine.run_episodes([t for _ in range(episodes_per_task) for t in tasks])
    return report


async def evaluate_experiment(
    config: ExperimentConfig,
    label: str,
    tasks: Sequence[Task],
    envs: Sequence[PhoneEnv],
    make_actor: Callable[[int], Actor],
    workflow: Workflow,
    version: int,
    updates: int,
    store: RunStore | None = None,
    run_id: str | None = None,
) -> EvalResult:
    """An experiment's sampled evaluation (``darwin run`` before RL and after the last
    update): every training task and every ``evaluation.task_sets`` task
    ``evaluation.episodes_per_task`` times, stored (with ``store``) like training episodes.
    The headline success rate is the training tasks' (what the run trains on); each set's
    rate is in ``per_set``."""
    started = time.perf_counter()
    groups = {"train": list(tasks), **config.resolve_eval_sets()}
    every = list({t.id: t for group in groups.values() for t in group}.values())
    report = await evaluate(every, envs, make_actor, config.evaluation.episodes_per_task, workflow, store, run_id)
    per_task_stats = report.per_task
    per_task = {tid: st.success_rate for tid, st in per_task_stats.items() if st.success_rate is not None}
    per_set = {}
    for name, group in groups.items():
        verified = sum(per_task_stats[t.id].verified for t in group if t.id in per_task_stats)
        if verified:
            per_set[name] = sum(per_task_stats[t.id].successes for t in group if t.id in per_task_stats) / verified
    train_ids = {t.id for t in tasks}
    successes = sum(st.successes for tid, st in per_task_stats.items() if tid in train_ids)
    verified = sum(st.verified for tid, st in per_task_stats.items() if tid in train_ids)
    result = EvalResult(
        label,
        version,
        updates,
        successes,
        verified,
        per_task,
        round(time.perf_counter() - started, 2),
        per_set,
        report.task_metrics,
    )
    logger.info(
        "evaluation %s: %d/%d successes (%.1f%%); %s",
        label,
        result.successes,
        result.episodes,
        100 * result.success_rate,
        ", ".join(f"{k} {100 * v:.1f}%" for k, v in per_set.items()),
    )
    return result
