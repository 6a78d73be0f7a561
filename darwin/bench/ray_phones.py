"""``darwin bench ray``: SimPhones in one process vs spread over two Ray nodes, and the Ray hop.

Throughput: the real rollout engine, step workflow (rule verification after every step)
and replay buffer drive N SimPhones with a random agent (no model: the phones and their
transport are what is measured), once with every phone in the driver process and once
with the phones served by :class:`~darwin.envs.ray_phones.PhoneHost` actors on a local
two-node Ray cluster (a head and a worker raylet, half the phones placed on each by node
label). Env steps per second over a fixed time.

Hop: one SimPhone, calls made one after another: the same call direct (in process) and
through a :class:`~darwin.envs.ray_phones.RayPhoneEnv` on the worker node; the difference
is what the hop adds (Ray's task submission, serialisation, the screenshot codec).

    >>> from darwin.bench.ray_phones import ThroughputRow
    >>> ThroughputRow(phones=8, placement="in-process", steps=100, seconds=2.0, episodes=3).steps_per_s
    50.0
"""

from __future__ import annotations

import asyncio
import functools
import logging
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from darwin.actions import Wait
from darwin.agents.scripted import RandomActor
from darwin.curricula.static import StaticCurriculum
from darwin.envs.base import PhoneEnv
from darwin.envs.ray_phones import RayPhoneGroup, RayPhonesConfig, build_ray_phones
from darwin.envs.sim.env import SimPhoneEnv
from darwin.replay_buffer import ReplayBuffer
from darwin.rollout import RolloutEngine
from darwin.task_registry import task_set
from darwin.workflows.step import StepConfig, StepWorkflow

logger = logging.getLogger(__name__)

OBSERVATION = (252, 560)
"""Screenshot size the agent gets (the paper's default observation)."""


@dataclass(frozen=True)
class ThroughputRow:
    """Env steps per second of ``phones`` SimPhones placed one way."""

    phones: int
    placement: Literal["in-process", "ray-2-nodes"]
    steps: int
    seconds: float
    episodes: int
    hosts: int = 0
    """Phone host processes (Ray only)."""
    driver_cpu_s: float = 0.0
    """CPU time of the driver process (all its threads: Ray's core worker included)."""

    @property
    def driver_cpu_ms_per_step(self) -> float:
        """Driver CPU milliseconds per env step."""
        return 1000 * self.driver_cpu_s / self.steps if self.steps else 0.0

    @property
    def steps_per_s(self) -> float:
        """Env steps per wall-clock second."""
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    def cells(self) -> tuple[str, ...]:
        """Phones, placement, hosts, env steps/s, episodes and driver CPU ms per step, formatted for a table."""
        return (
            str(self.phones),
            self.placement,
            str(self.hosts or "-"),
            f"{self.steps_per_s:.1f}",
            str(self.episodes),
            f"{self.driver_cpu_ms_per_step:.2f}",
        )


@dataclass(frozen=True)
class HopRow:
    """Mean time of one call, direct and through Ray (milliseconds)."""

    call: str
    calls: int
    direct_ms: float
    ray_ms: float

    @property
    def overhead_ms(self) -> float:
        """What the Ray hop adds to one call."""
        return self.ray_ms - self.direct_ms

    def cells(self) -> tuple[str, ...]:
        """Call, direct ms, via-Ray ms and overhead ms, formatted for a table."""
        return (self.call, f"{self.direct_ms:.2f}", f"{self.ray_ms:.2f}", f"{self.overhead_ms:.2f}")


@contextmanager
def local_two_node_cluster(object_store_mb: int = 100) -> Iterator[str]:
    """A Ray head (label node=a) and one worker raylet (node=b) on this machine, 1 CPU each;
    yields the address; shut down at exit."""
    import ray
    from ray.cluster_utils import Cluster

    store = object_store_mb * 1024 * 1024
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "object_store_memory": store,
            "include_dashboard": False,
            "labels": {"node": "a"},
        },
    )
    try:
        cluster.add_node(num_cpus=1, object_store_memory=store, labels={"node": "b"})
        ray.init(address=cluster.address, namespace="darwin-bench", log_to_driver=False)
        yield str(cluster.address)
    finally:
        ray.shutdown()
        cluster.shutdown()


def _two_node_config(address: str, phones: int, hosts_per_node: int) -> RayPhonesConfig:
    half = phones // 2
    return RayPhonesConfig(
        address=address,
        groups=(
            RayPhoneGroup(labels={"node": "a"}, count=half, seed=0, actors=min(hosts_per_node, half)),
            RayPhoneGroup(
                labels={"node": "b"}, count=phones - half, seed=half, actors=min(hosts_per_node, phones - half)
            ),
        ),
    )


async def _throughput(envs: Sequence[PhoneEnv], seconds: float) -> tuple[int, float, int, float]:
    cpu = time.process_time()
    engine = RolloutEngine(
        envs,
        lambda i: RandomActor(seed=i),
        StaticCurriculum(task_set("base8"), mode="uniform", seed=0),
        ReplayBuffer(rollout_steps=10**9),
        workflow=StepWorkflow(config=StepConfig(observation_size=OBSERVATION)),
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    stats = await engine.run(until=lambda: loop.time() >= deadline)
    return stats.env_steps, stats.elapsed, stats.episodes, time.process_time() - cpu


async def _mean_ms(call: Callable[[], Awaitable[Any]], calls: int) -> float:
    await call()  # warm (first render, first Ray submission)
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        times.append(time.perf_counter() - started)
    return 1000 * statistics.fmean(times)


async def _hop_rows(direct: PhoneEnv, remote: PhoneEnv, calls: int) -> list[HopRow]:
    async def step(env: PhoneEnv) -> None:  # what the step workflow sends per step with a rule verifier
        await env.ascreenshot(OBSERVATION)
        await env.aexecute(Wait())
        await env.aprobe_state()

    probes: list[tuple[str, Callable[[PhoneEnv], Awaitable[Any]]]] = [
        (f"screenshot {OBSERVATION[0]}x{OBSERVATION[1]}", lambda env: env.ascreenshot(OBSERVATION)),
        ("execute(wait)", lambda env: env.aexecute(Wait())),
        ("probe_state", lambda env: env.aprobe_state()),
        ("step (screenshot + execute + probe)", step),
    ]
    rows = []
    for name, probe in probes:
        direct_ms = await _mean_ms(functools.partial(probe, direct), calls)
        ray_ms = await _mean_ms(functools.partial(probe, remote), calls)
        rows.append(HopRow(name, calls, direct_ms, ray_ms))
    return rows


def bench_ray(
    phone_counts: Sequence[int] = (8, 16, 32, 64),
    seconds: float = 15.0,
    hop_calls: int = 300,
    hosts_per_node: int = 1,
) -> tuple[list[ThroughputRow], list[HopRow]]:
    """Throughput at each phone count, in process then on two Ray nodes, and the hop costs
    (zlib and raw screenshots). Starts and stops its own local two-node cluster."""
    if any(n < 2 for n in phone_counts):
        raise ValueError(f"phone counts {list(phone_counts)}: each needs >= 2 (half the phones go to each node)")
    rows: list[ThroughputRow] = []
    for n in phone_counts:
        envs = [SimPhoneEnv(seed=i, reset_between_episodes=True) for i in range(n)]
        steps, elapsed, episodes, cpu = asyncio.run(_throughput(envs, seconds))
        rows.append(ThroughputRow(n, "in-process", steps, elapsed, episodes, driver_cpu_s=cpu))
        logger.info("%s", rows[-1])
    hops: list[HopRow] = []
    with local_two_node_cluster() as address:
        for n in phone_counts:
            ray_envs = build_ray_phones(_two_node_config(address, n, hosts_per_node), reset_between_episodes=True)
            try:
                steps, elapsed, episodes, cpu = asyncio.run(_throughput(ray_envs, seconds))
            finally:
                for env in ray_envs:
                    env.close()
            rows.append(
                ThroughputRow(
                    n,
                    "ray-2-nodes",
                    steps,
                    elapsed,
                    episodes,
                    hosts=len({id(e.host) for e in ray_envs}),
                    driver_cpu_s=cpu,
                )
            )
            logger.info("%s", rows[-1])
        for codec in ("zlib", "raw"):
            config = RayPhonesConfig(
                address=address, screenshot_codec=codec, groups=(RayPhoneGroup(labels={"node": "b"}, count=1, seed=0),)
            )
            (remote,) = build_ray_phones(config)
            try:
                codec_rows = asyncio.run(_hop_rows(SimPhoneEnv(seed=0), remote, hop_calls))
            finally:
                remote.close()
            hops.extend(
                HopRow(f"{r.call} [{codec}]", r.calls, r.direct_ms, r.ray_ms)
                for r in codec_rows
                if codec == "zlib" or r.call.startswith("screenshot")
            )
    return rows, hops
