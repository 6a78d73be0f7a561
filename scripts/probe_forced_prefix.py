"""Probe: does a task fail from the beginning because of its first actions?

A policy that succeeds from late in a demonstration but never from the beginning either cannot
choose the first actions, or cannot go on without them in its history. This probe plays a
run's final policy (or a warm start) on each task with the first ``k`` actions of the
simulator's shortest plan forced (``DemoStart(remaining=0, actions=plan[:k])``: played by the
phone, in the agent's history, no step of the agent's), for each ``k`` of ``--forced``, on the
same phones and sampling seeds, greedy and sampled:

    python scripts/probe_forced_prefix.py --run runs/default-s3 --tasks booking.com_0 --forced 0,1,2,3

Prints the success of the agent's part per ``k`` (docs/results.md, "Branching rollouts").

``--departures`` also says where the agent leaves the simulator's shortest plans: each episode's
actions are replayed on a SimPhone from the episode's start, and the first action after which
the shortest plan to the goal is not one step shorter is the departure. Per plan step, the
table counts the departures, how many different actions the plan needed there over the
instances, and the agent's commonest actions there: an agent that taps the same place on every
phone where the needed place differs is not reading the screen (docs/results.md, "Why
booking.com_0 fails").
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from pathlib import Path

from darwin.actions import Action
from darwin.agents.pool import ActorPool
from darwin.envs.sim.oracle import shortest_plan
from darwin.envs.sim.phone import SimPhone
from darwin.evaluate import GREEDY, EvalProtocol, evaluation_phones
from darwin.rollout import EpisodeRequest, RolloutEngine
from darwin.run.build import load_run_policy
from darwin.run.report import WARM_START_FILE
from darwin.task_registry import resolve_tasks
from darwin.templates import task_apps
from darwin.types import DemoStart, EpisodeSampling, Task, Trajectory
from darwin.workflows.step import LifecycleWorkflow, StepConfig


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="a `darwin run` directory or a warm-start (SFT) directory")
    parser.add_argument("--tasks", default="booking.com_0")
    parser.add_argument("--forced", default="0,1,2")
    parser.add_argument("--phones", type=int, default=8)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--phone-seed", type=int, default=30_000)
    parser.add_argument("--departures", action="store_true", help="also where the agent leaves the shortest plans")
    args = parser.parse_args()
    tasks = resolve_tasks([t for t in args.tasks.split(",") if t])
    forced = [int(k) for k in args.forced.split(",")]
    protocol = EvalProtocol(samples=args.samples, greedy=True)
    run = Path(args.run)
    pool = (
        load_run_policy(run, max_batch=args.phones)
        if (run / WARM_START_FILE).is_file()
        else ActorPool(run, temperature=1.0, max_batch=args.phones)
    )
    envs = evaluation_phones(args.phone_seed, args.phones)
    plans = {}
    starts = {env.name: await env.aprobe_state() for env in envs}  # each phone's state before any episode
    for task in tasks:
        for env in envs:
            planner = SimPhone(seed=0)
            planner.restore(starts[env.name])  # type: ignore[arg-type]
            plans[task.id, env.name] = shortest_plan(planner, task.verifier, apps=list(task_apps(task)))
    requests, keys = [], []
    for k in forced:
        for task in tasks:
            for i, env in enumerate(envs):
                plan = plans[task.id, env.name]
                played = (
                    task
                    if k == 0
                    else task.model_copy(
                        update={
                            "start": DemoStart(remaining=0, actions=tuple(plan[:k])),
                            "step_budget": task.step_budget - k,
                        }
                    )
                )
                samplings: list[tuple[str, EpisodeSampling]] = [
                    ("greedy", protocol.sampling(task.id, env.name, GREEDY))
                ] + [("sampled", protocol.sampling(task.id, env.name, j)) for j in range(args.samples)]
                for kind, sampling in samplings:
                    requests.append(EpisodeRequest(played, phone=i, sampling=sampling))
                    keys.append((k, task.id, kind, len(plan), env.name))
    workflow = LifecycleWorkflow(config=StepConfig(observation_size=pool.observation_size))
    try:
        trajectories = await RolloutEngine(envs, pool, workflow=workflow).run_episodes(requests)
    finally:
        await pool.aclose()
    table: dict[tuple[int, str, str], list[bool]] = {}
    lengths: dict[str, list[int]] = {}
    for (k, task_id, kind, plan_length, _), trajectory in zip(keys, trajectories, strict=True):
        lengths.setdefault(task_id, []).append(plan_length)
        if trajectory.outcome.scored is not None:
            table.setdefault((k, task_id, kind), []).append(bool(trajectory.outcome.scored))
    print(f"{run}: {args.phones} phones x (greedy + {args.samples} sampled), phone seeds from {args.phone_seed}")
    print("| task (plan steps) | first actions forced | greedy | sampled |")
    print("| --- | ---: | ---: | ---: |")
    for task in tasks:
        steps = sorted(set(lengths[task.id]))
        for k in forced:
            cells = []
            for kind in ("greedy", "sampled"):
                values = table.get((k, task.id, kind), [])
                cells.append(f"{100 * sum(values) / len(values):.1f}% ({len(values)})" if values else "-")
            print(f"| {task.id} ({'/'.join(map(str, steps))}) | {k} | {' | '.join(cells)} |")
    if args.departures:
        by_id = {task.id: task for task in tasks}
        found = [
            (k, kind, departure(by_id[task_id], starts[phone], plans[task_id, phone][:k], actions_of(trajectory)))
            for (k, task_id, kind, _, phone), trajectory in zip(keys, trajectories, strict=True)
        ]
        print_departures(found)


Departure = tuple[str, int, str, str] | None
"""(task id, plan step, the action the plan needed, the agent's action), or None: never left the plans."""


def actions_of(trajectory: Trajectory) -> list[Action | None]:
    """The agent's actions in ``trajectory``, in order (``None``: a step without one)."""
    return [transition.decision.action for transition in trajectory.transitions]


def departure(task: Task, start: dict | None, forced: list[Action], actions: list[Action | None]) -> Departure:
    """Where the agent's ``actions`` (played after the ``forced`` ones from ``start``) first leave the
    simulator's shortest plans: the first action after which the shortest plan is not one step shorter."""
    if start is None:
        raise SystemExit("--departures replays episodes on a SimPhone: the phones need a state probe")
    phone = SimPhone(seed=0)
    phone.restore(start)
    for action in forced:
        phone.execute(action)
    apps = list(task_apps(task))
    for step, action in enumerate(actions):
        plan = shortest_plan(phone, task.verifier, apps=apps)
        if not plan:
            return None
        if action is None:
            return (task.id, len(forced) + step, action_text(plan[0]), "(no action)")
        phone.execute(action)
        if len(shortest_plan(phone, task.verifier, apps=apps)) != len(plan) - 1:
            return (task.id, len(forced) + step, action_text(plan[0]), action_text(action))
    return None


def action_text(action: Action) -> str:
    """``click(540, 696)``: the action's type and its fields' values, device pixels."""
    fields = action.model_dump(exclude={"type"})
    return f"{action.type}({', '.join(str(v) for v in fields.values())})"


def print_departures(found: list[tuple[int, str, Departure]]) -> None:
    """The departures table: per task, kind and plan step, how many, and what was needed and done there."""
    print("| task | kind | plan step | departures | different actions needed | the agent's commonest actions there |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    groups: dict[tuple[str, str, int], list[tuple[str, str]]] = {}
    for _, kind, where in found:
        if where is not None:
            task_id, step, needed, done = where
            groups.setdefault((task_id, kind, step), []).append((needed, done))
    for (task_id, kind, step), pairs in sorted(groups.items()):
        needed = len({n for n, _ in pairs})
        common = ", ".join(f"{a} x{c}" for a, c in Counter(d for _, d in pairs).most_common(3))
        print(f"| {task_id} | {kind} | {step} | {len(pairs)} | {needed} | {common} |")
    kept = Counter(kind for _, kind, where in found if where is None)
    print(f"episodes that never left the shortest plans: {dict(kept)}")


if __name__ == "__main__":
    asyncio.run(main())
