"""The learned verifier end to end: labelled SimPhone screens -> training -> a verifier that
serves as a workflow's reward; and the dataset format's errors."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from darwin.agents.scripted import OracleActor
from darwin.envs.sim.env import SimPhoneEnv
from darwin.models.config import TinyVLMConfig
from darwin.models.factory import build_tiny_vlm, load_tiny_vlm
from darwin.predicates import resolve
from darwin.task_registry import get_task
from darwin.types import TerminationReason, Verdict
from darwin.verifiers.learned.data import (
    VerifierDataError,
    generate_verifier_data,
    load_examples,
    load_image,
)
from darwin.verifiers.learned.model import LearnedVerifier
from darwin.verifiers.learned.training import VerifierTrainConfig, train_verifier
from darwin.workflows.step import StepConfig, StepWorkflow

pytestmark = pytest.mark.timeout(300)

SIZE = (56, 112)
TASKS = [
    "settings_dark_theme",
    "booking.com_3",
    "booking.com_0",
    "x_0",
]  # two training tasks, an unseen task, an unseen app


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("verifier-data")
    added = generate_verifier_data(
        out, [get_task(t) for t in TASKS], episodes_per_agent=3, seed=0, observation_size=SIZE, budget=8
    )
    assert added == len(load_examples(out))
    return out


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny")
    build_tiny_vlm(TinyVLMConfig(screen_width=SIZE[0], screen_height=SIZE[1]), seed=0).save_pretrained(out)
    return out


def test_every_screen_is_labelled_by_the_rule_on_the_state_it_shows(dataset: Path) -> None:
    examples = load_examples(dataset)
    assert {e.source for e in examples} == {"oracle", "early_stop", "wander", "random"}
    assert {e.task_id for e in examples} == set(TASKS)
    # The oracle reaches every task's goal: each task has positive oracle screens (identical
    # final screens of several episodes are stored once).
    assert {e.task_id for e in examples if e.source == "oracle" and e.label} == set(TASKS)
    assert not any(e.label for e in examples if e.source == "early_stop" and e.step == 0)
    assert sum(e.label for e in examples) < len(examples) / 2  # most screens are not the goal
    # Re-playing an oracle episode and checking the predicate gives the stored label.
    task = get_task("settings_dark_theme")
    env = SimPhoneEnv(seed=5)
    asyncio.run(StepWorkflow(config=StepConfig(observation_size=SIZE)).run(env, task, OracleActor()))
    predicate, params = resolve(task.verifier, task.id)
    assert predicate.fn(env.probe_state(), params).success
    image = load_image(dataset, examples[0])
    assert image.shape == (SIZE[1], SIZE[0], 3)


def test_generation_is_reproducible_and_deduplicated(dataset: Path, tmp_path: Path) -> None:
    again = generate_verifier_data(
        dataset, [get_task(t) for t in TASKS], episodes_per_agent=3, seed=0, observation_size=SIZE, budget=8
    )
    assert again == 0  # the same seed plays the same episodes: every (screen, goal) is already there


def test_training_reports_every_split_and_the_verifier_serves_as_reward(
    dataset: Path, checkpoint: Path, tmp_path: Path
) -> None:
    config = VerifierTrainConfig(
        checkpoint=str(checkpoint),
        train_tasks=("settings_dark_theme", "booking.com_3"),
        epochs=2,
        batch_size=8,
        bootstrap_resamples=100,
        seed=1,  # seed 1: a non-empty validation split
        swapped_goals=0.5,
    )
    report = train_verifier(dataset, tmp_path / "model", config)
    splits = {s.split: s for s in report.splits}
    assert {"train", "test_tasks", "test_apps"} <= set(splits)
    assert splits["test_tasks"].examples == sum(e.task_id == "booking.com_0" for e in load_examples(dataset))
    assert splits["test_apps"].examples == sum(e.task_id == "x_0" for e in load_examples(dataset))
    saved = json.loads((tmp_path / "model" / "report.json").read_text())
    assert saved["threshold"] == report.threshold and len(saved["epochs"]) == 2

    from click.testing import CliRunner

    from darwin.cli.main import main

    for rows_by, expected in (("split", set(splits)), ("task", {*TASKS, "all"})):
        result = CliRunner().invoke(
            main,
            ["verifier", "eval", "--model", str(tmp_path / "model"), "--data", str(dataset), "--by", rows_by],
            env={"COLUMNS": "200"},
        )
        assert result.exit_code == 0, result.output
        rows = json.loads((tmp_path / "model" / "eval.json").read_text())
        assert set(rows) == expected
    assert rows["all"]["examples"] == len(load_examples(dataset))
    assert rows["x_0"]["examples"] == splits["test_apps"].examples

    verifier = LearnedVerifier(str(tmp_path / "model"))
    assert verifier.cheap and verifier.reads_screen and verifier.screen_size == SIZE
    p = verifier.probability("Settings: Turn on Dark Theme.", np.zeros((SIZE[1], SIZE[0], 3), np.uint8))
    assert 0.0 < p < 1.0
    # Always accepting: every check passes, so the phase ends at the first screen it sees.
    always = LearnedVerifier(str(tmp_path / "model"), threshold=0.0)
    workflow = StepWorkflow(verifier=always, config=StepConfig(observation_size=SIZE, skip_already_done=False))
    traj = asyncio.run(workflow.run(SimPhoneEnv(seed=1), get_task("settings_dark_theme"), OracleActor()))
    assert traj.termination.reason is TerminationReason.SUCCESS and len(traj) == 1
    assert traj.phase_reasons and "learned: p=" in next(iter(traj.phase_reasons.values()))
    at_the_end = LearnedVerifier(str(tmp_path / "model"), threshold=0.0, every_step=False)
    workflow = StepWorkflow(verifier=at_the_end, config=StepConfig(observation_size=SIZE))
    traj = asyncio.run(workflow.run(SimPhoneEnv(seed=1), get_task("settings_dark_theme"), OracleActor()))
    assert not at_the_end.cheap and traj.termination.reason is TerminationReason.AGENT_FINISHED
    assert traj.success is True and len(traj) > 1  # played to the oracle's finished, judged once
    never = LearnedVerifier(str(tmp_path / "model"), threshold=1.0)
    workflow = StepWorkflow(verifier=never, config=StepConfig(observation_size=SIZE))
    traj = asyncio.run(workflow.run(SimPhoneEnv(seed=1), get_task("settings_dark_theme"), OracleActor()))
    assert traj.termination.reason is TerminationReason.AGENT_FINISHED and traj.success is False


def test_missing_model_and_bad_threshold_are_clear(tmp_path: Path, dataset: Path, checkpoint: Path) -> None:
    with pytest.raises(FileNotFoundError, match="darwin verifier train --out"):
        LearnedVerifier(str(tmp_path / "nothing"))
    with pytest.raises(ValueError, match="no training or validation examples"):
        train_verifier(
            dataset, tmp_path / "m", VerifierTrainConfig(checkpoint=str(checkpoint), train_tasks=("clock_1",))
        )


@pytest.mark.parametrize(
    "line, message",
    [
        ("not json", "not JSON"),
        ('{"id": "a"}', "missing fields"),
        (
            '{"id": "a", "image": "x.png", "goal": "g", "label": "yes", "task_id": "t", "app": "A"}',
            "label must be true or false",
        ),
        ('{"id": "a", "image": "gone.png", "goal": "g", "label": true, "task_id": "t", "app": "A"}', "not found"),
        (
            '{"id": "a", "image": "x.png", "goal": "g", "label": true, "task_id": "t", "app": "A", "colour": 1}',
            "unknown fields",
        ),
    ],
)
def test_bad_dataset_rows_name_the_line_and_the_problem(tmp_path: Path, line: str, message: str) -> None:
    (tmp_path / "x.png").write_bytes(b"")
    (tmp_path / "examples.jsonl").write_text(line + "\n")
    with pytest.raises(VerifierDataError, match=f"examples.jsonl:1: .*{message}"):
        load_examples(tmp_path)
    with pytest.raises(VerifierDataError, match="darwin verifier data --out"):
        load_examples(tmp_path / "empty")


def test_the_verifier_may_read_the_screen_finer_than_the_agent(checkpoint: Path, tmp_path: Path) -> None:
    from darwin.verifiers.learned.model import SuccessClassifier, load_classifier
    from darwin.verifiers.learned.training import _backbone

    double = (2 * SIZE[0], 2 * SIZE[1])
    model = SuccessClassifier(_backbone(VerifierTrainConfig(checkpoint=str(checkpoint)), double))
    batch = model.inputs(["Settings: Turn on Dark Theme."], [np.zeros((double[1], double[0], 3), np.uint8)])
    assert batch["image_grid_thw"].tolist() == [[1, double[1] // 14, double[0] // 14]]  # 4x the agent's patches
    assert model(batch).shape == (1,)
    model.save(tmp_path / "v", threshold=0.5, screen_size=double, metadata={})
    again, record = load_classifier(tmp_path / "v")
    assert record["screen_size"] == list(double)
    assert again.inputs(["g"], [np.zeros((double[1], double[0], 3), np.uint8)])["image_grid_thw"].tolist() == [
        [1, 16, 8]
    ]


def test_audit_reports_the_reward_verifier_against_its_auditor(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from darwin.cli.main import main
    from darwin.store import RunStore
    from darwin.types import Phase
    from darwin.verifiers.audit import audit_pairs

    task = get_task("settings_dark_theme")
    rows = [  # (reward verdict, auditor's verdict): 2 true positives, 1 false positive, 1 false negative, 1 true negative
        (True, "yes"),
        (True, "yes"),
        (True, "no"),
        (False, "yes"),
        (False, "no"),
    ]
    with RunStore.for_run_dir(tmp_path) as store:
        run_id = store.start_run("r", config=None)
        for i, (learned, rule) in enumerate(rows):
            store.start_episode(run_id, f"e{i}", task, phone="p")
            disagreement = "disagreement; " if learned != (rule == "yes") else ""
            reason = (
                f"[learned] learned: p=0.5 (threshold 0.5) ({disagreement}audit: rule: {rule} (settings.dark_theme: x))"
            )
            store.record_verdict(f"e{i}", Phase.EXECUTION, "composite", learned, float(learned), reason)
        store.record_verdict(
            "e0", Phase.EXECUTION, "rule", True, 1.0, "settings.dark_theme: met"
        )  # not a composite: ignored
    assert audit_pairs(tmp_path) == [("settings_dark_theme", p, a == "yes") for p, a in rows]
    result = CliRunner().invoke(main, ["verifier", "audit", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    overall = next(line for line in result.output.splitlines() if line.startswith("│ overall"))
    assert "0.667" in overall  # precision 2/3, recall 2/3, F1 2/3
    empty = tmp_path / "empty"
    with RunStore.for_run_dir(empty):
        pass
    assert "no audited verdicts" in CliRunner().invoke(main, ["verifier", "audit", str(empty)]).output


# ---------------------------------------------------------------- history: the previous screen, marked
def test_every_screen_after_the_first_carries_the_screen_before_its_last_action(dataset: Path) -> None:
    from darwin.actions import is_terminal
    from darwin.verifiers.learned.data import load_previous_image

    examples = load_examples(dataset)
    device = SimPhoneEnv(seed=0).device_size
    firsts = [e for e in examples if e.step == 0]
    assert firsts and all(e.previous_image == "" and e.last_action == "" and e.device_size is None for e in firsts)
    assert all(load_previous_image(dataset, e) is None for e in firsts)
    later = [e for e in examples if e.step >= 1]
    assert later and all(e.previous_image and e.last_action and e.device_size == device for e in later)
    assert not any(is_terminal(e.action()) for e in later)  # `finished` changes no screen: never the marked move
    image_of = {(e.episode_id, e.step): e.image for e in examples}
    chained = [e for e in later if (e.episode_id, e.step - 1) in image_of]
    assert chained  # the previous screen is the episode's screen one step before (its own row, when kept)
    assert all(e.previous_image == image_of[(e.episode_id, e.step - 1)] for e in chained)
    assert load_previous_image(dataset, later[0]).shape == (SIZE[1], SIZE[0], 3)


def test_the_history_prompt_marks_the_last_action_on_the_previous_screen(checkpoint: Path) -> None:
    from darwin.actions import Click
    from darwin.verifiers.learned.model import SuccessClassifier, _last_image_mask, verifier_prompt
    from darwin.verifiers.marks import MARK_COLORS, scale_point

    screen = np.zeros((SIZE[1], SIZE[0], 3), np.uint8)
    previous = np.full_like(screen, 200)
    device = (1080, 2400)
    action = Click(x=540, y=600)
    (single,) = verifier_prompt("Settings: Turn on Dark Theme.", screen).messages
    assert len(single.images) == 1 and single.text == "Settings: Turn on Dark Theme.".join(
        ["Goal: ", "\nIs the goal achieved on this screen?"]
    )  # old data and old models: today's prompt
    (message,) = verifier_prompt("Settings: Turn on Dark Theme.", screen, previous, action, device).messages
    marked, now = message.images
    assert now is screen and "first image is the screen before the last action" in message.text
    cx, cy = scale_point(action.x, action.y, device, SIZE)
    changed = np.argwhere((marked != previous).any(-1))
    assert len(changed) and np.abs(changed - [cy, cx]).max() <= 6  # only around the tap point
    assert tuple(marked[cy, cx]) == MARK_COLORS["click"] and int(previous.min()) == 200  # input untouched
    with pytest.raises(ValueError, match="device_size"):
        verifier_prompt("g", screen, previous, action)
    # A batch mixing a history prompt and a single-screen one: 3 images; the head pools the current screen only.
    model = SuccessClassifier(load_tiny_vlm(checkpoint), history=True)
    batch = model.inputs(["g", "g"], [screen, screen], [previous, None], [action, None], [device, None])
    assert len(batch["image_grid_thw"]) == 3
    tokens = batch["mm_token_type_ids"]
    per_image = (
        int(batch["image_grid_thw"][-1].prod())
        // load_tiny_vlm(checkpoint).model.config.vision_config.spatial_merge_size ** 2
    )
    assert (tokens == 1).sum(1).tolist() == [2 * per_image, per_image]
    assert _last_image_mask(tokens).sum(1).tolist() == [per_image, per_image]
    assert model(batch).shape == (2,)


def test_a_history_model_reads_the_last_move_of_a_request(
    dataset: Path, checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from darwin.actions import Click, Finished
    from darwin.types import Decision, Observation, Phase, Transition
    from darwin.verifiers.base import VerificationRequest
    from darwin.verifiers.learned.model import VERIFIER_FILE, load_classifier

    config = VerifierTrainConfig(
        checkpoint=str(checkpoint),
        train_tasks=("settings_dark_theme", "booking.com_3"),
        epochs=1,
        batch_size=8,
        bootstrap_resamples=100,
        seed=1,
    )
    assert config.history  # the default
    train_verifier(dataset, tmp_path / "model", config)
    record = json.loads((tmp_path / "model" / VERIFIER_FILE).read_text())
    assert record["inputs"] == "screen+previous_marked" and record["config"]["history"] is True

    verifier = LearnedVerifier(str(tmp_path / "model"))
    assert verifier.history
    images_per_call: list[int] = []
    original = verifier.model.inputs

    def spy(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - the classifier's own inputs, counted
        batch = original(*args, **kwargs)
        images_per_call.append(len(batch["image_grid_thw"]))
        return batch

    monkeypatch.setattr(verifier.model, "inputs", spy)
    task = get_task("settings_dark_theme")
    agent_screen = np.full((280, 126, 3), 90, np.uint8)  # the agent's screen size: resized to the verifier's
    device = (1080, 2400)

    def step(i: int, action) -> Transition:  # noqa: ANN001
        obs = Observation(screenshot=agent_screen, goal="g", device_size=device, task_id=task.id, step=i)
        return Transition("e", task.id, i, Phase.EXECUTION, obs, Decision(action=action))

    def request(transitions: list[Transition]) -> VerificationRequest:
        return VerificationRequest(
            task=task,
            phase=Phase.EXECUTION,
            instruction=task.instruction,
            spec=task.verifier,
            transitions=transitions,
            final_state=None,
            final_screenshot=np.zeros((SIZE[1], SIZE[0], 3), np.uint8),
        )

    with_move = asyncio.run(verifier.verify(request([step(0, Click(x=100, y=200)), step(1, Finished())])))
    without = asyncio.run(verifier.verify(request([])))
    only_finished = asyncio.run(verifier.verify(request([step(0, Finished())])))
    for verdict in (with_move, without, only_finished):
        assert isinstance(verdict.success, bool) and verdict.reason.startswith("learned: p=")
    assert images_per_call == [2, 1, 1]  # the move before `finished` is marked; no move: the single screen

    # A record written before history existed (no "inputs") loads as a screen-only model and ignores transitions.
    del record["inputs"]
    (tmp_path / "model" / VERIFIER_FILE).write_text(json.dumps(record))
    old, _ = load_classifier(tmp_path / "model")
    assert not old.history
    screen_only = LearnedVerifier(str(tmp_path / "model"))
    counted: list[int] = []
    plain = screen_only.model.inputs
    monkeypatch.setattr(
        screen_only.model,
        "inputs",
        lambda *a, **k: counted.append(len(plain(*a, **k)["image_grid_thw"])) or plain(*a, **k),
    )
    asyncio.run(screen_only.verify(request([step(0, Click(x=100, y=200))])))
    assert counted == [1]
    record["inputs"] = "screen+video"
    (tmp_path / "model" / VERIFIER_FILE).write_text(json.dumps(record))
    with pytest.raises(ValueError, match="inputs 'screen\\+video'"):
        load_classifier(tmp_path / "model")


def test_old_rows_load_and_history_rows_are_checked(tmp_path: Path) -> None:
    from darwin.actions import Click, action_to_json
    from darwin.png import encode_png
    from darwin.verifiers.learned.data import DatasetWriter, LabelledScreen, VerifierExample

    (tmp_path / "x.png").write_bytes(encode_png(np.zeros((4, 2, 3), np.uint8)))
    old = '{"id": "a", "image": "x.png", "goal": "g", "label": true, "task_id": "t", "app": "A", "step": 3}'
    (tmp_path / "examples.jsonl").write_text(old + "\n")
    (example,) = load_examples(tmp_path)
    assert (example.previous_image, example.last_action, example.device_size, example.action()) == ("", "", None, None)

    click = action_to_json(Click(x=1, y=2))
    base = '"id": "a", "image": "x.png", "goal": "g", "label": true, "task_id": "t", "app": "A"'
    for extra, message in [
        ('"previous_image": "gone.png"', "previous_image 'gone.png' not found"),
        (f'"previous_image": "x.png", "last_action": {json.dumps(click)}', "needs the device_size"),
        (
            '"previous_image": "x.png", "last_action": "{\\"type\\": \\"fly\\"}", "device_size": [1080, 2400]',
            "last_action is not an action",
        ),
        ('"previous_image": "x.png", "device_size": [1080]', "device_size must be"),
    ]:
        (tmp_path / "examples.jsonl").write_text("{" + base + ", " + extra + "}\n")
        with pytest.raises(VerifierDataError, match=f"examples.jsonl:1: .*{message}"):
            load_examples(tmp_path)
    (tmp_path / "examples.jsonl").write_text(
        "{"
        + base
        + f', "previous_image": "x.png", "last_action": {json.dumps(click)}, "device_size": [1080, 2400]'
        + "}\n"
    )
    (example,) = load_examples(tmp_path)
    assert example.device_size == (1080, 2400) and example.action() == Click(x=1, y=2)

    # The same screen and goal reached by different moves are different inputs: both kept, once each.
    writer = DatasetWriter(tmp_path / "d")
    screen, before = np.zeros((8, 4, 3), np.uint8), np.full((8, 4, 3), 9, np.uint8)
    row = VerifierExample(id="r", image="", goal="g", label=False, task_id="t", app="A")
    moved = replace(row, last_action=click, device_size=(1080, 2400))
    assert (
        writer.write([(row, screen), LabelledScreen(moved, screen, before), LabelledScreen(moved, screen, before)]) == 2
    )
    assert DatasetWriter(tmp_path / "d").write([LabelledScreen(moved, screen, before)]) == 0
    stored = load_examples(tmp_path / "d")
    assert [bool(e.previous_image) for e in stored] == [False, True]


def test_a_runs_final_screen_keeps_the_screen_before_its_last_move(tmp_path: Path) -> None:
    from darwin.actions import is_terminal
    from darwin.evaluate import evaluate
    from darwin.store import RunStore
    from darwin.verifiers.learned.data import DatasetWriter, examples_from_run, load_previous_image

    with RunStore.for_run_dir(tmp_path / "run") as store:
        run_id = store.start_run("oracle")
        workflow = StepWorkflow(config=StepConfig(observation_size=(126, 280)))
        asyncio.run(
            evaluate(
                [get_task("settings_dark_theme")],
                [SimPhoneEnv(seed=0)],
                lambda i: OracleActor(),
                1,
                workflow,
                store,
                run_id,
            )
        )
        (episode,) = store.episodes(run_id)
        steps = store.steps(episode.episode_id)
        move = [s for s in steps if s.action is not None and not is_terminal(s.action)][-1]
        stored_before = store.load_screenshot(move.screenshot_path)
    ((example, final, previous),) = examples_from_run(tmp_path / "run", "rule")
    assert example.label and example.last_action == move.action_json and example.device_size == (1080, 2400)
    assert previous is not None and previous.shape == final.shape and np.array_equal(previous, stored_before)
    assert DatasetWriter(tmp_path / "data").write(examples_from_run(tmp_path / "run")) == 1
    (loaded,) = load_examples(tmp_path / "data")
    assert np.array_equal(load_previous_image(tmp_path / "data", loaded), stored_before)


def test_a_run_rewarded_by_one_verifier_gives_its_auditors_labels(tmp_path: Path) -> None:
    """A learned-reward run stores only the composite's verdict; ``--verifier-kind rule`` reads the
    rule's audit from it, so the RL policy's own screens can be fed back into the verifier's data."""
    from darwin.store import RunStore
    from darwin.types import Phase, Termination, Trajectory
    from darwin.verifiers.learned.data import examples_from_run

    task = get_task("settings_dark_theme")
    with RunStore.for_run_dir(tmp_path) as store:
        run_id = store.start_run("r", config=None)
        audits = {"e0": "no", "e1": "yes", "e2": "unverified"}
        for i, (episode, rule) in enumerate(audits.items()):
            store.start_episode(run_id, episode, task, phone="p")
            reason = f"[learned] learned: p=0.9 (threshold 0.5) (audit: rule: {rule} (settings.dark_theme: x))"
            store.record_verdict(episode, Phase.EXECUTION, "composite", True, 1.0, reason)
            trajectory = Trajectory(
                episode,
                task,
                termination=Termination(TerminationReason.AGENT_FINISHED),
                verdicts={Phase.EXECUTION: Verdict(True)},
            )
            store.finish_episode(trajectory, np.full((8, 4, 3), i, np.uint8))
    by_rule = examples_from_run(tmp_path, "rule")
    assert [(e.episode_id, e.label, e.source) for e, _, _ in by_rule] == [
        ("e0", False, "run:rule(audit)"),
        ("e1", True, "run:rule(audit)"),
    ]
    assert [e.label for e, _, _ in examples_from_run(tmp_path)] == [True, True, True]  # the reward's own verdicts
    assert examples_from_run(tmp_path, "llm_judge") == []


def test_swapped_goal_negatives_pair_a_success_screen_with_a_goal_it_does_not_meet(dataset: Path) -> None:
    import torch

    from darwin.verifiers.learned.training import swapped_goal_negatives

    examples = load_examples(dataset)
    positives = [i for i, e in enumerate(examples) if e.label]
    achieved = {(e.image, e.goal) for e in examples if e.label}
    goal_of = {e.task_id: e.goal for e in examples}
    pairs = swapped_goal_negatives(examples, positives, 1.0, torch.Generator().manual_seed(0))
    assert 0 < len(pairs) <= len(positives)
    same_app = 0
    for i, goal in pairs:
        example = examples[i]
        assert goal != example.goal and goal in goal_of.values() and (example.image, goal) not in achieved
        if example.app == "Booking.com":  # the app has two tasks here: about half the draws take the other one
            other = "booking.com_0" if example.task_id == "booking.com_3" else "booking.com_3"
            same_app += goal == goal_of[other]
    booking = sum(examples[i].app == "Booking.com" for i, _ in pairs)
    assert booking // 4 <= same_app < booking  # half same-app, plus any-task draws that land on it
    # the screen satisfies the goal it is paired with: never drawn
    (i, goal), *_ = pairs
    twin = replace(examples[i], id="twin", goal=goal, task_id="twin", label=True)
    again = swapped_goal_negatives([*examples, twin], positives, 1.0, torch.Generator().manual_seed(0))
    assert (i, goal) not in again
    assert swapped_goal_negatives(examples, positives, 0.0, torch.Generator()) == []


def test_a_success_hidden_behind_the_launcher_is_not_a_positive_screen() -> None:
    """After the oracle turns on Dark Theme and goes home, the state still satisfies the goal but
    the launcher shows nothing of it: dropped by default, kept (labelled achieved) on request."""
    from darwin.actions import Finished, PressHome
    from darwin.agents.base import Actor
    from darwin.types import Decision
    from darwin.verifiers.learned.data import play_and_label

    class OracleThenHome(Actor):
        def __init__(self) -> None:
            self.oracle, self.went_home = OracleActor(), False

        async def start_phase(self, env, task, phase, instruction, verifier) -> None:  # noqa: ANN001
            await self.oracle.start_phase(env, task, phase, instruction, verifier)

        async def act(self, observation, history) -> Decision:  # noqa: ANN001
            decision = await self.oracle.act(observation, history)
            if not isinstance(decision.action, Finished):
                return decision
            if self.went_home:
                return decision
            self.went_home = True
            return Decision(action=PressHome())

    task = get_task("settings_dark_theme")

    def play(keep: bool) -> list:
        return asyncio.run(
            play_and_label(
                SimPhoneEnv(seed=3),
                task,
                OracleThenHome(),
                size=SIZE,
                actor_size=SIZE,
                budget=12,
                source="oracle",
                episode_id="e",
                keep_hidden_successes=keep,
            )
        )

    dropped, kept = play(False), play(True)
    assert len(kept) == len(dropped) + 1
    hidden = kept[-1].example
    assert hidden.label and json.loads(hidden.last_action) == {"type": "press_home"}
    assert [r.example.label for r in dropped][-1] is True  # the success screen inside Settings stays
    assert all(r.example.step != hidden.step for r in dropped)


def test_a_task_with_setup_is_labelled_on_its_set_up_phone() -> None:
    """A question about a day's events is only answerable once the instance's events are on the
    phone (Task.setup): the labelled episode applies it first, as a workflow does, so the
    oracle answers it and the last screen is a success (without the setup there is no plan)."""
    from darwin.templates import get_template
    from darwin.types import DemoStart
    from darwin.verifiers.learned.data import play_and_label

    task = get_template("calendar.count_day").instance(100000)
    assert task.setup

    def play(t):  # noqa: ANN001, ANN202
        return asyncio.run(
            play_and_label(
                SimPhoneEnv(seed=121443151),
                t,
                OracleActor(max_expansions=2000),
                size=SIZE,
                actor_size=SIZE,
                budget=8,
                source="oracle",
                episode_id="e",
            )
        )

    rows = play(task)
    labels = [r.example.label for r in rows]
    assert labels[0] is False and labels[-1] is True
    with pytest.raises(ValueError, match="starts inside a demonstration"):
        play(task.model_copy(update={"start": DemoStart(remaining=1)}))
