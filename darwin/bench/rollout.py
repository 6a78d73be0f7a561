"""``darwin bench rollout``: asynchronous vs synchronous rollout under heavy-tailed phone latency.

Every phone is a SimPhone whose actions take a lognormal time with occasional long stalls
(cloud phones behave like this), time-scaled so the benchmark runs in minutes. Inference
goes through the real :class:`~darwin.policies.batcher.DynamicBatcher` to a backend that
takes ``base + per_item * batch`` seconds, so inference batching, queueing and policy idle
time are real. Both modes run the same workers, workflow and buffer; only the lockstep
differs. The ideal throughput is ``N / mean step latency`` with the latencies actually
drawn in the run.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from darwin.actions import Action
from darwin.agents.base import Actor
from darwin.agents.scripted import RandomActor
from darwin.curricula.static import StaticCurriculum
from darwin.envs.sim.env import SimPhoneEnv
from darwin.policies.base import Policy
from darwin.policies.batcher import BatcherConfig, DynamicBatcher
from darwin.replay_buffer import ReplayBuffer
from darwin.rollout import RolloutEngine
from darwin.task_registry import task_set
from darwin.types import ChatMessage, Decision, Generation, Observation, Prompt, Transition
from darwin.workflows.step import StepConfig, StepWorkflow


@dataclass(frozen=True)
class LatencyModel:
    """Per-action latency: lognormal(median, sigma) plus a stall of ``stall_s`` with ``stall_p``."""

    median_s: float = 0.3
    sigma: float = 0.8
    stall_p: float = 0.02
    stall_s: float = 5.0
    scale: float = 0.5

    def draw(self, rng: random.Random) -> float:
        """One action's latency in seconds (already multiplied by ``scale``)."""
        t = self.median_s * math.exp(rng.gauss(0.0, self.sigma))
        if rng.random() < self.stall_p:
            t += self.stall_s
        return t * self.scale

    @property
    def mean_s(self) -> float:
        """Expected latency per action in seconds (scaled)."""
        return self.scale * (self.median_s * math.exp(self.sigma**2 / 2) + self.stall_p * self.stall_s)


class _SlowPhone(SimPhoneEnv):
    """A SimPhone whose actions take a drawn time (awaited, like network I/O)."""

    def __init__(self, seed: int, latency: LatencyModel) -> None:
        super().__init__(seed=seed, name=f"slow-{seed}")
        self.latency = latency
        self.rng = random.Random(seed)
        self.waited = 0.0
        self.actions = 0

    async def aexecute(self, action: Action) -> None:
        delay = self.latency.draw(self.rng)
        self.waited += delay
        self.actions += 1
        await asyncio.sleep(delay)
        self.execute(action)


class _TimedBackend(Policy):
    """Inference that takes ``base_s + per_item_s * batch`` seconds (the event loop stays free)."""

    def __init__(self, base_s: float, per_item_s: float) -> None:
        self.base_s, self.per_item_s = base_s, per_item_s

    async def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        await asyncio.sleep(self.base_s + self.per_item_s * len(prompts))
        return [Generation(text="", policy_version=self.version) for _ in prompts]


class _BatchedRandomActor(Actor):
    """Asks the shared batcher for every step, then acts randomly."""

    def __init__(self, policy: Policy, seed: int) -> None:
        self.policy = policy
        self.random = RandomActor(seed=seed, finish_probability=0.0)

    async def act(self, observation: Observation, history: Sequence[Transition]) -> Decision:
        prompt = Prompt(messages=(ChatMessage(role="user", text=observation.goal, images=(observation.screenshot,)),))
        (generation,) = await self.policy.generate([prompt])
        return Decision(action=self.random.sample(observation.device_size), generation=generation, prompt=prompt)


@dataclass(frozen=True)
class RolloutBenchRow:
    """One configuration's figures."""

    phones: int
    mode: str
    steps: int
    seconds: float
    steps_per_s: float
    ideal_steps_per_s: float
    idle_fraction: float
    mean_batch: float

    @property
    def efficiency(self) -> float:
        """Measured over ideal throughput."""
        return self.steps_per_s / self.ideal_steps_per_s if self.ideal_steps_per_s else 0.0

    def cells(self) -> tuple[str, ...]:
        """Phones, mode, env steps/s, ideal steps/s, % of ideal, policy idle and mean batch, formatted for a table."""
        return (
            str(self.phones),
            self.mode,
            f"{self.steps_per_s:.1f}",
            f"{self.ideal_steps_per_s:.1f}",
            f"{100 * self.efficiency:.1f}%",
            f"{100 * self.idle_fraction:.1f}%",
            f"{self.mean_batch:.2f}",
        )


async def _run_one(
    phones: int, mode: Literal["async", "sync"], seconds: float, latency: LatencyModel, base_s: float, per_item_s: float
) -> RolloutBenchRow:
    envs = [_SlowPhone(seed=i, latency=latency) for i in range(phones)]
    batcher = DynamicBatcher(
        _TimedBackend(base_s, per_item_s), BatcherConfig(min_batch=1, max_batch=phones, max_wait=0.005)
    )
    async with batcher:
        engine = RolloutEngine(
            envs,
            lambda i: _BatchedRandomActor(batcher, seed=i),
            StaticCurriculum(task_set("base8"), mode="uniform", seed=0),
            ReplayBuffer(rollout_steps=10**9),
            workflow=StepWorkflow(config=StepConfig(observation_size=(56, 112), end_on_success=True)),
            mode=mode,
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        stats = await engine.run(until=lambda: loop.time() >= deadline)
        batch_stats = batcher.stats()
    actions = sum(e.actions for e in envs)
    mean_latency = sum(e.waited for e in envs) / max(1, actions)
    return RolloutBenchRow(
        phones=phones,
        mode=mode,
        steps=stats.env_steps,
        seconds=stats.elapsed,
        steps_per_s=stats.steps_per_second,
        ideal_steps_per_s=phones / mean_latency if mean_latency else 0.0,
        idle_fraction=batch_stats.idle_fraction,
        mean_batch=batch_stats.mean_batch_size,
    )


def bench_rollout(
    phones: Sequence[int] = (16, 32),
    scaling: Sequence[int] = (8, 16, 32, 64),
    seconds: float = 20.0,
    latency: LatencyModel | None = None,
    base_s: float = 0.004,
    per_item_s: float = 0.0005,
) -> list[RolloutBenchRow]:
    """Async vs sync at each of ``phones``, then async at each of ``scaling`` (one run)."""
    latency = latency or LatencyModel()
    rows: list[RolloutBenchRow] = []
    modes: tuple[Literal["async", "sync"], ...] = ("async", "sync")
    for n in phones:
        for mode in modes:
            rows.append(asyncio.run(_run_one(n, mode, seconds, latency, base_s, per_item_s)))
    for n in scaling:
        if n not in phones:
            rows.append(asyncio.run(_run_one(n, "async", seconds, latency, base_s, per_item_s)))
    return rows
