"""Probe: does an episode that starts inside a demonstration fail because the agent's prompt
lacks the demonstration's steps?

An episode that starts inside a demonstration (``Task.start``, the reverse curriculum) could
begin with an empty history: a prompt the warm start never saw in SFT, where every
demonstration state came with the steps before it. This probe plays a warm start from
``remaining`` steps before the end of each task's demonstration three ways, on the same
phones and sampling seeds:

- ``silent``: the prefix played by the workflow (``DemoStart``), the agent's history empty
  (``StepConfig.demonstration_in_history=False``);
- ``start``: the same, the demonstration's steps in the agent's history (the default);
- ``oracle``: the prefix played by the oracle inside the episode, as a reference.

    python scripts/probe_demo_start_history.py --warm-start .darwin-cache/warm-start-... --remaining 1

Prints the success of the agent's part per task and overall for each way (docs/results.md,
"The reverse curriculum").
"""

from __future__ import annotations

import argparse
import asyncio
from collections import defaultdict
from collections.abc import Sequence

from darwin.agents.base import Actor, ModelActor
from darwin.agents.pool import ActorPool
from darwin.agents.scripted import OracleActor
from darwin.envs.base import PhoneEnv
from darwin.evaluate import EvalProtocol, evaluation_phones
from darwin.rollout import EpisodeRequest, RolloutEngine
from darwin.task_registry import resolve_tasks
from darwin.types import Decision, DemoStart, Observation, Phase, Task, Transition, VerifierSpec
from darwin.workflows.step import LifecycleWorkflow, StepConfig


class OracleThenModel(Actor):
    """The oracle's first ``len(plan) - remaining`` actions, then the model: the demonstration's
    steps stay in the episode's history, as in the warm start's SFT data."""

    def __init__(self, model: ModelActor, remaining: int) -> None:
        self.model = model
        self.remaining = remaining
        self.oracle = OracleActor()
        self._left = 0

    def use_sampling(self, sampling):  # noqa: ANN001, ANN201
        self.model.use_sampling(sampling)

    def start_episode(self, task: Task) -> None:
        self.model.start_episode(task)

    async def end_episode(self, trajectory):  # noqa: ANN001, ANN201
        await self.model.end_episode(trajectory)

    async def start_phase(
        self, env: PhoneEnv, task: Task, phase: Phase, instruction: str, verifier: VerifierSpec
    ) -> None:
        await self.oracle.start_phase(env, task, phase, instruction, verifier)
        await self.model.start_phase(env, task, phase, instruction, verifier)
        from darwin.envs.sim.oracle import shortest_plan
        from darwin.envs.sim.phone import SimPhone
        from darwin.templates import task_apps

        planner = SimPhone(seed=0)
        planner.restore(await env.aprobe_state())  # type: ignore[arg-type]
        plan = shortest_plan(planner, verifier, apps=list(task_apps(task)))
        self._left = max(0, len(plan) - self.remaining)

    async def act(self, observation: Observation, history: Sequence[Transition]) -> Decision:
        if self._left > 0:
            self._left -= 1
            return await self.oracle.act(observation, history)
        return await self.model.act(observation, history)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warm-start", required=True)
    parser.add_argument("--tasks", default="base8")
    parser.add_argument("--phones", type=int, default=8)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--remaining", type=int, default=1)
    parser.add_argument("--phone-seed", type=int, default=10_000)
    args = parser.parse_args()
    tasks = resolve_tasks([t for t in args.tasks.split(",") if t])
    protocol = EvalProtocol(samples=args.samples, greedy=False)
    results: dict[str, dict[str, list[bool]]] = {}
    ways = ("silent", "start", "oracle")
    for way in ways:
        pool = ActorPool(args.warm_start, temperature=1.0, max_batch=args.phones)
        envs = evaluation_phones(args.phone_seed, args.phones)
        config = StepConfig(observation_size=pool.observation_size, demonstration_in_history=way != "silent")
        workflow = LifecycleWorkflow(config=config)

        def make(i: int, way: str = way, pool: ActorPool = pool) -> Actor:
            return OracleThenModel(pool(i), args.remaining) if way == "oracle" else pool(i)

        requests = []
        for task in tasks:
            played = task.model_copy(update={"start": DemoStart(remaining=args.remaining)}) if way != "oracle" else task
            for i, env in enumerate(envs):
                for j in range(args.samples):
                    requests.append(EpisodeRequest(played, phone=i, sampling=protocol.sampling(task.id, env.name, j)))
        try:
            trajectories = await RolloutEngine(envs, make, workflow=workflow).run_episodes(requests)
        finally:
            await pool.aclose()
        per_task: dict[str, list[bool]] = defaultdict(list)
        for t in trajectories:
            if t.outcome.scored is not None:
                per_task[t.task.id].append(bool(t.outcome.scored))
        results[way] = per_task
    print(f"success from {args.remaining} step(s) before the end, {args.phones} phones x {args.samples} samples")
    print(
        "| task | demonstration start, empty history | demonstration start, its steps in the history | oracle, then the agent |"
    )
    print("| --- | ---: | ---: | ---: |")
    for task in [*(t.id for t in tasks), "overall"]:
        cells = []
        for way in ways:
            values = (
                [v for vs in results[way].values() for v in vs] if task == "overall" else results[way].get(task, [])
            )
            cells.append(f"{100 * sum(values) / len(values):.1f}% ({len(values)})" if values else "-")
        print(f"| {task} | {' | '.join(cells)} |")


if __name__ == "__main__":
    asyncio.run(main())
