"""Self-evolution's flywheel (issue 45): loop erasure, the round's stages, the leakage guard
before anything runs, the config's checks, and `darwin run examples/self_evolve.py --preset
miniature` end to end, and the comparison arms' presets (RL on the training apps, few-shot
adaptation)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from darwin.agents.scripted import RandomActor
from darwin.algos.paths import erase_loops
from darwin.envs.sim.env import SimPhoneEnv
from darwin.hindsight.exploration import explore
from darwin.hindsight.leakage import LeakageError
from darwin.hindsight.synthesizer import HindsightSynthesizer
from darwin.predicates import evaluate
from darwin.run.load import apply_overrides, load_experiment
from darwin.run.self_evolution import SelfEvolution, _cut, replay_demonstration
from darwin.templates import split_templates

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "self_evolve.py"


def test_erase_loops_by_hand() -> None:
    # a -1-> b -2-> c -3-> b -4-> d -5-> c -6-> e: b..b is a loop (steps 2, 3); then d -> c is new
    assert erase_loops(["a", "b", "c", "b", "d", "c", "e"]) == [1, 4, 5, 6]
    # back at the start: everything before goes; a step that changes nothing is a loop of one
    assert erase_loops(["a", "b", "a", "c"]) == [3]
    assert erase_loops(["a", "a", "b"]) == [2]
    assert erase_loops(["a", "b", "c", "a"]) == []
    assert erase_loops(["a"]) == []
    with pytest.raises(ValueError, match="start state"):
        erase_loops([])


def test_a_cut_demonstration_is_shorter_and_still_reaches_its_goal() -> None:
    # Chrome, phone 100, the random agent of seed 1001 (the miniature's second exploration):
    # its hindsight tasks are reached after 10 actions with a loop in them.
    run = asyncio.run(
        explore(
            SimPhoneEnv(seed=100),
            "Chrome",
            steps=60,
            actor=RandomActor(seed=1001),
            observation_size=(168, 364),
            keep_screenshots=True,
        )
    )
    kept = HindsightSynthesizer().synthesize(run).kept
    assert kept
    for task in kept:
        cut = _cut(task, run)
        assert len(cut.demonstration) < task.steps
        shots, reached = replay_demonstration(cut, SimPhoneEnv(seed=100), (168, 364))
        assert reached, task.task.instruction
        assert len(shots) == len(cut.demonstration) + 1  # the screen before each action and before 'finished'
        assert not evaluate(task.task.verifier, run.start_state).success  # and it did not hold at the start


def test_a_held_out_template_in_the_training_tasks_is_refused_before_anything_runs(tmp_path) -> None:
    split = split_templates(load_experiment(EXAMPLE, "miniature").self_evolution.split)  # type: ignore[union-attr]
    held = split.sets["unseen_apps"][0].id
    config = apply_overrides(load_experiment(EXAMPLE, "miniature"), [f'tasks=["{held}"]'])
    with pytest.raises(LeakageError, match=held.replace(".", r"\.")):
        asyncio.run(SelfEvolution(config, tmp_path).run())
    assert not any(tmp_path.iterdir())  # no warm start, no exploration, nothing written


def test_the_comparison_arms_differ_from_self_evolution_only_in_their_tasks() -> None:
    evolve = load_experiment(EXAMPLE, "default")
    rl_only, few_shot = load_experiment(EXAMPLE, "train_apps_rl"), load_experiment(EXAMPLE, "few_shot")
    split = split_templates(evolve.self_evolution.split)  # type: ignore[union-attr]
    held_out = {t.template for t in split.sets["unseen_apps"]}
    evaluated = set(evolve.evaluation.task_sets["unseen_apps"])
    for arm in (rl_only, few_shot):
        assert arm.self_evolution is None
        assert (arm.sft, arm.evaluation, arm.learner, arm.phones) == (
            evolve.sft,
            evolve.evaluation,
            evolve.learner,
            evolve.phones,
        )  # the same warm start, evaluated on the same tasks
        assert arm.updates == evolve.self_evolution.rounds * evolve.self_evolution.rl_updates  # type: ignore[union-attr]
    assert rl_only.tasks == evolve.tasks
    shots = [t for t in few_shot.tasks if t not in evolve.tasks]
    assert few_shot.tasks[: len(evolve.tasks)] == evolve.tasks and len(shots) == 16
    assert {t.rsplit(".s", 1)[0] for t in shots} <= held_out  # human-written tasks of the held-out apps ...
    assert not set(shots) & evaluated  # ... none of them evaluated


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (["phones.provider=adb"], "use phones.provider='sim'"),
        (["self_evolution.max_demonstration_steps=12"], "lower it below the horizon"),
        (["self_evolution.rl_updates=1"], "raise rl_updates"),
        (["self_evolution.apps=[]"], "self_evolution.apps"),
    ],
)
def test_the_config_refuses_what_cannot_run(settings, message) -> None:
    from darwin.problems import ExperimentError

    with pytest.raises(ExperimentError, match=message):
        apply_overrides(load_experiment(EXAMPLE, "miniature"), settings)


def test_the_miniature_runs_every_stage_end_to_end(tmp_path) -> None:
    from darwin.agents.warm_start import load_warm_start
    from darwin.cli.main import main

    run_dir = tmp_path / "run"
    result = CliRunner().invoke(
        main,
        [
            "run",
            str(EXAMPLE),
            "--preset",
            "miniature",
            "--run-dir",
            str(run_dir),
            "--set",
            f"cache_dir={tmp_path / 'cache'}",
        ],
        terminal_width=400,
    )
    assert result.exit_code == 0, result.output
    assert "unseen_apps:" in result.output  # the held-out apps' success before and after
    record = json.loads((run_dir / "self_evolution.json").read_text())
    assert record["apps"] == ["Chrome"] and "Chrome" in record["held_out_apps"]
    (one,) = record["rounds"]
    assert one["explorations"] == 2 and one["explored_steps"] == 120
    assert one["tasks"] and all(t.startswith("hindsight.chrome.") for t in one["tasks"])
    assert all(n <= 8 for n in one["demonstration_steps"])  # max_demonstration_steps, loops cut
    assert one["rl_updates"] == 2 and one["finetune_loss"] is not None
    # the fine-tuning mixed the training apps' oracle demonstrations (replay_episodes) into the explorer's
    data = one["finetune_data"]
    assert data["synthesised_episodes"] == len(one["tasks"]) and data["training_app_episodes"] == 2
    # each synthesised demonstration trains its actions and its `finished`; the oracle's add theirs
    assert data["steps"] > sum(one["demonstration_steps"]) + len(one["tasks"])
    # the round's tasks carry no template; its demonstrations and both policies are on disk
    tasks = json.loads((run_dir / "round-1" / "tasks.json").read_text())
    assert [t["id"] for t in tasks] == one["tasks"] and all(t.get("template") is None for t in tasks)
    demos = (run_dir / "round-1" / "demonstrations.jsonl").read_text().splitlines()
    assert len(demos) == len(tasks) and json.loads(demos[0])["steps"][-1]["action"]["type"] == "finished"
    for checkpoint in ("finetuned", "policy"):
        assert load_warm_start(run_dir / "round-1" / checkpoint).observation_size == (168, 364)
    # the RL round trained on the synthesised tasks and the training tasks
    rl = json.loads((run_dir / "round-1" / "rl" / "experiment.json").read_text())
    assert rl["tasks"][0].endswith("round-1/tasks.json") and rl["checkpoint"].endswith("round-1/finetuned")
    # stage 3: a verifier trained on the round's own demonstrations rewarded its RL, the rule auditing
    verifier = one["verifier"]
    assert verifier["trained"] and verifier["added"]["demonstrations"] > 0 and verifier["positives"] > 0
    assert verifier["examples"] == verifier["added"]["demonstrations"]  # round 1: nothing judged before it
    assert rl["verifier"]["name"] == "composite" and rl["verifier"]["kwargs"]["mode"] == "audit"
    learned, rule = rl["verifier"]["kwargs"]["verifiers"]
    assert learned["kwargs"]["path"].endswith("round-1/verifier") and rule["name"] == "rule"
    audit = verifier["rl_audit"]
    assert audit["compared"] > 0 and 0 <= audit["agreed"] <= audit["compared"]
    # the verdicts that rewarded the RL episodes are training data for the next round's verifier
    assert verifier["added"]["rl"] > 0
    # the explorations are in the run database, read back whole
    from darwin.hindsight.records import load_explorations
    from darwin.store import RunStore

    store = RunStore.for_run_dir(run_dir)
    try:
        (explore_run,) = [r for r in store.runs() if r.name.endswith("round 1 exploration")]
        explored = load_explorations(store, explore_run.run_id)
    finally:
        store.close()
    assert len(explored) == 2 and all(e.app == "Chrome" and len(e.steps) == 60 for e in explored)
    assert all(e.start_screenshot is not None for e in explored)
    evaluations = json.loads((run_dir / "eval.json").read_text())
    assert set(evaluations) == {"warm_start", "final"}
    assert all("unseen_apps" in e["per_set"] for e in evaluations.values())


def test_novelty_candidates_put_the_explorer_inside_the_novelty_explorer(tmp_path) -> None:
    def explored(candidates: int) -> list[tuple[object, ...]]:
        config = apply_overrides(
            load_experiment(EXAMPLE, "miniature"),
            [f"self_evolution.novelty_candidates={candidates}", "self_evolution.exploration_steps=30"],
        )
        runs = asyncio.run(SelfEvolution(config, tmp_path / str(candidates))._explore(1, tmp_path / "unused"))
        return [tuple(step.action for step in run.steps) for run in runs]

    plain, novel = explored(1), explored(4)
    assert len(plain) == len(novel) == 2
    assert plain != novel  # the same random proposers, a different choice among 4 of their proposals


def test_the_dry_run_says_what_every_round_does_and_what_rewards_it() -> None:
    from darwin.cli.main import main

    def row(*overrides: str) -> str:
        sets = [item for override in overrides for item in ("--set", override)]
        result = CliRunner().invoke(main, ["run", str(EXAMPLE), "--dry-run", *sets])
        assert result.exit_code == 0, result.output
        # the table's row, its value wrapped over the lines whose first column is empty
        lines = result.output.splitlines()
        (start,) = [i for i, line in enumerate(lines) if line.strip("│ ").startswith("self-evolution")]
        cells = [lines[start].split("│")[2]]
        for line in lines[start + 1 :]:
            parts = line.split("│")
            if len(parts) < 4 or parts[1].strip():
                break
            cells.append(parts[2])
        return " ".join(" ".join(cells).split())

    plain = row()
    assert "2 round(s) on Calendar, Chrome: 8 x 80 steps explored by the policy at temperature 1.5" in plain
    assert (
        "hindsight tasks (at most 16); 120 fine-tuning steps (with 64 training-app demonstrations); 6 RL updates rewarded by the experiment's verifier"
        in plain
    )
    stage3 = row('self_evolution.learned_verifier={"reward": "learned", "agreement_episodes": 0}')
    assert "rewarded by a learned verifier retrained every round (reward 'learned'" in stage3
    assert "held-out rules not measured" in stage3
