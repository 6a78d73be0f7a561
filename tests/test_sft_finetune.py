"""Fine-tuning any checkpoint (``darwin sft --model``): examples are built by the run-time
agent (token ids equal what it sends the policy, for every agent format), run databases and
JSONL files are sources, training lowers the loss and raises held-out action match, and the
result loads where ``darwin eval`` / ``darwin run`` load checkpoints."""

from __future__ import annotations

import asyncio
import base64
import io
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from darwin.actions import Finished, OpenApp, PressHome
from darwin.agents.base import ModelActor
from darwin.agents.formats import AGENT_FORMATS, make_agent
from darwin.agents.scripted import OracleActor
from darwin.agents.warm_start import load_warm_start
from darwin.cli.main import main
from darwin.envs.sim.env import SimPhoneEnv
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.evaluate import evaluate
from darwin.miniature import write_tiny_uitars_checkpoint
from darwin.models.factory import load_vlm
from darwin.models.scoring import prompt_to_messages
from darwin.policies.base import Policy
from darwin.sft.encoding import encode_demonstrations
from darwin.sft.finetune import FinetuneConfig, finetune
from darwin.sft.records import DemoFileError, load_records
from darwin.sft.sources import build_examples, episodes_from_jsonl, episodes_from_run
from darwin.store import RunStore
from darwin.task_registry import resolve_tasks
from darwin.types import Generation, Prompt, Verdict
from darwin.verifiers.base import VerificationRequest, Verifier
from darwin.workflows.step import LifecycleWorkflow, StepConfig

SCREEN = (112, 252)  # write_tiny_uitars_checkpoint's screen
TASKS = ("settings_dark_theme", "booking.com_3")


class RecordingPolicy(Policy):
    """Answers with ``text`` (set by the actor before each step) and keeps every prompt."""

    def __init__(self) -> None:
        self.text = ""
        self.prompts: list[Prompt] = []
        self.texts: list[str] = []

    async def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        self.prompts.extend(prompts)
        self.texts.extend(self.text for _ in prompts)
        return [Generation(text=self.text) for _ in prompts]


class OracleModelActor(ModelActor):
    """A real ModelActor whose 'model' writes the oracle's action in the agent's format."""

    def __init__(self, agent: object, policy: RecordingPolicy) -> None:
        super().__init__(agent, policy)  # type: ignore[arg-type]
        self.oracle = OracleActor()
        self.recording = policy

    async def start_phase(self, env, task, phase, instruction, verifier) -> None:  # type: ignore[no-untyped-def]
        await self.oracle.start_phase(env, task, phase, instruction, verifier)

    async def act(self, observation, history):  # type: ignore[no-untyped-def]
        decision = await self.oracle.act(observation, history)
        self.recording.text = self.agent.format_action(decision.action, observation)  # type: ignore[attr-defined]
        return await super().act(observation, history)


def record_run(
    run_dir: Path, agent_format: str, tasks: Sequence[str] = TASKS, phones: int = 1
) -> list[RecordingPolicy]:
    """Play ``tasks`` (each once per phone) with the oracle behind a ModelActor of ``agent_format``,
    stored in ``run_dir/run.db`` as `darwin eval` stores episodes; returns each phone's policy."""
    store = RunStore.for_run_dir(run_dir)
    run_id = store.start_run(f"oracle as {agent_format}", config=None)
    policies = [RecordingPolicy() for _ in range(phones)]
    envs = [
        SimPhoneEnv(
            seed=i, perturbation=PerturbationConfig(enabled=False), name=f"sim-{i}", reset_between_episodes=True
        )
        for i in range(phones)
    ]
    workflow = LifecycleWorkflow(config=StepConfig(observation_size=SCREEN))
    report = asyncio.run(
        evaluate(
            resolve_tasks(list(tasks)),
            envs,
            lambda i: OracleModelActor(make_agent(agent_format), policies[i]),
            phones,
            workflow,
            store,
            run_id,
        )
    )
    store.close()
    assert all(t.success for t in report.trajectories), [t.termination for t in report.trajectories]
    return policies


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Qwen2.5-VL in plain Hugging Face layout, run as UI-TARS-1.5."""
    return write_tiny_uitars_checkpoint(tmp_path_factory.mktemp("uitars") / "ck", seed=0)


@pytest.mark.parametrize("agent_format", list(AGENT_FORMATS))
def test_example_token_ids_equal_what_the_agent_sends(agent_format: str, checkpoint: Path, tmp_path: Path) -> None:
    policy = record_run(tmp_path / "run", agent_format)[0]
    episodes = episodes_from_run(tmp_path / "run", SCREEN)
    assert [e.task_id for e in episodes] == list(TASKS)
    assert all(e.verdict is not None and e.verdict.success for e in episodes)
    examples = build_examples(lambda: make_agent(agent_format), episodes)
    assert len(examples) == len(policy.prompts)
    assert [e.target for e in examples] == policy.texts
    vlm = load_vlm(checkpoint)
    encoded = encode_demonstrations(vlm, examples)
    for i, sent in enumerate(policy.prompts):
        batch = vlm.build_inputs([prompt_to_messages(sent)])  # HFPolicy.build_inputs of the prompt sent
        ids = batch["input_ids"][0][batch["attention_mask"][0].bool()]
        assert encoded.prompt_ids[i].tolist() == ids.tolist(), f"step {i}"


def _png_b64(image: np.ndarray) -> str:
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def write_jsonl(path: Path, run_dir: Path, thought: str = "Next step.") -> None:
    """The run's accepted episodes as a JSONL demonstration file (one inline PNG, the rest files)."""
    lines = []
    for n, ep in enumerate(episodes_from_run(run_dir, SCREEN)):
        steps = []
        for i, step in enumerate(ep.steps):
            assert step.action is not None
            if i == 0:
                shot = _png_b64(step.observation.screenshot)
            else:
                shot = f"shots/{n}-{i}.png"
                (path.parent / "shots").mkdir(exist_ok=True)
                Image.fromarray(step.observation.screenshot).save(path.parent / shot)
            steps.append({"screenshot": shot, "action": step.action.model_dump(mode="json"), "thought": thought})
        lines.append(
            json.dumps(
                {
                    "goal": ep.goal,
                    "task_id": ep.task_id,
                    "device_size": list(ep.steps[0].observation.device_size),
                    "steps": steps,
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")


def test_jsonl_round_trip_and_thoughts(tmp_path: Path) -> None:
    record_run(tmp_path / "run", "uitars-1.5")
    write_jsonl(tmp_path / "demos.jsonl", tmp_path / "run")
    episodes = episodes_from_jsonl(tmp_path / "demos.jsonl", SCREEN)
    from_run = episodes_from_run(tmp_path / "run", SCREEN)
    assert [len(e.steps) for e in episodes] == [len(e.steps) for e in from_run]
    assert np.array_equal(episodes[0].steps[0].observation.screenshot, from_run[0].steps[0].observation.screenshot)
    examples = build_examples(lambda: make_agent("uitars-1.5"), episodes)
    assert all(e.target.startswith("Thought: Next step.\nAction: ") for e in examples)


BAD_LINES = [
    (
        '{"goal": "g", "steps": [{"screenshot": "a.png", "action": {"type": "tapp", "x": 1, "y": 1}}]}',
        "demos.jsonl line 2: steps[0].action.type: 'tapp' is not an action type; use one of click, long_press, type",
    ),
    (
        '{"goal": "g", "steps": [{"screenshot": "a.png", "action": {"type": "click", "x": 1}}]}',
        "demos.jsonl line 2: steps[0].action.y: required field is missing; add it",
    ),
    (
        '{"goal": "g", "steps": [{"screenshot": "a.png", "action": {"type": "click", "x": 1, "y": 2}, "reasoning": "x"}]}',
        "demos.jsonl line 2: steps[0].reasoning: unknown field; remove it or fix its name (fields: screenshot, action, thought, target_box)",
    ),
    (
        '{"goal": "g", "steps": [{"screenshot": "missing.png", "action": {"type": "wait"}}]}',
        "demos.jsonl line 2: steps[0].screenshot: no file",
    ),
    (
        '{"goal": "g", "steps": [{"screenshot": "a.png", "action": {"type": "click", "x": 5000, "y": 2}}]}',
        "demos.jsonl line 2: steps[0].action.x: 5000 lies outside the 8x8 device",
    ),
    ('{"goal": "g", "steps": [}', "demos.jsonl line 2: not valid JSON"),
    (  # a hostile size: before issue 74 it was taken as is and the episode trained
        '{"goal": "g", "device_size": [0, -3], "steps": [{"screenshot": "a.png", "action": {"type": "press_home"}}]}',
        "demos.jsonl line 2: device_size[0]: 0 is not a side in pixels; give the phone's [width, height], both "
        "whole numbers above 0, or leave device_size out to use the first screenshot's size\n"
        "  device_size[1]: -3 is not a side in pixels",
    ),
]


@pytest.mark.parametrize(("line", "message"), BAD_LINES)
def test_bad_jsonl_line_names_line_field_and_fix(tmp_path: Path, line: str, message: str) -> None:
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "a.png")
    good = '{"goal": "g", "steps": [{"screenshot": "a.png", "action": {"type": "press_home"}}]}'
    (tmp_path / "demos.jsonl").write_text(good + "\n" + line + "\n")
    with pytest.raises(DemoFileError) as err:
        load_records(tmp_path / "demos.jsonl")
    assert str(err.value).startswith(message), str(err.value)


class ScriptModelActor(ModelActor):
    """A real ModelActor whose 'model' writes a fixed action script in the agent's format."""

    SCRIPT = (OpenApp(app="Settings"), PressHome(), Finished())

    def __init__(self, agent: object, policy: RecordingPolicy) -> None:
        super().__init__(agent, policy)  # type: ignore[arg-type]
        self.recording = policy
        self.index = 0

    def start_episode(self, task) -> None:  # type: ignore[no-untyped-def]
        super().start_episode(task)
        self.index = 0

    async def act(self, observation, history):  # type: ignore[no-untyped-def]
        action = self.SCRIPT[min(self.index, len(self.SCRIPT) - 1)]
        self.index += 1
        self.recording.text = self.agent.format_action(action, observation)  # type: ignore[attr-defined]
        return await super().act(observation, history)


class AcceptAll(Verifier):
    """A stand-in judge that accepts every episode."""

    kind = "judge"

    async def verify(self, request: VerificationRequest) -> Verdict:
        return Verdict(success=True, reason="stand-in judge: accepted")


def test_sft_from_run_and_jsonl_learns_and_loads(checkpoint: Path, tmp_path: Path) -> None:
    # four phones play one task with a fixed script, accepted by a judge; the same episodes also as JSONL
    store = RunStore.for_run_dir(tmp_path / "run")
    run_id = store.start_run("scripted", config=None)
    policies = [RecordingPolicy() for _ in range(4)]
    envs = [SimPhoneEnv(seed=i, perturbation=PerturbationConfig(enabled=False), name=f"sim-{i}") for i in range(4)]
    workflow = LifecycleWorkflow(verifier=AcceptAll(), config=StepConfig(observation_size=SCREEN))
    asyncio.run(
        evaluate(
            resolve_tasks(["settings_dark_theme"]),
            envs,
            lambda i: ScriptModelActor(make_agent("uitars-1.5"), policies[i]),
            4,
            workflow,
            store,
            run_id,
        )
    )
    store.close()
    write_jsonl(tmp_path / "demos.jsonl", tmp_path / "run", thought="")
    config = FinetuneConfig(
        model=str(checkpoint),
        agent_format="uitars-1.5",
        observation_size=SCREEN,
        runs=(str(tmp_path / "run"),),
        jsonl=(str(tmp_path / "demos.jsonl"),),
        heldout_fraction=0.25,
        steps=60,
        batch_size=2,
        lr=5e-3,
        warmup_steps=2,
        sampled_match=False,
    )
    result = finetune(config, tmp_path / "out")
    training = result.metadata["training"]
    assert result.metadata["data"]["train"]["steps"] == 18 and result.metadata["data"]["heldout"]["steps"] == 6
    assert training["heldout_loss_after"] < 0.2 * training["heldout_loss_before"]
    assert training["final_loss"] < 0.2 * training["first_loss"]
    assert result.before is not None and result.after is not None
    assert result.after.greedy > result.before.greedy
    assert set(result.after.per_type) == {"open_app", "press_home", "finished"}
    accepted = result.metadata["data"]["train_steps_accepted_by"]
    assert accepted and set(accepted) == {"judge"}  # the run's verdict, per example
    assert {e["verdict"]["verifier_kind"] for e in result.metadata["examples"] if e["source"].startswith("run:")} == {
        "judge"
    }
    warm = load_warm_start(tmp_path / "out")
    assert warm.agent_format == "uitars-1.5" and warm.observation_size == SCREEN
    assert type(warm.make_any_agent()).__name__ == "UITarsAgent"
    out = CliRunner().invoke(
        main,
        [
            "eval",
            "--agent",
            f"tiny:{tmp_path / 'out'}",
            "--tasks",
            "settings_dark_theme",
            "--phones",
            "1",
            "--temperature",
            "0",
            "--run-dir",
            str(tmp_path / "eval"),
        ],
    )
    assert out.exit_code == 0, out.output
    assert "settings_dark_theme" in out.output


def _tiny_jsonl(root: Path, episodes: int = 4) -> Path:
    """Episodes of one goal on one screen: open Settings, then go home."""
    Image.fromarray(np.full((SCREEN[1], SCREEN[0], 3), 90, np.uint8)).save(root / "home.png")
    step = [
        {"screenshot": "home.png", "action": {"type": "open_app", "app": "Settings"}},
        {"screenshot": "home.png", "action": {"type": "press_home"}},
    ]
    line = json.dumps({"goal": "Settings: open it", "device_size": [1080, 2400], "steps": step})
    (root / "demos.jsonl").write_text("\n".join([line] * episodes) + "\n")
    return root / "demos.jsonl"


def test_lora_and_cli(checkpoint: Path, tmp_path: Path) -> None:
    demos = _tiny_jsonl(tmp_path)
    out = CliRunner().invoke(
        main,
        [
            "sft",
            "--model",
            str(checkpoint),
            "--agent-format",
            "uitars-1.5",
            "--observation-size",
            "112x252",
            "--from-jsonl",
            str(demos),
            "--lora-rank",
            "4",
            "--steps",
            "2",
            "--batch-size",
            "2",
            "--out",
            str(tmp_path / "out"),
            "--eval-episodes",
            "0",
        ],
    )
    assert out.exit_code == 0, out.output
    assert "held-out action match" in out.output and "open_app" in out.output
    meta = json.loads((tmp_path / "out" / "darwin_sft.json").read_text())
    assert meta["config"]["lora_rank"] == 4 and meta["training"]["steps_run"] == 2
    warm = load_warm_start(tmp_path / "out")  # LoRA merged: a plain checkpoint
    assert not any("lora" in name for name in warm.vlm.model.state_dict())
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"goal": "g", "steps": [{"screenshot": "home.png", "action": {"type": "tapp"}}]}\n')
    out = CliRunner().invoke(
        main, ["sft", "--model", str(checkpoint), "--from-jsonl", str(bad), "--out", str(tmp_path / "o2")]
    )
    assert out.exit_code != 0 and "bad.jsonl line 1: steps[0].action.type: 'tapp' is not an action type" in out.output
    out = CliRunner().invoke(main, ["sft", "--from-jsonl", str(demos)])
    assert out.exit_code != 0 and "pass --model" in out.output
