"""The rollout engine: one worker per phone, transitions streamed into the replay buffer.

Asynchronous mode (the paper's): phones never wait for each other; a worker samples a new
task the moment its episode ends. Synchronous vectorised mode (for comparison): every phone
finishes its step before any phone takes the next one, as in a vectorised gym loop.

    >>> import asyncio
    >>> from darwin.agents.scripted import OracleActor
    >>> from darwin.replay_buffer import ReplayBuffer
    >>> from darwin.curricula.static import StaticCurriculum
    >>> from darwin.envs.sim.env import SimPhoneEnv
    >>> from darwin.rollout import RolloutEngine
    >>> from darwin.task_registry import task_set
    >>> buffer = ReplayBuffer(rollout_steps=20)
    >>> engine = RolloutEngine([SimPhoneEnv(seed=i) for i in range(2)], lambda i: OracleActor(),
    ...                        curriculum=StaticCurriculum(task_set("base8")), buffer=buffer)
    >>> stats = asyncio.run(engine.run(until=lambda: buffer.completed_steps >= 20))
    >>> len(buffer.take_completed()) > 0 and stats.env_steps >= 20
    True
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from darwin.actions import Action
from darwin.agents.base import Actor
from darwin.curricula.base import Curriculum, EpisodeOutcome
from darwin.envs.base import ForkUnsupported, InfraError, PhoneEnv, PhoneWrapper
from darwin.envs.fleet import PhoneFleet
from darwin.envs.guard import ActionGuard, GuardedPhone
from darwin.replay_buffer import ReplayBuffer
from darwin.store import RunStore
from darwin.types import (
    ACTOR,
    Branch,
    DemoStart,
    EpisodeSampling,
    Outcome,
    Phase,
    Task,
    TerminationReason,
    Trajectory,
    Transition,
)
from darwin.workflows.base import Workflow
from darwin.workflows.step import LifecycleWorkflow

logger = logging.getLogger(__name__)


def _lost(trajectory: Trajectory) -> bool:
    return trajectory.termination is not None and trajectory.termination.reason == TerminationReason.INFRA_TRUNCATED


@dataclass
class RolloutStats:
    """Counters of one engine run."""

    started: float = field(default_factory=time.perf_counter)
    finished: float | None = None
    env_steps: int = 0
    episodes: int = 0
    successes: int = 0
    unverified: int = 0
    """Episodes played to the end whose verifier could not decide (e.g. the judge was unreachable)."""
    terminations: Counter[str] = field(default_factory=Counter)
    truncation_causes: Counter[str] = field(default_factory=Counter)
    error_causes: Counter[str] = field(default_factory=Counter)
    """Causes of the episodes that ended in an error (``TerminationReason.ERROR``)."""
    backpressure_s: float = 0.0
    """Phone-seconds spent waiting for the learner to drain the buffer (``max_backlog_steps``)."""
    phones_waiting: int = 0
    """Phones waiting for the learner right now."""
    episode_phone_s: float = 0.0
    """Phone-seconds in the recorded episodes, from the workflow's start to the phone back home."""
    infra_phone_s: float = 0.0
    """The part of ``episode_phone_s`` in episodes that ended as an infrastructure truncation."""
    continuations: int = 0
    """Branching rollouts: continuation episodes played (not in ``episodes``, ``successes`` or
    ``unverified``, which count the episodes the curriculum asked for; their phone time,
    terminations and truncation causes are counted with the others')."""
    continuation_successes: int = 0

    @property
    def elapsed(self) -> float:
        return (self.finished or time.perf_counter()) - self.started

    @property
    def steps_per_second(self) -> float:
        return self.env_steps / self.elapsed if self.elapsed > 0 else 0.0

    def record(self, trajectory: Trajectory, phone_s: float = 0.0) -> None:
        """Count a finished episode that held its phone for ``phone_s`` seconds."""
        self.episode_phone_s += phone_s
        if trajectory.branch is not None:
            self.continuations += 1
            self.continuation_successes += trajectory.outcome is Outcome.SUCCESS
        else:
            self.episodes += 1
            self.successes += trajectory.outcome is Outcome.SUCCESS
            self.unverified += trajectory.outcome is Outcome.UNVERIFIED
        if trajectory.termination is not None:
            self.terminations[trajectory.termination.reason.value] += 1
            if trajectory.termination.reason == TerminationReason.INFRA_TRUNCATED:
                self.truncation_causes[trajectory.termination.cause] += 1
                self.infra_phone_s += phone_s
            elif trajectory.termination.reason == TerminationReason.ERROR:
                self.error_causes[trajectory.termination.cause] += 1


@dataclass(frozen=True)
class EpisodeRequest:
    """One episode an evaluation asks for (:meth:`RolloutEngine.run_episodes`): the task, the
    phone that must play it (``None``: whichever is free), and how a model actor samples it
    (``None``: the policy's own sampling)."""

    task: Task
    phone: int | None = None
    sampling: EpisodeSampling | None = None


@dataclass(frozen=True)
class Branching:
    """Branching rollouts: after each training episode, ``continuations`` more episodes from
    each of up to ``points`` of the states it acted from, chosen at random among its steps.

    A continuation puts the phone back in the state the episode started from, replays the
    episode's actions before the chosen step (they begin the agent's history, as a
    demonstration's do, and are no training rows) and lets the agent play on with the step
    budget the episode had left there. The chosen step and every continuation's first step
    then acted from exactly the same state; the learner's ``gae`` estimator gives each of them
    the advantage of its return over the mean return of its siblings (an exact state-level
    baseline, :func:`darwin.algos.branching.sibling_advantages`) instead of the critic's.

    Episodes that were not scored (an infrastructure truncation, an error, a block, a goal
    already met) and tasks with a setup phase are not branched. Continuations play on the
    episode's own phone, right after it; the episode and its continuations reach the learner
    in one update. Phones must fork (:attr:`PhoneEnv.forks`: in-process SimPhones).

        >>> Branching(continuations=2).points  # at most 1 + 1 x 2 episodes per curriculum episode
        1
    """

    continuations: int
    points: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        if self.continuations < 1:
            raise ValueError(f"Branching.continuations must be >= 1, got {self.continuations}")
        if self.points < 1:
            raise ValueError(f"Branching.points must be >= 1, got {self.points}")


class _Lockstep(PhoneWrapper):
    """Makes every phone wait for all the others after each action (synchronous mode)."""

    def __init__(self, env: PhoneEnv, barrier: asyncio.Barrier) -> None:
        super().__init__(env)
        self.barrier = barrier

    @property
    def quarantined(self) -> bool:
        return False  # a worker that stopped would leave the others waiting at the barrier for good

    async def aexecute(self, action: Action) -> None:
        await self.env.aexecute(action)
        await self.barrier.wait()


class RolloutEngine:
    """Runs episodes on every phone until told to stop, feeding the replay buffer.

    Args:
        envs: one phone per worker.
        make_actor: builds the actor of worker ``i`` (model actors share one batched policy).
        curriculum: picks each next task (:meth:`run`; not needed by :meth:`run_episodes`).
        buffer: receives every transition as it happens and every completed trajectory
            (:meth:`run`; evaluation runs without one).
        workflow: the interaction pattern (default: the lifecycle loop, which runs whatever
            phases a task has: only the execution phase for tasks without a lifecycle).
        store: optional run database for episodes and steps.
        mode: ``"async"`` (the paper's) or ``"sync"`` (all phones step together).
        group_size: group mode (GRPO, GiGPO, shortest-path adjustment): run each sampled
            task this many times in a row on the same phone, from the same start state; the
            trajectories carry the group id (``Trajectory.group``).
        max_backlog_steps: backpressure: a phone starts a new episode only while the buffer
            holds fewer untrained steps than this (completed trajectories plus running
            episodes, :meth:`ReplayBuffer.backlog_steps`). Without it a learner slower than
            the phones trains on ever older data (the policy-version lag grows by one per
            update); with ``rollout_steps`` the lag stays about one update. ``None``: never wait.
        on_episode: called with every finished trajectory (progress bars).
        fleet: looks after the phones between training episodes (hard resets on a schedule,
            spares for quarantined phones; :class:`~darwin.envs.fleet.PhoneFleet`). Its phones
            are the engine's ``envs``; a worker plays on whatever phone its slot holds.
        group_lost: group mode, when a member is lost (an infrastructure truncation, or its
            phone replaced or retired before the group's rollouts all ran): ``"train"`` trains
            the group on the members it has (the lost one as ``learner.infra_truncation``
            says), ``"drop"`` leaves the whole group out. Either way nothing waits for a
            member that will never run.
        guard: checks every action before it reaches a phone (:mod:`darwin.envs.guard`): each
            episode plays on a :class:`~darwin.envs.guard.GuardedPhone`; ``None``: no checks.
        branching: branching rollouts in training (:class:`Branching`); needs phones that
            fork, ``mode='async'`` and no ``group_size``. ``None``: none.

    Training calls :meth:`run` (the curriculum picks tasks until told to stop); evaluation
    calls :meth:`run_episodes` with a fixed queue of tasks. Both play each episode the same
    way (:meth:`_play`): the same workflow call, stored steps and verdicts.
    """

    def __init__(
        self,
        envs: Sequence[PhoneEnv],
        make_actor: Callable[[int], Actor],
        curriculum: Curriculum | None = None,
        buffer: ReplayBuffer | None = None,
        workflow: Workflow | None = None,
        store: RunStore | None = None,
        run_id: str | None = None,
        mode: Literal["async", "sync"] = "async",
        group_size: int | None = None,
        max_backlog_steps: int | None = None,
        on_episode: Callable[[Trajectory], None] | None = None,
        fleet: PhoneFleet | None = None,
        group_lost: Literal["train", "drop"] = "train",
        guard: ActionGuard | None = None,
        branching: Branching | None = None,
    ) -> None:
        if not envs:
            raise ValueError("RolloutEngine needs at least one phone")
        if branching is not None:
            unforked = [e.name for e in envs if not e.forks]
            if unforked:
                raise ForkUnsupported(
                    f"branching rollouts restore a phone to an earlier state, which {', '.join(unforked)} cannot "
                    "(PhoneEnv.forks is False); use in-process SimPhones (phones.provider='sim') or turn branching off"
                )
            if mode != "async" or group_size is not None:
                raise ValueError(
                    "branching rollouts need mode='async' and no group_size: an episode and its continuations "
                    "are their own group, played on one phone"
                )
        if mode not in ("async", "sync"):
            raise ValueError(f"mode must be 'async' or 'sync', got {mode!r}")
        if store is not None and run_id is None:
            raise ValueError("pass the run_id of store.start_run(...) together with store")
        if group_lost not in ("train", "drop"):
            raise ValueError(f"group_lost must be 'train' or 'drop', got {group_lost!r}")
        if fleet is not None and mode == "sync":
            raise ValueError(
                "a phone fleet (hard resets, spares) needs mode='async': a phone replaced mid-step would break the lockstep"
            )
        if fleet is not None and list(fleet.envs) != list(envs):
            raise ValueError("pass the fleet's own phones as envs (fleet.envs)")
        if max_backlog_steps is not None and buffer is not None and max_backlog_steps < buffer.rollout_steps:
            raise ValueError(
                f"max_backlog_steps={max_backlog_steps} is below the buffer's rollout_steps={buffer.rollout_steps}: "
                "the learner would never get a batch; use at least rollout_steps (or None)"
            )
        self.envs = list(envs)
        self.make_actor = make_actor
        self.curriculum = curriculum
        self.buffer = buffer
        self.workflow = workflow or LifecycleWorkflow()
        self.store = store
        self.run_id = run_id
        self.mode = mode
        self.group_size = group_size
        self.max_backlog_steps = max_backlog_steps
        self.on_episode = on_episode
        self.fleet = fleet
        self.group_lost = group_lost
        self.guard = guard
        self.branching = branching
        self._branch_rng = random.Random(branching.seed if branching is not None else 0)
        self.stats = RolloutStats()

    def _next_group(self) -> list[tuple[Task, str | None]]:
        """The episodes a free phone runs next: one task, or in group mode ``group_size``
        rollouts of one task under a fresh group id, all on that phone, so every member
        starts from the same phone state (the phone resets between episodes)."""
        assert self.curriculum is not None
        task = self.curriculum.next_task()
        if self.group_size is None:
            return [(task, None)]
        group = uuid.uuid4().hex
        return [(task, group)] * self.group_size

    async def run(self, until: Callable[[], bool], poll_interval: float = 0.01) -> RolloutStats:
        """Run all workers until ``until()`` is true, then stop them cleanly.

        Episodes still running at the stop are abandoned (their transitions never reach
        the learner); completed ones are all in the buffer.
        """
        if self.curriculum is None or self.buffer is None:
            raise ValueError(
                "RolloutEngine.run trains: pass a curriculum and a buffer (run_episodes evaluates without them)"
            )
        self.stats = RolloutStats()
        stop = asyncio.Event()
        envs: list[PhoneEnv] = self.envs
        barrier = None
        if self.mode == "sync":
            barrier = asyncio.Barrier(len(self.envs))
            envs = [_Lockstep(e, barrier) for e in self.envs]
        workers = [asyncio.create_task(self._worker(i, env, stop), name=f"phone-{i}") for i, env in enumerate(envs)]
        try:
            while not until():
                done = [w for w in workers if w.done()]
                for w in done:
                    w.result()  # a crashed worker is a bug: surface it now
                if len(done) == len(workers):
                    raise RuntimeError(
                        "every phone is quarantined; reset them through their provider and resume"
                        + _quarantine_reasons(self.envs)
                    )
                await asyncio.sleep(poll_interval)
        finally:
            stop.set()
            if barrier is not None:
                await barrier.abort()
            for w in workers:
                w.cancel()
            results = await asyncio.gather(*workers, return_exceptions=True)
            self.stats.finished = time.perf_counter()
        for r in results:
            if isinstance(r, BaseException) and not isinstance(r, (asyncio.CancelledError, asyncio.BrokenBarrierError)):
                raise r
        return self.stats

    async def run_episodes(self, episodes: Sequence[Task | EpisodeRequest]) -> list[Trajectory]:
        """Evaluation: play every episode of ``episodes`` once (repeat a task to run it again),
        with no learner; the trajectories in the order of ``episodes``.

        A :class:`Task` (or an :class:`EpisodeRequest` without ``phone``) goes to the next free
        phone; a request with ``phone=i`` waits for phone ``i``, so its initial state is that
        phone's (paired evaluations). A request's ``sampling`` fixes how a model actor samples
        it. After each episode a phone follows its own reset rule, as in training."""
        requests = [e if isinstance(e, EpisodeRequest) else EpisodeRequest(e) for e in episodes]
        pinned = [r.phone for r in requests if r.phone is not None]
        if pinned and not 0 <= min(pinned) <= max(pinned) < len(self.envs):
            raise ValueError(f"an episode asks for phone {max(pinned)}, but there are {len(self.envs)} phones")
        self.stats = RolloutStats()
        anyone = [i for i in reversed(range(len(requests))) if requests[i].phone is None]
        own: dict[int, list[int]] = {i: [] for i in range(len(self.envs))}
        for index in reversed(range(len(requests))):
            phone = requests[index].phone
            if phone is not None:
                own[phone].append(index)
        results: dict[int, Trajectory] = {}

        async def worker(i: int, env: PhoneEnv) -> None:
            actor = self.make_actor(i)
            while own[i] or anyone:
                if env.quarantined:
                    logger.error("phone %s is quarantined; it takes no more episodes", env.name)
                    return
                index = own[i].pop() if own[i] else anyone.pop()
                request = requests[index]
                results[index] = await self._play(env, actor, request.task, None, request.sampling)

        try:
            await asyncio.gather(*(worker(i, env) for i, env in enumerate(self.envs)))
        finally:
            self.stats.finished = time.perf_counter()
        if len(results) < len(requests):
            stranded = {self.envs[i].name for i, left in own.items() if left}
            raise RuntimeError(
                f"{len(requests) - len(results)} episode(s) did not run ({len(results)} did): "
                + (
                    f"their phone is quarantined ({', '.join(sorted(stranded))})"
                    if stranded and not anyone
                    else "every phone is quarantined"
                )
                + "; reset the phones through their provider and rerun"
                + _quarantine_reasons(self.envs)
            )
        return [results[i] for i in range(len(requests))]

    async def _worker(self, i: int, env: PhoneEnv, stop: asyncio.Event) -> None:
        actor = self.make_actor(i)
        queue: list[tuple[Task, str | None]] = []
        assert self.buffer is not None
        while not stop.is_set():
            if env.quarantined:
                if self.fleet is not None and not env.recovers:
                    replacement = await self.fleet.recover(i)
                    if replacement is not env:  # the group cannot go on from another phone's state
                        queue = self._lose_group(queue)
                    if replacement is None:
                        logger.error("phone %s is quarantined and no spare is left; its worker stops", env.name)
                        return
                    env = replacement
                    continue
                if not env.recovers:
                    logger.error("phone %s is quarantined; its worker stops", env.name)
                    self._lose_group(queue)
                    return
                await self._wait_for_recovery(env, stop)
                continue  # re-check quarantine and stop
            await asyncio.sleep(0)  # in-process phones never block: let the others and the stop check run
            if not queue:
                # Backpressure only between groups: a group half run would hold back its
                # finished members (the buffer releases whole groups) and stall the learner.
                if self.max_backlog_steps is not None and self.buffer.backlog_steps() >= self.max_backlog_steps:
                    await self._wait_for_learner(stop)
                    continue  # re-check quarantine and stop
                queue = self._next_group()
            task, group = queue.pop()
            if self.branching is not None:
                trajectory = await self._play_branching(env, actor, task)
            else:
                trajectory = await self._play(env, actor, task, group)
            if group is not None and self.group_lost == "drop" and _lost(trajectory):
                queue = self._lose_group([(task, group), *queue])
            if self.fleet is not None:
                following = await self.fleet.after_episode(i, trajectory)
                if following is not env:
                    queue = self._lose_group(queue)
                if following is None:
                    logger.error("phone %s retired and no spare is left; its worker stops", env.name)
                    return
                env = following

    def _lose_group(self, queue: list[tuple[Task, str | None]]) -> list[tuple[Task, str | None]]:
        """The rest of a group will not run: let the buffer release or drop what the group has
        (``group_lost``), so no update waits for it. Returns the emptied queue."""
        assert self.buffer is not None
        groups = {group for _, group in queue if group is not None}
        for group in groups:
            kept = self.buffer.close_group(group, drop=self.group_lost == "drop")
            logger.warning(
                "group %s lost a member: %s its %d finished member(s)",
                group[:8],
                "dropped" if self.group_lost == "drop" else "training on",
                kept,
            )
        return []

    @staticmethod
    async def _wait_for_recovery(env: PhoneEnv, stop: asyncio.Event, poll_s: float = 0.5) -> None:
        """Wait until a recovering phone (``env.recovers``) serves again, or the run stops."""
        logger.warning("phone %s is quarantined; its worker waits for it to come back", env.name)
        while env.quarantined and not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=poll_s)
        if not env.quarantined:
            logger.warning("phone %s is back; its worker takes episodes again", env.name)

    async def _play_branching(self, env: PhoneEnv, actor: Actor, task: Task) -> Trajectory:
        """A curriculum episode, then its continuations (:class:`Branching`), held together in
        the buffer until the last one ends; the curriculum episode's trajectory."""
        assert self.branching is not None and self.buffer is not None
        family = uuid.uuid4().hex
        start_state = await env.aprobe_state()
        if start_state is None:
            raise ForkUnsupported(f"{env.name} returned no state to branch from (probe_state() is None)")
        self.buffer.hold(family)
        try:
            root = await self._play(env, actor, task, family)
            for step in self._branch_points(root):
                fork = Branch(parent=root.episode_id, step=step)
                for _ in range(self.branching.continuations):
                    continuation = await self._play(
                        env, actor, _continuation_task(root, step), family, start_state=start_state, branch=fork
                    )
                    _check_fork(root, continuation, fork, env.name)
        finally:
            self.buffer.release(family)
        return root

    def _branch_points(self, root: Trajectory) -> list[int]:
        """The actor steps of ``root`` its continuations start from (none for an unscored
        episode or a task with a setup phase)."""
        assert self.branching is not None
        if root.outcome.scored is None or (
            root.termination is not None and root.termination.reason == TerminationReason.BLOCKED
        ):
            return []
        lifecycle = root.task.lifecycle
        if lifecycle is not None and lifecycle.setup is not None:
            return []
        own = _execution_steps(root)
        return sorted(self._branch_rng.sample(range(len(own)), min(self.branching.points, len(own))))

    async def _play(
        self,
        env: PhoneEnv,
        actor: Actor,
        task: Task,
        group: str | None,
        sampling: EpisodeSampling | None = None,
        *,
        start_state: dict[str, object] | None = None,
        branch: Branch | None = None,
    ) -> Trajectory:
        """One episode: the workflow on ``env``, every step streamed to the buffer (if any)
        and the store, then home; the trajectory, its verdicts and the outcome recorded.
        ``start_state``: put the phone in it first (a continuation, ``branch``)."""
        episode_id = uuid.uuid4().hex
        actor.use_sampling(sampling)
        clock = time.perf_counter()  # the episode's phone time (RolloutStats.episode_phone_s)
        if start_state is not None:
            await env.arestore_state(start_state)
        if self.buffer is not None:
            self.buffer.start(episode_id, group=group)
        if self.store is not None:
            assert self.run_id is not None
            self.store.start_episode(self.run_id, episode_id, task, phone=env.name, device_size=env.device_size)
        final_screen: np.ndarray | None = None
        try:
            played_on = env if self.guard is None else GuardedPhone(env, self.guard, task)
            trajectory = await self.workflow.run(played_on, task, actor, emit=self._emit, episode_id=episode_id)
            final_screen = await self._final_screen(env, trajectory)
            await env.ago_home()
            phone_s = time.perf_counter() - clock
        except (asyncio.CancelledError, asyncio.BrokenBarrierError):
            if self.buffer is not None:
                self.buffer.abandon(episode_id)
            raise
        trajectory.group, trajectory.phone, trajectory.branch = group, env.name, branch
        if self.buffer is not None:
            self.buffer.finish(trajectory)
        self.stats.record(trajectory, phone_s)
        if self.curriculum is not None and branch is None:  # the curriculum learns from what it asked for
            assert trajectory.termination is not None
            self.curriculum.update(
                task,
                EpisodeOutcome(
                    task.id, trajectory.success, len(trajectory), trajectory.termination.reason, trajectory.start_step
                ),
            )
        if self.store is not None:
            for phase, verdict in trajectory.verdicts.items():
                success, reason, usage = verdict.success, verdict.reason, verdict.usage
                self.store.record_verdict(  # no usage: the cost columns stay at their None defaults
                    episode_id,
                    phase,
                    self.workflow.verifier_kind,
                    success,
                    None if success is None else float(success),
                    reason,
                    prompt_tokens=None if usage is None else usage.prompt_tokens,
                    completion_tokens=None if usage is None else usage.completion_tokens,
                    cost_usd=None if usage is None else usage.cost_usd,
                    requests=None if usage is None else usage.requests,
                    verifier_config=None if usage is None else usage.config,
                )
            self.store.finish_episode(trajectory, final_screen)
        if self.on_episode is not None:
            self.on_episode(trajectory)
        return trajectory

    async def _final_screen(self, env: PhoneEnv, trajectory: Trajectory) -> np.ndarray | None:
        """The screen after the episode's last action, at the agent's screenshot size, for the
        store (a judge reviewing the run looks at it); ``None`` without a screenshot directory,
        without steps, or when the phone cannot take it (logged, never an episode failure)."""
        if self.store is None or self.store.screenshot_dir is None or not trajectory.transitions:
            return None
        height, width = trajectory.transitions[-1].observation.screenshot.shape[:2]
        try:
            return await env.ascreenshot((width, height))
        except InfraError as exc:
            logger.warning("final screenshot of episode %s on %s failed: %s", trajectory.episode_id, env.name, exc)
            return None

    async def _wait_for_learner(self, stop: asyncio.Event) -> None:
        buffer, max_backlog_steps = self.buffer, self.max_backlog_steps
        if buffer is None or max_backlog_steps is None:
            raise RuntimeError("waiting for the learner needs a replay buffer and max_backlog_steps")
        waited = time.perf_counter()
        self.stats.phones_waiting += 1
        try:
            while buffer.backlog_steps() >= max_backlog_steps and not stop.is_set():
                await asyncio.sleep(0.01)
        finally:
            self.stats.phones_waiting -= 1
            self.stats.backpressure_s += time.perf_counter() - waited

    def _emit(self, transition: Transition) -> None:
        if self.buffer is not None:
            self.buffer.add(transition)
        self.stats.env_steps += 1
        if self.store is not None:
            self.store.record_step(transition, transition.observation.screenshot)


def _execution_steps(trajectory: Trajectory) -> list[Transition]:
    """The actor's steps of the execution phase, in order (the states branches start from)."""
    return [t for t in trajectory.transitions if t.agent == ACTOR and t.phase == Phase.EXECUTION]


def _continuation_task(root: Trajectory, step: int) -> Task:
    """``root``'s task started where ``root``'s actor step ``step`` acted: every action the
    phone played before it (a demonstration it started inside, then the agent's own; parse
    errors acted on nothing), with the step budget ``root`` had left there."""
    played = [t.decision.action for t in root.demonstration]
    played += [t.decision.action for t in _execution_steps(root)[:step]]
    actions = tuple(a for a in played if a is not None)
    return root.task.model_copy(
        update={"start": DemoStart(remaining=0, actions=actions), "step_budget": root.task.step_budget - step}
    )


def _check_fork(root: Trajectory, continuation: Trajectory, fork: Branch, phone: str) -> None:
    """A continuation must start on the screen its parent acted from at the fork: otherwise
    the phone did not replay deterministically and the siblings are no baseline for each other."""
    own = _execution_steps(continuation)
    if not own:  # ended before its first step (the phone failed while the demonstration played)
        return
    expected = _execution_steps(root)[fork.step].observation.screenshot
    if not np.array_equal(own[0].observation.screenshot, expected):
        raise RuntimeError(
            f"continuation {continuation.episode_id} of {root.task.id} on {phone} did not start on the screen its "
            f"parent {root.episode_id} acted from at step {fork.step}: the phone did not replay its actions "
            "deterministically, so siblings are no baseline for each other; turn branching off for this phone"
        )


def _quarantine_reasons(envs: Sequence[PhoneEnv]) -> str:
    """The distinct reasons the phones give for their quarantine, as the tail of an error message."""
    reasons = Counter(r for env in envs if (r := env.quarantine_reason) is not None)
    if not reasons:
        return ""
    return ". Why: " + "; ".join(f"{reason} ({n} phone{'s' * (n > 1)})" for reason, n in reasons.most_common())
