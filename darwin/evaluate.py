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

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from darwin.agents.base import Actor
from darwin.envs.base import PhoneEnv
from darwin.store import RunStore
from darwin.types import Task, TerminationReason, Trajectory, Transition
from darwin.workflows.base import Workflow
from darwin.workflows.step import LifecycleWorkflow

logger = logging.getLogger(__name__)


@dataclass
class TaskScore:
    """Outcome counts for one task (or overall)."""

    episodes: int = 0
    successes: int = 0
    unverified: int = 0
    infra_truncated: int = 0
    errors: int = 0
    steps: int = 0

    @property
    def verified(self) -> int:
        return self.episodes - self.unverified - self.infra_truncated - self.errors

    @property
    def success_rate(self) -> float | None:
        """Successes over verified episodes; infrastructure truncations never count as failures."""
        return self.successes / self.verified if self.verified else None

    def add(self, t: Trajectory) -> None:
        self.episodes += 1
        self.steps += len(t)
        reason = t.termination.reason if t.termination else TerminationReason.ERROR
        if reason == TerminationReason.INFRA_TRUNCATED:
            self.infra_truncated += 1
        elif reason == TerminationReason.ERROR:
            self.errors += 1
        elif t.success is None:
            self.unverified += 1
        elif t.success:
            self.successes += 1


@dataclass
class EvalReport:
    """Per-task and overall scores plus every trajectory."""

    run_id: str
    per_task: dict[str, TaskScore] = field(default_factory=dict)
    overall: TaskScore = field(default_factory=TaskScore)
    trajectories: list[Trajectory] = field(default_factory=list)


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

    Phones never wait for each other: a free phone takes the next pending episode.
    After each episode the phone only returns home; its state persists (paper section 3.2).
    ``make_actor(i)`` builds the actor for phone ``i``.
    """
    if not envs:
        raise ValueError("evaluate needs at least one phone")
    workflow = workflow or LifecycleWorkflow()
    report = EvalReport(run_id=run_id or uuid.uuid4().hex)
    for t in tasks:
        report.per_task[t.id] = TaskScore()
    queue: asyncio.Queue[Task] = asyncio.Queue()
    for _ in range(episodes_per_task):
        for t in tasks:
            queue.put_nowait(t)

    async def worker(i: int, env: PhoneEnv) -> None:
        actor = make_actor(i)
        while True:
            try:
                task = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            episode_id = uuid.uuid4().hex
            emit = None
            if store is not None:
                store.start_episode(report.run_id, episode_id, task, phone=env.name)
                emit = _recorder(store)
            trajectory = await workflow.run(env, task, actor, emit=emit, episode_id=episode_id)
            await env.ago_home()
            if store is not None:
                for phase, success in trajectory.phase_success.items():
                    reason = trajectory.phase_reasons.get(phase, "")
                    store.record_verdict(episode_id, phase, workflow.verifier_kind, success, None if success is None else float(success), reason)
                store.finish_episode(trajectory)
            report.per_task[task.id].add(trajectory)
            report.overall.add(trajectory)
            report.trajectories.append(trajectory)
            if on_episode is not None:
                on_episode(trajectory)

    await asyncio.gather(*(worker(i, env) for i, env in enumerate(envs)))
    return report


def _recorder(store: RunStore) -> Callable[[Transition], None]:
    def record(transition: Transition) -> None:
        store.record_step(transition, transition.observation.screenshot)

    return record
