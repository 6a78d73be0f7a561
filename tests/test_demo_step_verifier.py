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
from darwin.task_registry import get_task
from darwin.types import Decision, Observation, Phase, Transition
from darwin.verifiers.base import VerificationRequest
from darwin.verifiers.demo_steps import DemoStepVerifier
from darwin.workflows.step import LifecycleWorkflow, StepConfig

TASK = get_task("settings_dark_theme")


def _demo(tmp_path: Path, steps: list[dict]) -> Path:
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "s.png")
    line = {
        "goal": "g",
        "task_id": TASK.id,
        "device_size": [1080, 2400],
        "steps": [{"screenshot": "s.png", **s} for s in steps],
    }
    (tmp_path / "demos.jsonl").write_text(json.dumps(line) + "\n")
    return tmp_path / "demos.jsonl"


def _request(actions: list) -> VerificationRequest:
    obs = Observation(screenshot=np.zeros((8, 8, 3), np.uint8), goal="g", device_size=(1080, 2400), task_id=TASK.id)
    transitions = [
        Transition(
            episode_id="e", task_id=TASK.id, step=i, phase=Phase.EXECUTION, observation=obs, decision=Decision(action=a)
        )
        for i, a in enumerate(actions)
    ]
    return VerificationRequest(
        task=TASK,
        phase=Phase.EXECUTION,
        instruction=TASK.instruction,
        spec=TASK.verifier,
        transitions=transitions,
        final_state=None,
        final_screenshot=None,
    )


def test_steps_scored_by_box_and_exact_text(tmp_path: Path) -> None:
    demos = _demo(
        tmp_path,
        [
            {"action": {"type": "open_app", "app": "Settings"}},
            {"action": {"type": "click", "x": 500, "y": 900}, "target_box": [400, 850, 700, 950]},
            {"action": {"type": "type", "content": "dark"}},
        ],
    )
    verifier = DemoStepVerifier(str(demos))
    assert verifier.cheap and not verifier.reads_screen
    right = asyncio.run(verifier.verify(_request([OpenApp(app="settings"), Click(x=690, y=940), Type(content="dark")])))
    assert right.success and right.reward == 1.0 and right.reason == "step scores 1 1 1"
    off_box = asyncio.run(
        verifier.verify(_request([OpenApp(app="Settings"), Click(x=701, y=900), Type(content="Dark")]))
    )
    assert not off_box.success and abs(off_box.reward - 1 / 3) < 1e-9
    extra = asyncio.run(
        verifier.verify(_request([OpenApp(app="Settings"), Click(x=500, y=900), Type(content="dark"), PressHome()]))
    )
    assert extra.reward == 0.75 and not extra.success
    other = _request([])
    unknown = asyncio.run(
        verifier.verify(
            VerificationRequest(
                task=get_task("clock_4"),
                phase=other.phase,
                instruction="x",
                spec=other.spec,
                transitions=(),
                final_state=None,
                final_screenshot=None,
            )
        )
    )
    assert unknown.success is None


def test_plugs_in_as_a_component_and_runs_in_the_workflow(tmp_path: Path) -> None:
    # the oracle's own episode as the demonstration (no boxes: exact points), replayed by the oracle
    env = SimPhoneEnv(seed=0, perturbation=PerturbationConfig(enabled=False), name="sim-0")
    workflow = LifecycleWorkflow(config=StepConfig(observation_size=(112, 252)))
    trajectory = asyncio.run(workflow.run(env, TASK, OracleActor(), episode_id="demo"))
    steps = [{"action": t.decision.action.model_dump(mode="json")} for t in trajectory.transitions]
    demos = _demo(tmp_path, steps)
    verifier = build_component(
        "verifier",
        ComponentSpec(name="darwin.verifiers.demo_steps:DemoStepVerifier", kwargs={"demonstrations": [str(demos)]}),
    )
    assert isinstance(verifier, DemoStepVerifier)
    env2 = SimPhoneEnv(seed=0, perturbation=PerturbationConfig(enabled=False), name="sim-1")
    replay = asyncio.run(
        LifecycleWorkflow(verifier=verifier, config=StepConfig(observation_size=(112, 252))).run(
            env2, TASK, OracleActor(), episode_id="replay"
        )
    )
    assert replay.success is True


def test_oracle_demonstrations_export_with_target_boxes_and_score_the_oracle_fully(tmp_path: Path) -> None:
    from darwin.sft.demonstrations import export_oracle_demonstrations
    from darwin.sft.records import load_records

    tasks = [get_task("clock_1"), get_task("amazon_0")]
    stats = export_oracle_demonstrations(
        tmp_path / "oracle.jsonl", tasks, phone_seeds=[100, 101], observation_size=(112, 252)
    )
    assert stats.episodes == 4 and stats.successes == 4 and stats.phones == 2
    loaded = load_records(tmp_path / "oracle.jsonl")  # the validator reads it back
    assert [r.record.task_id for r in loaded] == ["clock_1", "amazon_0", "clock_1", "amazon_0"]
    taps = [s for r in loaded for s in r.record.steps if isinstance(s.action, Click)]
    assert taps and all(s.target_box is not None for s in taps)
    for s in taps:  # the box is the element the tap hit: it holds the point and is smaller than the screen
        x1, y1, x2, y2 = s.target_box
        assert x1 <= s.action.x < x2 and y1 <= s.action.y < y2 and (x2 - x1) * (y2 - y1) < 1080 * 2400 / 4
    assert loaded[0].record.steps[0].action == OpenApp(app="Clock")  # launcher taps as open_app, as the warm start
    assert loaded[0].screenshots[0].shape == (252, 112, 3)
    # the oracle on a training phone, scored against these demonstrations: every step matches
    verifier = DemoStepVerifier(str(tmp_path / "oracle.jsonl"))
    workflow = LifecycleWorkflow(verifier=verifier, config=StepConfig(observation_size=(112, 252)))
    for seed, task in [(100, tasks[0]), (101, tasks[1])]:
        env = SimPhoneEnv(seed=seed, perturbation=PerturbationConfig(), name=f"sim-{seed}", reset_between_episodes=True)
        replay = asyncio.run(workflow.run(env, task, _LaunchByName(), episode_id=f"r{seed}"))
        (verdict,) = [t.reward for t in replay.transitions[-1:]]
        assert replay.success is True and verdict == 1.0, replay.transitions[-1]


class _LaunchByName(OracleActor):
    """The oracle, opening apps by name as the warm-started agent does."""

    async def act(self, observation, history):
        decision = await super().act(observation, history)
        if not history and isinstance(decision.action, Click):  # the first tap launches the task's app
            return Decision(action=OpenApp(app=self._task.app))
        return decision

    async def start_phase(self, env, task, phase, instruction, verifier):
        self._task = task
        await super().start_phase(env, task, phase, instruction, verifier)


def test_the_demo_steps_preset_rewards_with_the_oracles_demonstrations(tmp_path: Path, monkeypatch) -> None:
    from darwin.run.load import load_experiment

    monkeypatch.chdir(tmp_path)  # the demonstrations go under the preset's cache directory
    config = load_experiment(Path(__file__).resolve().parents[1] / "examples" / "spa_bench.py", preset="demo-steps")
    assert config.verifier.name == "darwin.verifiers.demo_steps:DemoStepVerifier"
    assert config.evaluation.verifier is not None and config.evaluation.verifier.name == "rule"
    (path,) = config.verifier.kwargs["demonstrations"]
    verifier = build_component("verifier", config.verifier)
    assert isinstance(verifier, DemoStepVerifier) and Path(path).is_file()
    assert sorted(verifier.demos) == sorted(t.id for t in config.resolve_tasks())
    assert all(len(demos) == config.phones.count for demos in verifier.demos.values())


def test_darwin_tasks_demos_writes_the_file_and_names_bad_options(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from darwin.cli.main import main
    from darwin.sft.records import load_records

    out = tmp_path / "d.jsonl"
    result = CliRunner().invoke(main, ["tasks", "demos", "--out", str(out), "--tasks", "clock_1", "--phones", "2"])
    assert result.exit_code == 0 and "2 of 2 oracle episodes" in result.output, result.output
    assert [r.record.task_id for r in load_records(out)] == ["clock_1", "clock_1"]
    typed = tmp_path / "typed.jsonl"
    args = ["tasks", "demos", "--out", str(typed), "--tasks", "booking.com_0", "--phones", "1", "--prefer-typing"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0 and "1 of 1 oracle episodes" in result.output, result.output
    (episode,) = load_records(typed)
    assert Type(content="Berlin\n") in [s.action for s in episode.record.steps]  # typed, not picked off the list
    bad = CliRunner().invoke(main, ["tasks", "demos", "--out", str(out), "--observation-size", "252"])
    assert bad.exit_code == 2 and "write WxH" in bad.output and "--observation-size" in bad.output
    unknown = CliRunner().invoke(main, ["tasks", "demos", "--out", str(out), "--tasks", "nosuch"])
    assert unknown.exit_code == 2 and "unknown task 'nosuch'" in unknown.output
