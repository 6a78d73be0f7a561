"""The training recipe: what ``darwin run`` does, in the order it happens.

A :class:`TrainingRecipe` has torchtune's small lifecycle; each stage is one method:

``setup(resume)``
    warm start -> policy pool -> tasks, curriculum, replay buffer, run store -> learner (new,
    or loaded from the run's checkpoint with its :class:`RunState`) -> phones and workflows.
``train()``
    the warm-start evaluation, then the loop of CleanRL's ``ppo.py``: **collect** a batch
    of completed trajectories from the phones -> **update** the learner -> **log** ->
    **save** a checkpoint -> **watch** how many episodes were verified (a warning, or a stop:
    ``verification_watch``); until ``updates`` are done or the time budget is spent; then the
    final evaluation and the report.
``save()`` / ``load()``
    the learner's checkpoint with the untrained trajectories and the typed run state.
``cleanup()``
    stops the phones' rollout, closes the policy, the phones, the logs and the store.

The phones run all the time in the background (``RolloutEngine``, the paper's asynchronous
rollout); the recipe only decides when the learner takes a batch. Everything the run writes
goes through :class:`darwin.run.report.RunReport`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import JsonValue, TypeAdapter

from darwin.evaluate import EvalResult, evaluate_paired, summarize_episodes
from darwin.progress import Heartbeat, StageClock, StageProgress
from darwin.run.build import (
    build_curriculum,
    build_eval_phones,
    build_fleet,
    build_guard,
    build_learner,
    build_policy_pool,
    build_store,
    build_workflow,
    guard_notice,
    learner_class,
    warm_start_checkpoint,
)
from darwin.run.cost import RunCost
from darwin.run.report import RunReport
from darwin.run.verification_watch import VerificationWatch
from darwin.types import RunAbort, TerminationReason, Trajectory

if TYPE_CHECKING:
    from darwin.agents.base import Actor
    from darwin.agents.pool import ActorPool
    from darwin.curricula.base import Curriculum
    from darwin.envs.base import PhoneEnv
    from darwin.envs.fleet import PhoneEvent, PhoneFleet
    from darwin.envs.guard import ActionGuard
    from darwin.learner.base import Learner
    from darwin.learner.metrics import UpdateMetrics
    from darwin.readers.base import ReaderStats
    from darwin.replay_buffer import ReplayBuffer
    from darwin.rollout import RolloutEngine
    from darwin.run.config import ExperimentConfig
    from darwin.sft.training import StepStats
    from darwin.store import RunStore
    from darwin.types import Task
    from darwin.workflows.base import Workflow

logger = logging.getLogger(__name__)

ERROR_STREAK = 64
"""Episodes in a row that all end in an error (a model server refusing every request, a bug
in a workflow) after which a run stops instead of waiting for a batch that cannot come."""

Point = tuple[int, float]
"""A point of the success curve: (training steps when the episode was trained on, success)."""
_POINTS = TypeAdapter(list[Point])
_TASK_POINTS = TypeAdapter(dict[str, list[Point]])
_INT = TypeAdapter(int)
_JSON_OBJECT = TypeAdapter(dict[str, JsonValue])


@dataclass
class RunProgress:
    """What the live display shows; updated by the recipe."""

    phones: int = 0
    env_steps: int = 0
    steps_per_s: float = 0.0
    episodes: int = 0
    update: int = 0
    updates: int = 0
    warmup: bool = True
    recent_success: float | None = None
    buffer_steps: int = 0
    policy_version: int = 0
    stage: str = "starting"
    detail: str = ""
    """What the stage is doing now, e.g. the warm start's SFT loss."""
    in_stage: StageProgress = field(default_factory=StageProgress)
    """How long the stage has run and what is left of it (the RL stage spans rollouts and updates)."""


@dataclass
class RunState:
    """What a checkpoint keeps of the run besides the learner (typed; stored as the learner
    checkpoint's ``extra_state`` JSON).

        >>> state = RunState(run_id="r1", env_steps=300, success_points=[(12, 1.0)], task_points={"clock_1": [(12, 1.0)]})
        >>> RunState.from_json(state.to_json()) == state
        True
    """

    run_id: str
    """The run's id in the run database (resumed runs keep adding episodes to it)."""
    env_steps: int = 0
    """Phone steps taken before this process started (a resumed run's offset)."""
    curriculum: dict[str, JsonValue] = field(default_factory=dict)
    """``Curriculum.state_dict()``."""
    success_points: list[Point] = field(default_factory=list)
    """One point per scored training episode, at the number of steps trained on once it was included."""
    task_points: dict[str, list[Point]] = field(default_factory=dict)
    """The success points of each task (the plot's per-task panel)."""
    warmup_until: int = 0
    """Training step (x of the success curve) where the critic warm-up ended."""
    cost: RunCost = field(default_factory=RunCost)
    """Phone and learner time of the run up to the checkpoint, every process's (the summary's cost figures)."""

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "run_id": self.run_id,
            "env_steps": self.env_steps,
            "curriculum": self.curriculum,
            "success_points": [list(p) for p in self.success_points],
            "task_points": {k: [list(p) for p in pts] for k, pts in self.task_points.items()},
            "warmup_until": self.warmup_until,
            "cost": self.cost.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> RunState:
        """Read a checkpoint's run state; a checkpoint without it was not written by a run."""
        missing = [k for k in ("run_id", "env_steps", "curriculum", "success_points") if k not in data]
        if missing:
            raise ValueError(
                f"the checkpoint's run state lacks {', '.join(missing)}: it was not written by `darwin run`; "
                "start a new run directory (or pass the checkpoint as `checkpoint`, a warm start)"
            )
        return cls(
            run_id=str(data["run_id"]),
            env_steps=_INT.validate_python(data["env_steps"]),
            curriculum=_JSON_OBJECT.validate_python(data["curriculum"]),
            success_points=_POINTS.validate_python(data["success_points"]),
            task_points=_TASK_POINTS.validate_python(data.get("task_points", {})),
            warmup_until=_INT.validate_python(data.get("warmup_until", 0)),
            cost=RunCost.from_json(_JSON_OBJECT.validate_python(data.get("cost") or {})),
        )

    def record(self, batch: list[Trajectory]) -> None:
        """One point per scored episode of a training batch; x grows with every trajectory,
        so a batch's episodes spread along the axis."""
        trained = self.success_points[-1][0] if self.success_points else 0
        for t in batch:
            trained += len(t)
            if t.success is not None and t.branch is None:  # a continuation starts part-way through
                self.success_points.append((trained, float(t.success)))
                self.task_points.setdefault(t.task.id, []).append((trained, float(t.success)))

    @property
    def recent_success(self) -> float | None:
        """Mean success of the last 20 scored training episodes (the display's number)."""
        recent = [v for _, v in self.success_points[-20:]]
        return sum(recent) / len(recent) if recent else None


@dataclass(frozen=True)
class RunResult:
    """Where a finished run left its outputs."""

    run_dir: Path
    updates: int
    env_steps: int
    success_points: list[Point]
    plot: Path
    evaluations: dict[str, EvalResult] = field(default_factory=dict)
    """``warm_start`` and ``final`` when ``config.evaluation`` asks for them (also in eval.json)."""
    cost: RunCost = field(default_factory=RunCost)
    """Phone and learner time per success (also ``summary.json``'s ``cost``)."""


class TrainingRecipe:
    """One training run of an :class:`~darwin.run.config.ExperimentConfig` (module docstring:
    the lifecycle). ``darwin run`` is::

        recipe = TrainingRecipe(config, run_dir)
        try:
            await recipe.setup(resume)
            result = await recipe.train()
        finally:
            await recipe.cleanup()

    (:func:`darwin.run.recipe.run_experiment`). Every component comes from :mod:`darwin.run.build`,
    so a user's curriculum, verifier, memory or workflow named in the config runs here.
    """

    def __init__(
        self, config: ExperimentConfig, run_dir: Path, on_progress: Callable[[RunProgress], None] | None = None
    ) -> None:
        self.config = config
        self.run_dir = run_dir
        self.report = RunReport(run_dir)
        self.progress = RunProgress(phones=config.phones.count, updates=config.updates)
        self._on_progress = on_progress or (lambda p: None)
        self.timings: dict[str, float] = {}
        self.evaluations: dict[str, EvalResult] = {}
        self.resumed = False
        # Built by setup():
        self.pool: ActorPool | None = None
        self.learner: Learner | None = None
        self.state: RunState | None = None
        self.tasks: list[Task] = []
        self.curriculum: Curriculum | None = None
        self.buffer: ReplayBuffer | None = None
        self.store: RunStore | None = None
        self.envs: list[PhoneEnv] = []
        self.fleet: PhoneFleet | None = None
        self.workflow: Workflow | None = None
        self.eval_workflow: Workflow | None = None
        self.engine: RolloutEngine | None = None
        self.guard: ActionGuard | None = None
        self._stop_rollout = asyncio.Event()
        self._rollout: asyncio.Task | None = None
        self._env_offset = 0  # phone steps before this process (a resumed run's)
        self._saved_pending: set[str] = set()  # episode ids of the last checkpoint's untrained trajectories
        self._batch_lag: list[int] = []  # policy versions each step of the current batch lags behind
        self._sft_shown = 0.0  # when the SFT loss was last shown
        self._advance_shown = 0.0  # when a stage's count of work done was last shown
        self.stage_clock = StageClock()
        # the recipe's loop, the SFT thread and the heartbeat all report; one report at a time
        self._reporting = threading.Lock()
        self._learner_s = 0.0  # this process's seconds in learner updates
        self._reader_before: dict[str, ReaderStats] = {}  # the readers' counters at the last update's log
        self._reader_clock = time.perf_counter()
        self._cost_before = RunCost()  # a resumed run's cost up to its checkpoint
        self.verification = VerificationWatch(config.verification_watch)

    @property
    def checkpoint_dir(self) -> Path:
        return self.run_dir / "checkpoint"

    # ---------------------------------------------------------------------------- setup
    async def setup(self, resume: bool = False) -> None:
        """Build every component; with ``resume``, continue from the run's checkpoint."""
        from darwin.replay_buffer import ReplayBuffer

        config = self.config
        self._show("warm start")
        clock = time.perf_counter()
        warm = await asyncio.to_thread(
            warm_start_checkpoint,
            config,
            on_phase=lambda name: self._show(f"warm start: SFT {name}"),
            on_step=self._sft_step,
            on_advance=self._advance,
        )
        self.timings["warm_start_s"] = time.perf_counter() - clock
        self._show("setup (policy, learner, phones)")
        self.report.write_warm_start(warm)
        self.pool = build_policy_pool(config, warm, run_dir=self.run_dir)
        self.tasks = config.resolve_tasks()
        self.curriculum = build_curriculum(config, self.tasks, run_dir=self.run_dir)
        self.buffer = ReplayBuffer(rollout_steps=config.rollout_steps, group_size=config.group_size)
        self.store = build_store(config.store, self.run_dir)
        if resume and self.checkpoint_dir.exists():
            self.load()
        else:
            if resume:
                logger.warning("no checkpoint in %s; starting from the warm start", self.checkpoint_dir)
            self.learner = build_learner(config, self.pool.policy)
            self.state = RunState(run_id=self.store.start_run(config.name, config=config))
        self.guard = build_guard(config)
        logger.info("%s", guard_notice(config, self.guard))
        self.fleet = build_fleet(config, on_event=self._phone_event)
        self.envs = self.fleet.envs
        self.workflow = build_workflow(config, self.pool.observation_size)
        # A second workflow (and verifier: a learned one is a model) only when the evaluation is scored differently.
        self.eval_workflow = (
            self.workflow
            if config.evaluation.verifier is None
            else build_workflow(config, self.pool.observation_size, evaluation=True)
        )
        self.report.open_metrics()

    def load(self) -> None:
        """The learner, its untrained trajectories and the run state from the checkpoint."""
        from darwin.learner.checkpoint import restore_pending

        assert self.pool is not None and self.buffer is not None and self.curriculum is not None
        self.learner = learner_class(self.config).load(
            self.checkpoint_dir, self.pool.policy, config=self.config.learner
        )
        resumed = self.learner.resume_state
        if resumed is None:  # load() always sets it
            raise RuntimeError(f"{self.checkpoint_dir}: the learner loaded no resume state")
        restore_pending(self.buffer, resumed.pending)
        self.state = RunState.from_json(resumed.extra_state)
        self._cost_before = self.state.cost
        self.curriculum.load_state_dict(self.state.curriculum)
        self.evaluations = self.report.load_evaluations()
        self.resumed = True
        logger.info(
            "resumed %s at update %d (policy v%d, %d pending trajectories)",
            self.checkpoint_dir,
            self.learner.updates,
            self.learner.policy_version,
            len(resumed.pending),
        )

    # ---------------------------------------------------------------------------- train
    async def train(self) -> RunResult:
        """Evaluate, then collect -> update -> log -> save until done; evaluate again."""
        config, learner = self.config, self.learner
        assert learner is not None, "call setup() first"
        if self._evaluates and "warm_start" not in self.evaluations:
            await self.evaluate("warm_start")
        # one clock over the RL loop: what is left is the updates to go, or the time budget's rest
        first = learner.updates
        with self._reporting:
            self.progress.stage = "rollout"
            self.stage_clock.start("RL", total=config.updates - first, unit="updates", budget_s=config.time_budget_s)
        self._start_rollout()
        started = time.perf_counter()
        while learner.updates < config.updates:
            if config.time_budget_s is not None and time.perf_counter() - started > config.time_budget_s:
                logger.warning("time budget of %.0fs reached after %d updates", config.time_budget_s, learner.updates)
                break
            batch = await self.collect()
            update = await self.update(batch)
            self.stage_clock.advance(learner.updates - first)
            self.log(batch, update)
            await self.save()
            self.watch_verification(batch, update)
        await self._finish_rollout()
        if self._unsaved_episodes():  # finished after the last checkpoint: keep them for a resume
            await self.save()
        self.timings["rl_s"] = time.perf_counter() - started
        if self._evaluates:
            await self.evaluate("final")
        return self._write_report()

    async def collect(self) -> list[Trajectory]:
        """The next batch: completed trajectories covering ``rollout_steps`` steps, waiting
        for the phones as long as needed (a crashed rollout raises here)."""
        assert self.buffer is not None and self._rollout is not None and self.engine is not None
        error = TerminationReason.ERROR.value
        counted, episodes_before, errors_before = (
            self.engine.stats,
            self.engine.stats.episodes,
            self.engine.stats.terminations[error],
        )
        while (batch := self.buffer.take_completed()) is None:
            if self._rollout.done():
                self._rollout.result()  # surfaces a crashed rollout
            stats = self.engine.stats
            if stats is not counted:  # the rollout started after this call: its counters start at 0
                counted, episodes_before, errors_before = stats, 0, 0
            ended = stats.episodes - episodes_before
            if ended >= ERROR_STREAK and stats.terminations[error] - errors_before == ended:
                cause, count = stats.error_causes.most_common(1)[0]
                raise RunAbort(
                    f"the last {ended} episodes all ended in an error, so nothing can be trained on; the most "
                    f"common cause ({count} of {stats.error_causes.total()} errors so far): {cause[:500]}. Fix it, "
                    "then continue with --resume"
                )
            self._refresh()
            await asyncio.sleep(0.2)
        return batch

    async def update(self, batch: list[Trajectory]) -> UpdateMetrics:
        """One learner update on ``batch`` (critic only during the warm-up)."""
        learner, state = self.learner, self.state
        assert learner is not None and state is not None
        state.record(batch)
        if learner.in_warmup and state.success_points:
            state.warmup_until = state.success_points[-1][0]
        self._show("update (critic warm-up)" if learner.in_warmup else "update")
        self._batch_lag = [
            learner.policy_version - t.decision.generation.policy_version
            for tr in batch
            for t in tr.transitions
            if t.decision.generation is not None
        ]
        clock = time.perf_counter()
        metrics = await asyncio.to_thread(learner.update, batch)
        self._learner_s += time.perf_counter() - clock  # the learner-seconds of the cost figures
        return metrics

    def _reader_metrics(self) -> dict[str, float]:
        """The agent's reader since the last update, in this process: ms per screen (cache hits
        included), the cache's hit rate, and its share of the phones' wall time (phones x the
        interval). Empty without a reader; a fleet's remote phones read in their own processes."""
        from darwin.readers.base import reader_stats

        now, clock = reader_stats(), time.perf_counter()
        before, since = self._reader_before, self._reader_clock
        self._reader_before, self._reader_clock = now, clock
        phones = max(1, len(self.envs))
        out: dict[str, float] = {}
        for key, total in now.items():
            delta = total.since(before[key]) if key in before else total
            if not delta.screens:
                continue
            out[f"reader/{key}/ms_per_screen"] = delta.ms_per_screen or 0.0
            out[f"reader/{key}/cache_hit_rate"] = delta.hit_rate or 0.0
            out[f"reader/{key}/share_of_phone_time"] = delta.total_seconds / (phones * max(clock - since, 1e-9))
        return out

    def log(self, batch: list[Trajectory], update: UpdateMetrics) -> None:
        """What this update trained on and what it measured (metrics.jsonl, TensorBoard, updates.jsonl)."""
        assert self.engine is not None and self.curriculum is not None
        stats = self.engine.stats
        sampled = [t for t in batch if t.branch is None] or batch  # the curriculum's episodes, not continuations
        continuations = [t for t in batch if t.branch is not None]
        branching = (
            {
                "continuations": len(continuations),
                "continuation_success": sum(bool(t.success) for t in continuations) / len(continuations),
            }
            if continuations
            else {}
        )
        assert self.learner is not None
        if self.store is not None:
            self.store.record_step_scores(self.learner.step_scores)
        self.report.log_update(
            update,
            batch,
            rollout={
                "success": sum(bool(t.success) for t in sampled) / len(sampled),
                "episodes": len(sampled),
                "success_by_task": _success_by_task(sampled),
                "started_inside_demonstration": sum(t.start_step > 0 for t in sampled) / len(sampled),
                **branching,
                "env_steps": self._env_steps,
                "steps_per_s": stats.steps_per_second,
                "backpressure_phone_s": stats.backpressure_s,
                **{f"cost/{k}": v for k, v in self.cost.to_json().items() if k != "note"},
                "policy_version_lag_mean": sum(self._batch_lag) / max(1, len(self._batch_lag)),
                "policy_version_lag_max": max(self._batch_lag, default=0),
                **{f"truncations/{k}": v for k, v in stats.truncation_causes.items()},
                **self._reader_metrics(),
            },
        )
        weights = getattr(self.curriculum, "weights", None)
        if callable(weights):  # adaptive curricula: how they now share the phones among tasks
            self.report.metrics.log(update.update, "curriculum", weights())
        remaining = getattr(self.curriculum, "remaining", None)
        if callable(remaining):  # a reverse curriculum: demonstration steps left to the agent (0: from the beginning)
            self.report.metrics.log(update.update, "curriculum_start", {k: v or 0 for k, v in remaining().items()})

    async def save(self) -> None:
        """Checkpoint the learner with the untrained trajectories and the run state."""
        learner, state = self.learner, self.state
        assert learner is not None and state is not None and self.buffer is not None and self.curriculum is not None
        self._show("rollout")
        state.curriculum = self.curriculum.state_dict()
        state.env_steps = self._env_steps
        state.cost = self.cost
        pending = self.buffer.completed_trajectories()
        await asyncio.to_thread(learner.save, self.checkpoint_dir, pending=pending, extra_state=state.to_json())
        self._saved_pending = {t.episode_id for t in pending}
        self._refresh()

    async def evaluate(self, label: Literal["warm_start", "final"]) -> EvalResult:
        """A sampled evaluation on the evaluation phones: its numbers in eval.json, its episodes
        and verdicts in the run database as the run ``<name> evaluation <label>``."""
        assert (
            self.learner is not None
            and self.pool is not None
            and self.eval_workflow is not None
            and self.store is not None
        )
        self._show(f"evaluation ({label.replace('_', ' ')})", unit="episodes")
        clock = time.perf_counter()
        phones = build_eval_phones(self.config, training=self.fleet.envs if self.fleet is not None else self.envs)
        run_id = self.store.start_run(f"{self.config.name} evaluation {label}", config=None)
        result = await evaluate_experiment(
            self.config,
            label,
            self.tasks,
            phones,
            self.pool,
            self.eval_workflow,
            self.learner.policy_version,
            self.learner.updates,
            store=self.store,
            run_id=run_id,
            guard=self.guard,
            on_episode=self._advance,
        )
        self.evaluations[label] = result
        self.report.save_evaluations(self.evaluations)
        self.report.metrics.log(self.learner.updates, "eval", {"success": result.success_rate})
        self.timings[f"eval_{label}_s"] = time.perf_counter() - clock
        return result

    # -------------------------------------------------------------------------- cleanup
    async def cleanup(self) -> None:
        """Stop the rollout and close everything setup() opened (also after an error)."""
        self._stop_rollout.set()
        if self._rollout is not None:
            await asyncio.gather(self._rollout, return_exceptions=True)  # already surfaced, or an error is on its way
        if self.pool is not None:  # with the memories it made
            await self.pool.aclose()
        if self.fleet is not None:  # phone threads, Ray phone hosts; provider phones go back to it
            self.fleet.close()
        for workflow in dict.fromkeys(w for w in (self.workflow, self.eval_workflow) if w is not None):
            workflow.close()  # and its verifier
        if self.curriculum is not None:  # a proposer's thread and database
            self.curriculum.close()
        if self.learner is not None:  # verl's workers
            self.learner.close()
        self.report.close()
        if self.store is not None:
            self.store.close()

    def watch_verification(self, batch: list[Trajectory], update: UpdateMetrics) -> None:
        """No silent runs (``config.verification_watch``): the batch's verified share in metrics.jsonl
        (group ``verification``), a warning the first time few recent episodes were verified, and
        a stop after too many updates in a row without a verified episode (once the update is saved,
        so ``--resume`` continues after it)."""
        counts = self.verification.observe(batch)
        self.report.metrics.log(update.update, "verification", counts.as_dict())
        if (problem := self.verification.stop_message()) is not None:
            raise RunAbort(problem)

    # -------------------------------------------------------------------------- helpers
    def _unsaved_episodes(self) -> bool:
        """Completed trajectories the last checkpoint does not hold (nothing is lost on a resume)."""
        assert self.buffer is not None
        return {t.episode_id for t in self.buffer.completed_trajectories()} != self._saved_pending

    @property
    def _evaluates(self) -> bool:
        return self.config.evaluation.enabled

    @property
    def _env_steps(self) -> int:
        return self._env_offset + (self.engine.stats.env_steps if self.engine is not None else 0)

    @property
    def cost(self) -> RunCost:
        """The run's phone and learner time so far, a resumed run's earlier processes included."""
        if self.engine is None:
            return self._cost_before + RunCost(learner_s=self._learner_s)
        return self._cost_before + RunCost.of_rollout(self.engine.stats, len(self.engine.envs), self._learner_s)

    def _start_rollout(self) -> None:
        from darwin.rollout import Branching, RolloutEngine

        config, state = self.config, self.state
        assert self.pool is not None and self.curriculum is not None and self.buffer is not None and state is not None
        self._env_offset = state.env_steps
        self.engine = RolloutEngine(
            self.envs,
            self.pool,
            self.curriculum,
            self.buffer,
            workflow=self.workflow,
            store=self.store,
            run_id=state.run_id,
            mode=config.mode,
            group_size=config.group_size,
            max_backlog_steps=config.max_backlog_steps or config.rollout_steps,
            fleet=self.fleet if self.fleet is not None and self.fleet.active else None,
            group_lost=config.group_lost,
            guard=self.guard,
            branching=None
            if config.branching is None
            else Branching(config.branching.continuations, config.branching.points, seed=config.phones.seed),
        )
        self._rollout = asyncio.create_task(self.engine.run(until=self._stop_rollout.is_set))
        self._show("rollout")

    async def _finish_rollout(self) -> None:
        self._stop_rollout.set()
        if self._rollout is not None:
            await self._rollout  # a crash in the last moments still surfaces
        self._refresh()

    def _phone_event(self, event: PhoneEvent) -> None:
        """The fleet hard-reset, replaced or retired a phone: into the run database."""
        if self.store is not None and self.state is not None:
            self.store.record_phone_event(
                self.state.run_id, event.phone, event.kind, event.reason, event.episodes, replacement=event.replacement
            )

    def _show(self, stage: str, total: int | None = None, unit: str = "") -> None:
        """A new stage (its clock starts, but the RL loop's rollouts and updates share the RL clock)."""
        with self._reporting:  # the heartbeat never shows the new stage with the old one's clock
            self.progress.stage = stage
            self.progress.detail = ""
            if self.stage_clock.stage != "RL" or not stage.startswith(("rollout", "update")):
                self.stage_clock.start(stage, total, unit)
            self._report()

    def _advance(self, done: int, total: int | None = None, unit: str | None = None) -> None:
        """The stage has ``done`` of ``total`` units finished: its clock moves on, and the display
        with it at most every second (and when the stage's work is all done)."""
        self.stage_clock.advance(done, total, unit)
        now = time.perf_counter()
        if (total is not None and done >= total) or now - self._advance_shown >= 1.0:
            self._advance_shown = now
            self._refresh()

    def _sft_step(self, step: StepStats) -> None:
        """The warm start's training loss as the stage's detail, at most every 2 seconds (the
        stage clock has the steps done and left)."""
        now = time.perf_counter()
        if step.step > 1 and step.step < step.steps and now - self._sft_shown < 2.0:
            return
        self._sft_shown = now
        self.progress.detail = f"loss {step.loss:.3f}"
        self._refresh()

    def _refresh(self) -> None:
        with self._reporting:
            self._report()

    def _report(self) -> None:
        progress, learner, state = self.progress, self.learner, self.state
        progress.in_stage = self.stage_clock.snapshot()
        if self.engine is not None:
            progress.env_steps = self._env_steps
            progress.steps_per_s = self.engine.stats.steps_per_second
            progress.episodes = self.engine.stats.episodes
        if self.buffer is not None:
            progress.buffer_steps = self.buffer.completed_steps
        if learner is not None:
            progress.update, progress.warmup, progress.policy_version = (
                learner.updates,
                learner.in_warmup,
                learner.policy_version,
            )
        if state is not None:
            progress.recent_success = state.recent_success
        self._on_progress(progress)

    def _write_report(self) -> RunResult:
        config, state, learner = self.config, self.state, self.learner
        assert state is not None and learner is not None
        plot = self.report.finish(
            title=f"{config.name}: success on {', '.join(config.tasks)}",
            success_points=state.success_points,
            task_points=state.task_points,
            warmup_until=state.warmup_until,
            evaluations=self.evaluations,
            summary={
                "updates": learner.updates,
                "env_steps": self.progress.env_steps,
                "episodes": len(state.success_points),
                "resumed": self.resumed,
                **{k: round(v, 2) for k, v in self.timings.items()},
                "cost": self.cost.to_json(digits=4),
            },
        )
        return RunResult(
            self.run_dir,
            learner.updates,
            self.progress.env_steps,
            state.success_points,
            plot,
            self.evaluations,
            self.cost,
        )


def _success_by_task(batch: list[Trajectory]) -> dict[str, float]:
    """Success rate of each task's scored episodes in one training batch (TensorBoard
    ``rollout/success_by_task/<task>``): which tasks the policy is improving on."""
    scored: dict[str, list[bool]] = {}
    for t in batch:
        if t.success is not None:
            scored.setdefault(t.task.id, []).append(bool(t.success))
    return {task: sum(outcomes) / len(outcomes) for task, outcomes in sorted(scored.items())}


async def run_recipe(
    config: ExperimentConfig, run_dir: Path, resume: bool, on_progress: Callable[[RunProgress], None] | None = None
) -> RunResult:
    """setup -> train -> cleanup (cleanup also after an error); the progress is refreshed every
    few seconds also while a stage reports nothing (:class:`~darwin.progress.Heartbeat`)."""
    recipe = TrainingRecipe(config, run_dir, on_progress)
    try:
        with Heartbeat(recipe._refresh):
            await recipe.setup(resume)
            return await recipe.train()
    finally:
        await recipe.cleanup()


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
    guard: ActionGuard | None = None,
    on_episode: Callable[[int, int], None] | None = None,
) -> EvalResult:
    """An experiment's paired evaluation (``darwin run`` before RL and after the last update):
    every training task and every ``evaluation.task_sets`` task under the protocol of
    ``evaluation`` (:meth:`~darwin.run.config.EvaluationConfig.protocol`), stored (with
    ``store``) like training episodes. The headline rates are the training tasks' (what the
    run trains on); each set's are in ``per_set`` and ``per_set_greedy``. ``on_episode(done,
    total)`` follows the episodes played (progress displays)."""
    started = time.perf_counter()
    groups = {"train": list(tasks), **config.resolve_eval_sets()}
    every = list({t.id: t for group in groups.values() for t in group}.values())
    protocol = config.evaluation.protocol
    total = len(every) * len(envs) * (int(protocol.greedy) + protocol.samples)
    played = 0

    def count(_: Trajectory) -> None:
        nonlocal played
        played += 1
        if on_episode is not None:
            on_episode(played, total)

    report = await evaluate_paired(every, envs, make_actor, protocol, workflow, store, run_id, count, guard=guard)
    per_task_stats = report.per_task
    per_task = {tid: st.success_rate for tid, st in per_task_stats.items() if st.success_rate is not None}
    summaries = {tid: report.summary(tid) for tid in report.task_ids}
    per_set, per_set_greedy = {}, {}
    for name, group in groups.items():
        verified = sum(per_task_stats[t.id].verified for t in group if t.id in per_task_stats)
        if verified:
            per_set[name] = sum(per_task_stats[t.id].successes for t in group if t.id in per_task_stats) / verified
        greedy = summarize_episodes(report.records, [t.id for t in group]).greedy
        if greedy is not None:
            per_set_greedy[name] = greedy
    train_ids = [t.id for t in tasks]
    train = summarize_episodes(report.records, train_ids)
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
        greedy=train.greedy,
        pass_at_k=train.pass_at,
        per_task_greedy={tid: m.greedy for tid, m in summaries.items() if m.greedy is not None},
        per_task_pass_at_k={tid: m.pass_at for tid, m in summaries.items() if m.pass_at},
        per_set_greedy=per_set_greedy,
        protocol=config.evaluation.protocol,
        phone_s=round(report.phone_s, 2),
        records=report.records,
        set_tasks={name: [t.id for t in group] for name, group in groups.items()},
    )
    logger.info(
        "evaluation %s: greedy %s, sampled %d/%d (%.1f%%), %s; %s",
        label,
        "-" if result.greedy is None else f"{100 * result.greedy:.1f}%",
        result.successes,
        result.episodes,
        100 * result.success_rate,
        ", ".join(f"pass@{k} {100 * v:.1f}%" for k, v in result.pass_at_k.items()),
        ", ".join(f"{k} {100 * v:.1f}%" for k, v in per_set.items()),
    )
    return result


def run_experiment(
    config: ExperimentConfig,
    run_dir: Path,
    resume: bool = False,
    on_progress: Callable[[RunProgress], None] | None = None,
) -> RunResult:
    """Train as ``config`` says, writing everything under ``run_dir`` (the
    :class:`~darwin.run.recipe.TrainingRecipe`: setup, train, cleanup)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "experiment.json").write_text(config.model_dump_json(indent=2))
    return asyncio.run(run_recipe(config, run_dir, resume, on_progress))
