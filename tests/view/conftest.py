"""A run built by hand for the viewer's tests: one run, three tasks, twelve episodes with
steps, screenshots, verdicts, ``updates.jsonl``, ``metrics.jsonl`` and ``experiment.json``
(no training needed)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from darwin.actions import Action, Click, Direction, Finished, Scroll, Type
from darwin.store import RunStore
from darwin.types import (
    Decision,
    Generation,
    Observation,
    Phase,
    Task,
    Termination,
    TerminationReason,
    Trajectory,
    Transition,
    Verdict,
    VerifierSpec,
)

TASKS = ("clock_1", "settings_3", "amazon_0")
SIZE = (1080, 2400)
SECRET = "sk-secretsecret0123456789"
ACTIONS: tuple[Action, ...] = (
    Click(x=540, y=1200),
    Scroll(x=540, y=1800, direction=Direction.DOWN),
    Type(content="hi"),
    Finished(),
)


@dataclass(frozen=True)
class BuiltRun:
    run_dir: Path
    run_id: str
    episodes: list[str]
    """In start order: episode ``i`` has task ``tasks[i % 3]``, phone ``sim-{i % 2}``, and
    succeeds when ``i % 4 == 0``; update ``u`` (1-3) trained on episodes ``4(u-1)..4u-1``."""
    tasks: tuple[str, ...] = TASKS
    secret: str = SECRET
    """An API key in the run's ``experiment.json``: no page may show it."""


def screen(seed: int) -> np.ndarray:
    """A dark random screen (a magenta marker stands out on it)."""
    return np.random.default_rng(seed).integers(0, 120, size=(240, 108, 3), dtype=np.uint8)


def metrics(u: int) -> list[tuple[str, dict[str, float]]]:
    """``metrics.jsonl``'s groups at update ``u``: a value for every chart of the run page."""
    return [
        (
            "rollout",
            {
                "success": 0.1 * u,
                f"success_by_task/{TASKS[0]}": 0.2 * u,
                f"success_by_task/{TASKS[1]}": 0.05 * u,
                "cost/phones": 2.0,
                "cost/rollout_s": 40.0 * u,
                "cost/phone_s": 80.0 * u,
                "cost/learner_s": 12.5 * u,
                "cost/phone_s_per_success": 400.0 / u,
                "cost/episodes": 4.0 * u,
                "cost/successes": float(u),
                "cost/infra_share": 0.05,
                "cost/backpressure_share": 0.1 * u,
            },
        ),
        (
            "update",
            {
                "episode_return_mean": 0.1 * u - 0.05,
                "approx_kl": 0.001 * u,
                "kl_to_reference": 0.002 * u,
                "entropy": 1.0 / u,
                "explained_variance": 0.1 * u - 0.2,
                "clip_fraction": 0.01 * u,
                "value_clip_fraction": 0.02,
                "value_loss": 0.5 / u,
            },
        ),
        ("eval", {"success": 0.15 * u}),
    ]


def build_run(run_dir: Path, episodes: int = 12) -> BuiltRun:
    ids = []
    with RunStore.for_run_dir(run_dir) as store:
        run_id = store.start_run("handmade", config=None)
        for i in range(episodes):
            task = Task(
                id=TASKS[i % 3],
                instruction=f"do task {i % 3}",
                app="Clock",
                verifier=VerifierSpec(predicate="clock.alarm_exists", params={}),
            )
            episode_id = f"ep{i:03d}"
            store.start_episode(run_id, episode_id, task, phone=f"sim-{i % 2}", seed=i, device_size=SIZE)
            success = i % 4 == 0
            transitions = []
            for step, action in enumerate(ACTIONS):
                t = Transition(
                    episode_id=episode_id,
                    task_id=task.id,
                    step=step,
                    phase=Phase.EXECUTION,
                    observation=Observation(
                        screenshot=screen(i * 10 + step),
                        goal=task.instruction,
                        device_size=SIZE,
                        task_id=task.id,
                        step=step,
                    ),
                    decision=Decision(
                        action=action,
                        generation=Generation(text=f"Thought: step {step}\nAction: {action.type}", policy_version=1),
                    ),
                    reward=float(success) if step == len(ACTIONS) - 1 else 0.0,
                    done=step == len(ACTIONS) - 1,
                )
                store.record_step(t, t.observation.screenshot)
                transitions.append(t)
            traj = Trajectory(
                episode_id=episode_id,
                task=task,
                transitions=transitions,
                termination=Termination(TerminationReason.SUCCESS if success else TerminationReason.AGENT_FINISHED),
                verdicts={Phase.EXECUTION: Verdict(success)},
                phone=f"sim-{i % 2}",
            )
            store.record_verdict(episode_id, Phase.EXECUTION, "rule", success, float(success), "the rule says so")
            store.finish_episode(traj, final_screenshot=screen(i * 10 + 9))
            ids.append(episode_id)
    (run_dir / "updates.jsonl").write_text(
        "".join(json.dumps({"update": u + 1, "episode_ids": ids[u * 4 : u * 4 + 4]}) + "\n" for u in range(3))
    )
    (run_dir / "metrics.jsonl").write_text(
        "".join(
            json.dumps({"step": u, "group": group, **values}) + "\n" for u in (1, 2, 3) for group, values in metrics(u)
        )
    )
    (run_dir / "experiment.json").write_text(
        json.dumps({"name": "handmade", "judge": {"model": "m", "api_key": SECRET}})
    )
    return BuiltRun(run_dir, run_id, ids)


def add_unfinished(built: BuiltRun, episode_id: str = "ep100", steps: int = 2) -> str:
    """Start one more episode of ``clock_1`` in ``built``'s run and record ``steps`` steps, without
    finishing it (a run still playing it, or one stopped before it ended)."""
    task = Task(
        id=TASKS[0],
        instruction="do task 0",
        app="Clock",
        verifier=VerifierSpec(predicate="clock.alarm_exists", params={}),
    )
    with RunStore.for_run_dir(built.run_dir) as store:
        store.start_episode(built.run_id, episode_id, task, phone="sim-0", seed=100, device_size=SIZE)
        for step, action in enumerate(ACTIONS[:steps]):
            observation = Observation(
                screenshot=screen(1000 + step), goal=task.instruction, device_size=SIZE, task_id=task.id, step=step
            )
            t = Transition(
                episode_id=episode_id,
                task_id=task.id,
                step=step,
                phase=Phase.EXECUTION,
                observation=observation,
                decision=Decision(action=action, generation=Generation(text=action.type, policy_version=1)),
                reward=0.0,
                done=False,
            )
            store.record_step(t, observation.screenshot)
    return episode_id


@pytest.fixture
def built_run(tmp_path: Path) -> BuiltRun:
    return build_run(tmp_path / "run")


@pytest.fixture
def unfinished(built_run: BuiltRun) -> Callable[[str], str]:
    """``unfinished(episode_id)`` adds an unfinished episode to ``built_run`` (:func:`add_unfinished`)."""

    def add(episode_id: str = "ep100") -> str:
        return add_unfinished(built_run, episode_id)

    return add
