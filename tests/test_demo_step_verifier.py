"""Step-level rewards from demonstrations: each step scored against the demonstration step of
the same task (point inside the target element's box, typed text exact)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
from PIL import Image

from darwin.actions import Click, OpenApp, PressHome, Type
from darwin.agents.scripted import OracleActor
from darwin.components import ComponentSpec, build_component
from darwin.envs.sim.env import SimPhoneEnv
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.tasks import get_task
from darwin.types import Decision, Observation, Phase, Transition
from darwin.verifiers.base import VerificationRequest
from darwin.verifiers.demo_steps import DemoStepVerifier
from darwin.workflows import LifecycleWorkflow, StepConfig

TASK = get_task("settings_dark_theme")


def _demo(tmp_path: Path, steps: list[dict]) -> Path:
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "s.png")
    line = {"goal": "g", "task_id": TASK.id, "device_size": [1080, 2400],
            "steps": [{"screenshot": "s.png", **s} for s in steps]}
    (tmp_path / "demos.jsonl").write_text(json.dumps(line) + "\n")
    return tmp_path / "demos.jsonl"


def _request(actions: list) -> VerificationRequest:
    obs = Observation(screenshot=np.zeros((8, 8, 3), np.uint8), goal="g", device_size=(1080, 2400), task_id=TASK.id)
    transitions = [Transition(episode_id="e", task_id=TASK.id, step=i, phase=Phase.EXECUTION, observation=obs,
                              decision=Decision(action=a)) for i, a in enumerate(actions)]
    return VerificationRequest(task=TASK, phase=Phase.EXECUTION, instruction=TASK.instruction, spec=TASK.verifier,
                               transitions=transitions, final_state=None, final_screenshot=None)


def test_steps_scored_by_box_and_exact_text(tmp_path: Path) -> None:
    demos = _demo(tmp_path, [
        {"action": {"type": "open_app", "app": "Settings"}},
        {"action": {"type": "click", "x": 500, "y": 900}, "target_box": [400, 850, 700, 950]},
        {"action": {"type": "type", "content": "dark"}},
    ])
    verifier = DemoStepVerifier(str(demos))
    assert verifier.cheap and not verifier.reads_screen
    right = asyncio.run(verifier.verify(_request([OpenApp(app="settings"), Click(x=690, y=940), Type(content="dark")])))
    assert right.success and right.reward == 1.0 and right.reason == "step scores 1 1 1"
    off_box = asyncio.run(verifier.verify(_request([OpenApp(app="Settings"), Click(x=701, y=900), Type(content="Dark")])))
    assert not off_box.success and abs(off_box.reward - 1 / 3) < 1e-9
    extra = asyncio.run(verifier.verify(_request([OpenApp(app="Settings"), Click(x=500, y=900), Type(content="dark"), PressHome()])))
    assert extra.reward == 0.75 and not extra.success
    other = _request([])
    unknown = asyncio.run(verifier.verify(VerificationRequest(task=get_task("clock_4"), phase=other.phase, instruction="x",
                                                              spec=other.spec, transitions=(), final_state=None, final_screenshot=None)))
    assert unknown.success is None


def test_plugs_in_as_a_component_and_runs_in_the_workflow(tmp_path: Path) -> None:
    # the oracle's own episode as the demonstration (no boxes: exact points), replayed by the oracle
    env = SimPhoneEnv(seed=0, perturbation=PerturbationConfig(enabled=False), name="sim-0")
    workflow = LifecycleWorkflow(config=StepConfig(observation_size=(112, 252)))
    trajectory = asyncio.run(workflow.run(env, TASK, OracleActor(), episode_id="demo"))
    steps = [{"action": t.decision.action.model_dump(mode="json")} for t in trajectory.transitions]
    demos = _demo(tmp_path, steps)
    verifier = build_component("verifier", ComponentSpec(name="darwin.verifiers.demo_steps:DemoStepVerifier",
                                                        kwargs={"demonstrations": [str(demos)]}))
    assert isinstance(verifier, DemoStepVerifier)
    env2 = SimPhoneEnv(seed=0, perturbation=PerturbationConfig(enabled=False), name="sim-1")
    replay = asyncio.run(LifecycleWorkflow(verifier=verifier, config=StepConfig(observation_size=(112, 252)))
                         .run(env2, TASK, OracleActor(), episode_id="replay"))
    assert replay.success is True
