"""The learned verifier end to end: labelled SimPhone screens -> training -> a verifier that
serves as a workflow's reward; and the dataset format's errors."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from darwin.agents.scripted import OracleActor
from darwin.envs.sim.env import SimPhoneEnv
from darwin.models import TinyVLMConfig, build_tiny_vlm
from darwin.predicates import resolve
from darwin.tasks import get_task
from darwin.types import TerminationReason
from darwin.verifier_data import (
    VerifierDataError,
    generate_verifier_data,
    load_examples,
    load_image,
)
from darwin.verifier_train import VerifierTrainConfig, train_verifier
from darwin.verifiers.learned import LearnedVerifier
from darwin.workflows import StepConfig, StepWorkflow

pytestmark = pytest.mark.timeout(300)

SIZE = (56, 112)
TASKS = ["settings_dark_theme", "booking.com_3", "booking.com_0", "x_0"]  # two training tasks, an unseen task, an unseen app


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("verifier-data")
    added = generate_verifier_data(out, [get_task(t) for t in TASKS], episodes_per_agent=3, seed=0,
                                   observation_size=SIZE, budget=8)
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
    again = generate_verifier_data(dataset, [get_task(t) for t in TASKS], episodes_per_agent=3, seed=0,
                                   observation_size=SIZE, budget=8)
    assert again == 0  # the same seed plays the same episodes: every (screen, goal) is already there


def test_training_reports_every_split_and_the_verifier_serves_as_reward(dataset: Path, checkpoint: Path, tmp_path: Path) -> None:
    config = VerifierTrainConfig(checkpoint=str(checkpoint), train_tasks=("settings_dark_theme", "booking.com_3"),
                                 epochs=2, batch_size=8, bootstrap_resamples=100, seed=1)  # seed 1: a non-empty validation split
    report = train_verifier(dataset, tmp_path / "model", config)
    splits = {s.split: s for s in report.splits}
    assert {"train", "test_tasks", "test_apps"} <= set(splits)
    assert splits["test_tasks"].examples == sum(e.task_id == "booking.com_0" for e in load_examples(dataset))
    assert splits["test_apps"].examples == sum(e.task_id == "x_0" for e in load_examples(dataset))
    saved = json.loads((tmp_path / "model" / "report.json").read_text())
    assert saved["threshold"] == report.threshold and len(saved["epochs"]) == 2

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
        train_verifier(dataset, tmp_path / "m", VerifierTrainConfig(checkpoint=str(checkpoint), train_tasks=("clock_1",)))


@pytest.mark.parametrize("line, message", [
    ("not json", "not JSON"),
    ('{"id": "a"}', "missing fields"),
    ('{"id": "a", "image": "x.png", "goal": "g", "label": "yes", "task_id": "t", "app": "A"}', "label must be true or false"),
    ('{"id": "a", "image": "gone.png", "goal": "g", "label": true, "task_id": "t", "app": "A"}', "not found"),
    ('{"id": "a", "image": "x.png", "goal": "g", "label": true, "task_id": "t", "app": "A", "colour": 1}', "unknown fields"),
])
def test_bad_dataset_rows_name_the_line_and_the_problem(tmp_path: Path, line: str, message: str) -> None:
    (tmp_path / "x.png").write_bytes(b"")
    (tmp_path / "examples.jsonl").write_text(line + "\n")
    with pytest.raises(VerifierDataError, match=f"examples.jsonl:1: .*{message}"):
        load_examples(tmp_path)
    with pytest.raises(VerifierDataError, match="darwin verifier data --out"):
        load_examples(tmp_path / "empty")


def test_the_verifier_may_read_the_screen_finer_than_the_agent(checkpoint: Path, tmp_path: Path) -> None:
    from darwin.verifier_train import _backbone
    from darwin.verifiers.learned import SuccessClassifier, load_classifier

    double = (2 * SIZE[0], 2 * SIZE[1])
    model = SuccessClassifier(_backbone(VerifierTrainConfig(checkpoint=str(checkpoint)), double))
    batch = model.inputs(["Settings: Turn on Dark Theme."], [np.zeros((double[1], double[0], 3), np.uint8)])
    assert batch["image_grid_thw"].tolist() == [[1, double[1] // 14, double[0] // 14]]  # 4x the agent's patches
    assert model(batch).shape == (1,)
    model.save(tmp_path / "v", threshold=0.5, screen_size=double, metadata={})
    again, record = load_classifier(tmp_path / "v")
    assert record["screen_size"] == list(double)
    assert again.inputs(["g"], [np.zeros((double[1], double[0], 3), np.uint8)])["image_grid_thw"].tolist() == [[1, 16, 8]]


def test_audit_reports_the_reward_verifier_against_its_auditor(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from darwin.cli import main
    from darwin.store import RunStore
    from darwin.types import Phase
    from darwin.verifier_cli import audit_pairs

    task = get_task("settings_dark_theme")
    rows = [  # (reward verdict, auditor's verdict): 2 true positives, 1 false positive, 1 false negative, 1 true negative
        (True, "yes"), (True, "yes"), (True, "no"), (False, "yes"), (False, "no"),
    ]
    with RunStore.for_run_dir(tmp_path) as store:
        run_id = store.start_run("r", config=None)
        for i, (learned, rule) in enumerate(rows):
            store.start_episode(run_id, f"e{i}", task, phone="p")
            disagreement = "disagreement; " if learned != (rule == "yes") else ""
            reason = f"[learned] learned: p=0.5 (threshold 0.5) ({disagreement}audit: rule: {rule} (settings.dark_theme: x))"
            store.record_verdict(f"e{i}", Phase.EXECUTION, "composite", learned, float(learned), reason)
        store.record_verdict("e0", Phase.EXECUTION, "rule", True, 1.0, "settings.dark_theme: met")  # not a composite: ignored
    assert audit_pairs(tmp_path) == [("settings_dark_theme", p, a == "yes") for p, a in rows]
    result = CliRunner().invoke(main, ["verifier", "audit", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    overall = next(line for line in result.output.splitlines() if line.startswith("│ overall"))
    assert "0.667" in overall  # precision 2/3, recall 2/3, F1 2/3
    empty = tmp_path / "empty"
    with RunStore.for_run_dir(empty):
        pass
    assert "no audited verdicts" in CliRunner().invoke(main, ["verifier", "audit", str(empty)]).output
