"""Evaluation: run tasks on N phones concurrently, verify, store everything, summarise.

>>> import asyncio
>>> from darwin.evaluate import evaluate
>>> from darwin.envs.sim.env import SimPhoneEnv
>>> from darwin.agents.scripted import OracleActor
>>> from darwin.task_registry import task_set
>>> report = asyncio.run(evaluate(task_set("base8")[:2], [SimPhoneEnv(seed=0)], lambda i: OracleActor()))
>>> report.overall.successes, report.overall.episodes
(2, 2)
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import JsonValue

from darwin.agents.base import Actor
from darwin.algos.evaluation import (
    PairedDifference,
    SuccessSummary,
    paired_difference,
    pass_at_k,
    success_summary,
)
from darwin.algos.task_metrics import Stratum, TaskMetrics, strata, stratum_counts, summarize_task
from darwin.envs.base import PhoneEnv
from darwin.envs.guard import ActionGuard
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.rollout import EpisodeRequest, RolloutEngine
from darwin.store import RunStore
from darwin.store_rows import SuccessStats
from darwin.types import EpisodeSampling, Outcome, Task, TerminationReason, Trajectory
from darwin.workflows.base import Workflow

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


GREEDY = -1
"""The ``sample`` index of an instance's greedy episode (sampled ones are ``0..n-1``)."""


@dataclass(frozen=True)
class EvalProtocol:
    """Which episodes a paired evaluation plays.

    Each evaluation phone is one *instance* of every task (the phone's seed decides the
    initial state: theme, wallpaper, app order, pop-ups, data). On each instance the policy
    plays one greedy episode (with ``greedy``) and ``samples`` sampled ones; sampled episode
    ``j`` of an instance samples with a seed derived from ``(seed, task, phone, j)``
    (:meth:`sampling`). Two evaluations with the same protocol on the same phones meet the
    same initial states and the same random numbers, so their episodes pair one to one
    (:func:`paired_comparison`).
    """

    samples: int
    greedy: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        if self.samples < 0:
            raise ValueError(f"samples={self.samples} must be >= 0")
        if self.samples == 0 and not self.greedy:
            raise ValueError("an evaluation with samples=0 and greedy=False plays nothing; ask for one or both")

    @property
    def episodes_per_instance(self) -> int:
        return self.samples + self.greedy

    def sampling(self, task_id: str, phone: str, sample: int) -> EpisodeSampling:
        """The sampling of episode ``sample`` (:data:`GREEDY` or ``0..samples-1``) of ``task_id`` on ``phone``."""
        key = np.random.SeedSequence([self.seed, zlib.crc32(task_id.encode()), zlib.crc32(phone.encode()), sample + 1])
        return EpisodeSampling(seed=int(key.generate_state(1)[0] >> 1), greedy=sample == GREEDY)


@dataclass(frozen=True)
class EvalEpisode:
    """One episode of a paired evaluation: who it is (task, instance, sample) and how it ended.

    ``success`` is ``None`` for an episode that was not verified either way (an
    infrastructure truncation, an unverified verdict, an error): such pairs are left out of
    every rate and every comparison."""

    task_id: str
    instance: str
    """The phone that played it (its seed is the initial state)."""
    sample: int
    """:data:`GREEDY`, or ``0..samples-1``."""
    success: bool | None
    episode_id: str
    steps: int

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.task_id, self.instance, self.sample)


def summarize_episodes(episodes: Sequence[EvalEpisode], task_ids: Sequence[str] | None = None) -> SuccessSummary:
    """Greedy success, sampled success and pass@k (:func:`darwin.algos.evaluation.success_summary`)
    over the instances of ``task_ids`` (every task for ``None``)."""
    chosen = [e for e in episodes if e.success is not None and (task_ids is None or e.task_id in task_ids)]
    greedy = [bool(e.success) for e in chosen if e.sample == GREEDY]
    counts: dict[tuple[str, str], list[int]] = {}
    for e in chosen:
        if e.sample != GREEDY:
            n_c = counts.setdefault((e.task_id, e.instance), [0, 0])
            n_c[0] += 1
            n_c[1] += bool(e.success)
    return success_summary(greedy, [(n, c) for n, c in counts.values()])


@dataclass(frozen=True)
class PairedComparison:
    """Evaluation A against evaluation B on the same episodes, per measure: ``greedy`` and
    ``sampled`` (pairs of episodes), ``pass@k`` (pairs of instances)."""

    differences: dict[str, PairedDifference]


def _shared_episodes(
    a: Sequence[EvalEpisode], b: Sequence[EvalEpisode], task_ids: Sequence[str] | None
) -> tuple[dict[tuple[str, str, int], bool], dict[tuple[str, str, int], bool], list[tuple[str, str, int]]]:
    """Each evaluation's verified outcomes by episode key, and the keys both have (sorted).

    Raises ``ValueError`` when the two share no episode."""

    def keep(e: EvalEpisode) -> bool:
        return e.success is not None and (task_ids is None or e.task_id in task_ids)

    by_key_a = {e.key: bool(e.success) for e in a if keep(e)}
    by_key_b = {e.key: bool(e.success) for e in b if keep(e)}
    shared = sorted(by_key_a.keys() & by_key_b.keys())
    if not shared:
        raise ValueError(
            "the two evaluations share no verified episode (task, phone, sample): compare evaluations run with the "
            "same protocol on the same phones (evaluation.phones, phone_seed, samples, sampling_seed)"
        )
    return by_key_a, by_key_b, shared


def paired_outcomes(
    a: Sequence[EvalEpisode], b: Sequence[EvalEpisode], task_ids: Sequence[str] | None = None
) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The pairs of episodes both evaluations verified, per measure (``greedy``, ``sampled``; a
    measure with no pair is left out): A's outcomes ``(N,)`` (1.0 success, 0.0 failure), B's
    ``(N,)`` and the task id of each pair ``(N,)`` (the bootstrap's strata), as
    :func:`darwin.algos.evaluation.paired_difference` and
    :func:`~darwin.algos.evaluation.seed_mean_difference` take them.

    Raises ``ValueError`` when the two share no episode (different protocols or phones)."""
    return _outcomes(*_shared_episodes(a, b, task_ids))


def _outcomes(
    by_key_a: dict[tuple[str, str, int], bool],
    by_key_b: dict[tuple[str, str, int], bool],
    shared: list[tuple[str, str, int]],
) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """:func:`paired_outcomes` from :func:`_shared_episodes`' result."""
    outcomes = {}
    for name, chosen in (
        ("greedy", [k for k in shared if k[2] == GREEDY]),
        ("sampled", [k for k in shared if k[2] != GREEDY]),
    ):
        if chosen:
            outcomes[name] = (
                np.array([by_key_a[k] for k in chosen], dtype=float),
                np.array([by_key_b[k] for k in chosen], dtype=float),
                np.array([k[0] for k in chosen]),
            )
    return outcomes


def paired_comparison(
    a: Sequence[EvalEpisode],
    b: Sequence[EvalEpisode],
    rng: np.random.Generator,
    task_ids: Sequence[str] | None = None,
    ks: Sequence[int] = (1, 2, 4, 8),
) -> PairedComparison:
    """A minus B on the episodes both verified, paired by (task, instance, sample), with a
    task-stratified bootstrap interval per measure (:func:`darwin.algos.evaluation.paired_difference`).

    Raises ``ValueError`` when the two share no episode (different protocols or phones)."""

    by_key_a, by_key_b, shared = _shared_episodes(a, b, task_ids)
    differences = {
        name: paired_difference(x, y, rng, strata=strata)
        for name, (x, y, strata) in _outcomes(by_key_a, by_key_b, shared).items()
    }
    instances: dict[tuple[str, str], list[tuple[bool, bool]]] = {}
    for key in shared:
        if key[2] != GREEDY:
            instances.setdefault((key[0], key[1]), []).append((by_key_a[key], by_key_b[key]))
    for k in ks:
        usable = {inst: pairs for inst, pairs in instances.items() if len(pairs) >= k}
        if not usable:
            continue
        rates = {
            inst: (
                pass_at_k(len(pairs), sum(x for x, _ in pairs), k),
                pass_at_k(len(pairs), sum(y for _, y in pairs), k),
            )
            for inst, pairs in usable.items()
        }
        order = sorted(rates)
        differences[f"pass@{k}"] = paired_difference(
            np.array([rates[i][0] for i in order]),
            np.array([rates[i][1] for i in order]),
            rng,
            strata=np.array([i[0] for i in order]),
        )
    return PairedComparison(differences)


@dataclass(frozen=True)
class EvalResult:
    """One paired evaluation of the policy on the evaluation phones (``eval.json``): the
    training tasks' greedy and sampled success and pass@k, per task and overall, every
    evaluated set's, and every episode's identity and outcome (so two evaluations pair)."""

    label: str
    """``warm_start`` (before RL) or ``final`` (after the last update)."""
    policy_version: int
    updates: int
    """Learner updates done when it ran (0 for the warm start)."""
    successes: int
    """Sampled successes on the training tasks."""
    episodes: int
    """Verified sampled episodes of the training tasks (infrastructure truncations are not counted either way)."""
    per_task: dict[str, float]
    """Sampled success of each task."""
    wall_s: float
    per_set: dict[str, float] = field(default_factory=dict)
    """Sampled success of each evaluated set: ``train`` (the training tasks) and every
    ``evaluation.task_sets`` entry (verified episodes only)."""
    task_metrics: dict[str, TaskMetrics] = field(default_factory=dict)
    """Per task: SR, PR, side effects, false completions, over-time and the L1-L4 stratum
    (:class:`darwin.algos.task_metrics.TaskMetrics`, as ``darwin eval`` prints them)."""
    greedy: float | None = None
    """Greedy success on the training tasks (share of instances)."""
    pass_at_k: dict[int, float] = field(default_factory=dict)
    """pass@k on the training tasks (mean over instances)."""
    per_task_greedy: dict[str, float] = field(default_factory=dict)
    per_task_pass_at_k: dict[str, dict[int, float]] = field(default_factory=dict)
    per_set_greedy: dict[str, float] = field(default_factory=dict)
    protocol: EvalProtocol | None = None
    phone_s: float = 0.0
    """Phone-seconds the evaluation's episodes took (its cost)."""
    records: list[EvalEpisode] = field(default_factory=list)
    """Every episode, to pair with another evaluation (:func:`paired_comparison`)."""
    set_tasks: dict[str, list[str]] = field(default_factory=dict)
    """The task ids of each evaluated set: ``train`` (the headline rates' tasks) and every
    ``evaluation.task_sets`` entry (empty in an ``eval.json`` written before the field)."""

    def task_ids(self, task_set: str = "train") -> list[str]:
        """The ids of ``task_set``'s tasks; every evaluated task where the sets are not recorded."""
        return list(self.set_tasks.get(task_set) or self.per_task)

    @property
    def success_rate(self) -> float:
        """Sampled success on the training tasks."""
        return self.successes / self.episodes if self.episodes else 0.0

    def to_json(self) -> dict[str, JsonValue]:
        data = dataclasses.asdict(self)
        data["success_rate"] = self.success_rate
        data["task_metrics"] = {t: m.to_json() for t, m in self.task_metrics.items()}
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EvalResult:
        """The inverse of :meth:`to_json` (JSON keys of pass@k are strings; derived fields are dropped)."""
        fields: dict[str, Any] = {f: data[f] for f in cls.__dataclass_fields__ if f in data}
        metrics = data.get("task_metrics") or {}
        assert isinstance(metrics, dict)
        fields["task_metrics"] = {t: TaskMetrics.from_json(m) for t, m in metrics.items()}
        fields["pass_at_k"] = {int(k): float(v) for k, v in (data.get("pass_at_k") or {}).items()}
        fields["per_task_pass_at_k"] = {
            t: {int(k): float(v) for k, v in rates.items()}
            for t, rates in (data.get("per_task_pass_at_k") or {}).items()
        }
        protocol = data.get("protocol")
        fields["protocol"] = None if protocol is None else EvalProtocol(**protocol)
        fields["records"] = [EvalEpisode(**r) for r in (data.get("records") or [])]
        return cls(**fields)


@dataclass
class EvalReport:
    """Every trajectory of an evaluation, with per-task and overall summaries; a paired
    evaluation (:func:`evaluate_paired`) also has each episode's identity in ``records``."""

    run_id: str
    task_ids: list[str]
    trajectories: list[Trajectory] = field(default_factory=list)
    records: list[EvalEpisode] = field(default_factory=list)
    protocol: EvalProtocol | None = None
    phone_s: float = 0.0
    """Phone-seconds its episodes took."""

    @property
    def per_task(self) -> dict[str, SuccessStats]:
        """Outcome counts of each task's sampled episodes (every episode for an unpaired evaluation)."""
        return {tid: summarize([t for t in self.sampled if t.task.id == tid]) for tid in self.task_ids}

    @property
    def overall(self) -> SuccessStats:
        return summarize(self.sampled)

    @property
    def sampled(self) -> list[Trajectory]:
        """The sampled episodes (a paired evaluation's greedy ones left out)."""
        if not self.records:
            return self.trajectories
        return [t for t, r in zip(self.trajectories, self.records, strict=True) if r.sample != GREEDY]

    def summary(self, task_id: str | None = None) -> SuccessSummary:
        """Greedy success, sampled success and pass@k of one task (every task for ``None``)."""
        return summarize_episodes(self.records, None if task_id is None else [task_id])

    @property
    def task_metrics(self) -> dict[str, TaskMetrics]:
        """Per task: SR, PR, side effects, false completions, over-time (:mod:`darwin.algos.task_metrics`)."""
        return {tid: self.metrics_of(tid) for tid in self.task_ids}

    def metrics_of(self, task_id: str | None = None) -> TaskMetrics:
        """One task's :class:`TaskMetrics` over its sampled episodes (all tasks together for
        ``None``); unscored episodes are left out."""
        return summarize_task(
            (t.outcome.scored, t.metrics) for t in self.sampled if task_id is None or t.task.id == task_id
        )

    @property
    def strata(self) -> dict[str, Stratum]:
        """MobileGym's L1-L4 stratum of each task for this agent (tasks without SR or PR left out)."""
        return strata(self.task_metrics)

    def to_json(self) -> dict[str, JsonValue]:
        """Per task and overall: outcome counts, success rate, mean steps and the episode
        metrics, greedy success and pass@k, and every episode's record (``darwin eval --json``)."""

        def entry(stats: SuccessStats, metrics: TaskMetrics, task_id: str | None) -> dict[str, JsonValue]:
            paired = self.summary(task_id)
            return {
                **dataclasses.asdict(stats),
                "success_rate": stats.success_rate,
                "greedy_success_rate": paired.greedy,
                "sampled_success_rate": paired.sampled,
                "pass_at_k": {str(k): v for k, v in paired.pass_at.items()},
                "mean_steps": self.mean_steps(task_id),
                "metrics": metrics.to_json(),
            }

        per_task: dict[str, JsonValue] = {
            tid: entry(stats, self.metrics_of(tid), tid) for tid, stats in self.per_task.items()
        }
        return {
            "per_task": per_task,
            "overall": entry(self.overall, self.metrics_of(None), None),
            "strata": dict(self.strata),
            "strata_counts": {stratum: n for stratum, n in stratum_counts(self.strata).items()},
            "protocol": None if self.protocol is None else dataclasses.asdict(self.protocol),
            "records": [dataclasses.asdict(r) for r in self.records],
        }

    def mean_steps(self, task_id: str | None = None) -> float:
        chosen = [len(t) for t in self.sampled if task_id is None or t.task.id == task_id]
        return sum(chosen) / len(chosen) if chosen else 0.0

    def success_rows(self, ks: Sequence[int]) -> list[tuple[str, ...]]:
        """Per task, then ``overall``: the task, greedy success, pass@k for each of ``ks``, the
        sampled episodes, the lost ones (not scored) and the mean steps, formatted for a table."""
        rows: list[tuple[str, ...]] = []
        for task_id, score in [*self.per_task.items(), ("overall", self.overall)]:
            chosen = None if task_id == "overall" else task_id
            summary = self.summary(chosen)
            rows.append(
                (
                    task_id,
                    _percent(summary.greedy),
                    *(_percent(summary.pass_at.get(k)) for k in ks),
                    str(score.episodes),
                    str(score.already_done + score.infra_truncated + score.unverified + score.errors),
                    f"{self.mean_steps(chosen):.1f}",
                )
            )
        return rows

    def metrics_rows(self) -> list[tuple[str, ...]]:
        """Per task, then ``overall``: the task, measured episodes, SR, PR and SE (percent), FC and
        OT (counts) and the MobileGym stratum (blank for ``overall``), formatted for a table."""
        return [
            (
                task_id,
                str(m.measured),
                _percent(m.success_rate),
                _percent(m.progress_rate),
                _percent(m.side_effect_rate),
                str(m.false_completions),
                str(m.over_time),
                (m.stratum or "-") if task_id != "overall" else "",
            )
            for task_id, m in [*self.task_metrics.items(), ("overall", self.metrics_of(None))]
        ]

    def blocked_per_task(self) -> dict[str, int]:
        """Episodes the action guard blocked, per task (tasks without any left out)."""
        return dict(
            Counter(
                t.task.id
                for t in self.trajectories
                if t.termination is not None and t.termination.reason == TerminationReason.BLOCKED
            )
        )


def _percent(value: float | None) -> str:
    """A rate as a whole percent, ``-`` when undefined."""
    return "-" if value is None else f"{100 * value:.0f}%"


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


def _engine(
    envs: Sequence[PhoneEnv],
    make_actor: Callable[[int], Actor],
    workflow: Workflow | None,
    store: RunStore | None,
    report: EvalReport,
    on_episode: Callable[[Trajectory], None] | None,
    guard: ActionGuard | None,
) -> RolloutEngine:
    """The rollout engine an evaluation plays on: no curriculum, no buffer, no learner."""
    run_id = report.run_id if store else None
    return RolloutEngine(
        envs, make_actor, workflow=workflow, store=store, run_id=run_id, on_episode=on_episode, guard=guard
    )


async def evaluate(
    tasks: Sequence[Task],
    envs: Sequence[PhoneEnv],
    make_actor: Callable[[int], Actor],
    episodes_per_task: int = 1,
    workflow: Workflow | None = None,
    store: RunStore | None = None,
    run_id: str | None = None,
    on_episode: Callable[[Trajectory], None] | None = None,
    guard: ActionGuard | None = None,
) -> EvalReport:
    """Run every task ``episodes_per_task`` times, spread over ``envs`` (one worker each).

    Phones never wait for each other: a free phone takes the next pending episode. Between
    episodes each phone follows its own rule (:func:`evaluation_phones` reset to their
    initial state; a phone built with ``reset_between_episodes=False`` only returns home and
    keeps its state, paper section 3.2).
    ``make_actor(i)`` builds the actor for phone ``i``. This is the training engine
    (:meth:`darwin.rollout.RolloutEngine.run_episodes`) fed a fixed queue with no learner:
    episodes are played, stored and verified exactly as in training, and checked by ``guard``
    (if any) before each action reaches a phone.
    """
    if not envs:
        raise ValueError("evaluate needs at least one phone")
    report = EvalReport(run_id=run_id or uuid.uuid4().hex, task_ids=[t.id for t in tasks])
    engine = _engine(envs, make_actor, workflow, store, report, on_episode, guard)
    report.trajectories = await engine.run_episodes([t for _ in range(episodes_per_task) for t in tasks])
    report.phone_s = engine.stats.episode_phone_s
    return report


async def evaluate_paired(
    tasks: Sequence[Task],
    envs: Sequence[PhoneEnv],
    make_actor: Callable[[int], Actor],
    protocol: EvalProtocol,
    workflow: Workflow | None = None,
    store: RunStore | None = None,
    run_id: str | None = None,
    on_episode: Callable[[Trajectory], None] | None = None,
    guard: ActionGuard | None = None,
) -> EvalReport:
    """A paired evaluation (:class:`EvalProtocol`): on every phone, each task's greedy episode
    and its sampled ones, each with its own sampling seed; every episode is played by its own
    phone (from that phone's initial state, :func:`evaluation_phones`), so the same protocol
    on the same phones plays the same episodes for any checkpoint. ``report.records`` holds
    each episode's identity and outcome.

        >>> import asyncio
        >>> from darwin.agents.scripted import OracleActor
        >>> from darwin.task_registry import task_set
        >>> report = asyncio.run(evaluate_paired(task_set("base8")[:1], evaluation_phones(0, 2), lambda i: OracleActor(),
        ...                                      EvalProtocol(samples=2)))
        >>> [(r.instance, r.sample, r.success) for r in report.records]
        [('eval-0', -1, True), ('eval-0', 0, True), ('eval-0', 1, True), ('eval-1', -1, True), ('eval-1', 0, True), ('eval-1', 1, True)]
        >>> report.summary().pass_at
        {1: 1.0, 2: 1.0}
    """
    if not envs:
        raise ValueError("evaluate needs at least one phone")
    report = EvalReport(run_id=run_id or uuid.uuid4().hex, task_ids=[t.id for t in tasks], protocol=protocol)
    samples = ([GREEDY] if protocol.greedy else []) + list(range(protocol.samples))
    keys = [(task, i, sample) for task in tasks for i in range(len(envs)) for sample in samples]
    requests = [
        EpisodeRequest(task, phone=i, sampling=protocol.sampling(task.id, envs[i].name, sample))
        for task, i, sample in keys
    ]
    engine = _engine(envs, make_actor, workflow, store, report, on_episode, guard)
    report.trajectories = await engine.run_episodes(requests)
    report.phone_s = engine.stats.episode_phone_s
    report.records = [
        EvalEpisode(task.id, envs[i].name, sample, t.outcome.scored, t.episode_id, len(t))
        for (task, i, sample), t in zip(keys, report.trajectories, strict=True)
    ]
    return report
