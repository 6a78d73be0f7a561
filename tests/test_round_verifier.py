"""Stage-3 verification in the flywheel (issue 45): the demonstrations' screens labelled by their
synthesised goals, a verifier retrained as the run's data grows and measured on held-out human
rules that never train it, and the round's reward in both modes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from darwin.agents.scripted import RandomActor
from darwin.components import ComponentSpec, build_component
from darwin.envs.sim.env import SimPhoneEnv
from darwin.hindsight.base import SynthesisedTask
from darwin.hindsight.exploration import explore
from darwin.hindsight.synthesizer import HindsightSynthesizer
from darwin.models.config import TinyVLMConfig
from darwin.models.factory import build_tiny_vlm
from darwin.run.config import RoundVerifierConfig
from darwin.run.round_verifier import DemonstrationActor, RoundVerifier, RoundVerifierRecord, round_reward
from darwin.run.self_evolution import _cut
from darwin.templates import SplitConfig, split_templates
from darwin.types import Phase, VerifierSpec
from darwin.verifiers.learned.data import load_examples
from darwin.workflows.step import LifecycleWorkflow, StepConfig

SIZE = (56, 112)
SPLIT = SplitConfig(seed=0, unseen_apps=2, train_instances=4, eval_instances=2)
PHONE = 100


def _tasks(explorer_seeds: range) -> list[SynthesisedTask]:
    """Chrome explored by the random agent from phone ``PHONE``, its hindsight tasks with their loops cut."""
    out: list[SynthesisedTask] = []
    seen: list[VerifierSpec] = []
    for seed in explorer_seeds:
        run = asyncio.run(
            explore(
                SimPhoneEnv(seed=PHONE),
                "Chrome",
                steps=60,
                actor=RandomActor(seed=seed),
                observation_size=SIZE,
                keep_screenshots=True,
            )
        )
        kept = HindsightSynthesizer().synthesize(run, seen=seen).kept
        seen += [t.task.verifier for t in kept]
        out += [_cut(t, run) for t in kept]
    return out


def _tasks_file(path: Path, tasks: list[SynthesisedTask]) -> Path:
    path.write_text(json.dumps([t.task.model_dump(mode="json", exclude_none=True) for t in tasks]))
    return path


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("policy")
    build_tiny_vlm(TinyVLMConfig(screen_width=SIZE[0], screen_height=SIZE[1]), seed=0).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def explored() -> list[SynthesisedTask]:
    return _tasks(range(1000, 1006))


@pytest.fixture(scope="module")
def trained(
    tmp_path_factory: pytest.TempPathFactory, checkpoint: Path, explored: list[SynthesisedTask]
) -> tuple[RoundVerifier, Path, list]:
    """Two rounds of a round verifier, each with half the tasks: each adds its demonstrations, then trains again."""
    run_dir = tmp_path_factory.mktemp("self-evolve")
    held_out = [t for t in split_templates(SPLIT).sets["unseen_apps"] if t.app == "Chrome"][:1]
    verifier = RoundVerifier(
        RoundVerifierConfig(epochs=1, agreement_episodes=1),
        run_dir,
        agreement_tasks=held_out,
        base_tasks=(),
        observation_size=SIZE,
        horizon=8,
        seed=PHONE,
    )
    records = []
    half = len(explored) // 2
    for number, tasks in ((1, explored[:half]), (2, explored[half:])):
        tasks_file = _tasks_file(run_dir / f"tasks-{number}.json", tasks)
        record = RoundVerifierRecord()
        record.added["demonstrations"] = asyncio.run(
            verifier.add_demonstrations(number, [(t, SimPhoneEnv(seed=PHONE)) for t in tasks], tasks_file)
        )
        model = verifier.train(number, checkpoint, run_dir / f"round-{number}" / "verifier", record)
        records.append((record, model))
    return verifier, run_dir, records


def test_every_screen_of_a_demonstration_is_labelled_by_its_synthesised_goal(trained) -> None:
    verifier, _, _ = trained
    episodes: dict[str, list] = {}
    for example in load_examples(verifier.data):
        episodes.setdefault(example.episode_id, []).append(example)
    assert episodes
    for rows in episodes.values():
        rows.sort(key=lambda e: e.step)
        assert rows[0].source == "demonstration"
        # the synthesiser drops a goal already true at the start; the replay ends where the explorer reached it
        assert rows[0].label is False and rows[-1].label is True, [r.label for r in rows]
        assert rows[0].previous_image == "" and all(r.last_action for r in rows[1:])


def test_the_verifier_is_trained_again_each_round_on_more_data_and_measured_on_human_rules(trained) -> None:
    verifier, run_dir, records = trained
    (first, first_model), (second, second_model) = records
    assert first.trained and second.trained, (first.skipped, second.skipped)
    assert first_model == run_dir / "round-1" / "verifier" and second_model == run_dir / "round-2" / "verifier"
    assert (second_model / "report.json").is_file()
    assert second.added["demonstrations"] > 0 and second.examples == first.examples + second.added["demonstrations"]
    assert 0 < first.positives < second.positives
    for record in (first, second):
        assert record.threshold is not None and 0.0 <= record.threshold <= 1.0
        assert record.agreement is not None and record.agreement.split == "all"
        assert record.agreement.examples > 0 and record.agreement.positives > 0
        counts = record.agreement.metrics.counts
        assert counts.tp + counts.fp + counts.fn + counts.tn == record.agreement.examples
    # the human rules' screens are measured, never trained on
    held_out = {t.id for t in verifier.agreement_tasks}
    assert {e.task_id for e in load_examples(verifier.agreement_data)} == held_out
    assert not held_out & {e.task_id for e in load_examples(verifier.data)}


def test_a_round_without_a_success_screen_trains_no_verifier_and_says_why(
    tmp_path: Path, checkpoint: Path, explored: list[SynthesisedTask]
) -> None:
    verifier = RoundVerifier(
        RoundVerifierConfig(), tmp_path, agreement_tasks=[], base_tasks=(), observation_size=SIZE, horizon=8, seed=0
    )
    task = explored[0]
    empty = SynthesisedTask(task.task, (), task.start_state)  # its start: the goal does not hold there
    record = RoundVerifierRecord()
    asyncio.run(
        verifier.add_demonstrations(1, [(empty, SimPhoneEnv(seed=PHONE))], _tasks_file(tmp_path / "t.json", [task]))
    )
    assert verifier.train(1, checkpoint, tmp_path / "verifier", record) is None
    assert not record.trained and record.skipped is not None and "no success screen" in record.skipped
    assert not (tmp_path / "verifier").exists()


def _play(spec: ComponentSpec, task) -> tuple[bool | None, str]:
    verifier = build_component("verifier", spec)
    workflow = LifecycleWorkflow(verifier=verifier, config=StepConfig(observation_size=SIZE))
    trajectory = asyncio.run(workflow.run(SimPhoneEnv(seed=PHONE), task.task, DemonstrationActor(task.demonstration)))
    verdict = trajectory.verdicts[Phase.EXECUTION]
    return verdict.success, verdict.reason


def test_the_rounds_reward_asks_the_learned_verifier_where_no_rule_decides(trained, explored) -> None:
    _, _, records = trained
    model = records[-1][1]
    task = explored[0]
    fallback = round_reward(ComponentSpec(name="rule"), model, RoundVerifierConfig())
    success, reason = _play(fallback, task)
    assert success is True and reason.startswith("[rule]")
    # a goal in words, as a model describer writes it: the rule cannot check it, the learned verifier decides
    judged = task.task.model_copy(
        update={"verifier": VerifierSpec(predicate="judge.goal", params={"goal": "Open a new tab", "samples": 1})}
    )
    success, reason = _play(fallback, SynthesisedTask(judged, task.demonstration, task.start_state))
    assert success is not None and reason.startswith("[learned] learned: p=")
    # reward='learned': the learned verifier decides, the rule audits
    audited = round_reward(ComponentSpec(name="rule"), model, RoundVerifierConfig(reward="learned"))
    success, reason = _play(audited, task)
    assert success is not None and reason.startswith("[learned]") and "audit: rule: yes" in reason
