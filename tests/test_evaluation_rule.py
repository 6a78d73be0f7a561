"""One phone-state rule for every evaluation: `darwin eval`, `darwin sft`'s evaluation and
`darwin run`'s evaluation play one checkpoint on the same phones and seeds, episode for
episode, and get the same numbers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from click.testing import CliRunner

import darwin.evaluate
from darwin.cli.main import main
from darwin.components import ComponentSpec
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.run.build import build_eval_phones, build_policy_pool, build_workflow, warm_start_checkpoint
from darwin.run.config import EvaluationConfig, ExperimentConfig, PhonesConfig
from darwin.run.recipe import evaluate_experiment
from darwin.sft.config import SFTConfig
from darwin.sft.evaluation import evaluate_warm_start
from darwin.store import RunStore
from darwin.types import Trajectory

TASKS = ("settings_dark_theme", "clock_1")
SEED, SAMPLES = 5, 2


def _played(store: RunStore, run_id: str) -> list[tuple[str, tuple[str | None, ...]]]:
    """Each episode's task and actions, in the order they were played (one phone: a fixed order)."""
    rows = sorted(store.episodes(run_id), key=lambda e: e.started_at)
    return [(e.task_id, tuple(s.action_json for s in store.steps(e.episode_id))) for e in rows]


def _played_trajectories(trajectories: list[Trajectory]) -> list[tuple[str, tuple[str | None, ...]]]:
    return [
        (
            t.task.id,
            tuple(None if s.decision.action is None else s.decision.action.model_dump_json() for s in t.transitions),
        )
        for t in trajectories
    ]


def test_the_three_evaluations_play_the_same_episodes(tmp_path: Path, monkeypatch) -> None:
    built: list[tuple[int, int, PerturbationConfig, str, bool]] = []  # every path builds its phones in one place
    make_phones = darwin.evaluate.evaluation_phones

    def spy(first_seed, count, *, perturbation=None, locale="auto", prefix="eval"):  # noqa: ANN001, ANN202
        phones = make_phones(first_seed, count, perturbation=perturbation, locale=locale, prefix=prefix)
        built.append(
            (
                first_seed,
                count,
                perturbation or PerturbationConfig(),
                locale,
                all(p.reset_between_episodes for p in phones),
            )
        )
        return phones

    monkeypatch.setattr(darwin.evaluate, "evaluation_phones", spy)
    config = ExperimentConfig(
        name="rule",
        tasks=TASKS,
        workflow=ComponentSpec(name="lifecycle"),
        phones=PhonesConfig(count=1, seed=3),
        sft=SFTConfig(steps=30, warmup_steps=2, batch_size=8, phones=2, episodes=8, heldout_episodes=0),
        cache_dir=str(tmp_path / "cache"),
        evaluation=EvaluationConfig(phones=1, phone_seed=SEED, samples=SAMPLES),
    )
    checkpoint = warm_start_checkpoint(config)

    # darwin eval --agent tiny:CHECKPOINT (one phone seeded SEED; a greedy episode and SAMPLES sampled ones per task)
    result = CliRunner().invoke(
        main,
        [
            "eval",
            "--agent",
            f"tiny:{checkpoint}",
            "--tasks",
            ",".join(TASKS),
            "--phones",
            "1",
            "--samples",
            str(SAMPLES),
            "--seed",
            str(SEED),
            "--run-dir",
            str(tmp_path / "eval"),
            "--json",
            str(tmp_path / "eval.json"),
        ],
    )
    assert result.exit_code == 0, result.output
    cli = json.loads((tmp_path / "eval.json").read_text())
    with RunStore.for_run_dir(tmp_path / "eval") as store:
        cli_played = _played(store, cli["run_id"])

    # darwin sft's evaluation of the same checkpoint
    sft = asyncio.run(evaluate_warm_start(checkpoint, TASKS, phones=1, samples=SAMPLES, seed=SEED))

    # darwin run's evaluation, on the experiment's evaluation phones
    async def run_evaluation() -> tuple[float, list]:
        pool = build_policy_pool(config, checkpoint, temperature=1.0)
        workflow = build_workflow(config, pool.observation_size, evaluation=True)
        with RunStore.for_run_dir(tmp_path / "run") as store:
            run_id = store.start_run("rule evaluation", config=None)
            try:
                evaluated = await evaluate_experiment(
                    config,
                    "final",
                    config.resolve_tasks(),
                    build_eval_phones(config),
                    pool,
                    workflow,
                    0,
                    0,
                    store=store,
                    run_id=run_id,
                )
            finally:
                await pool.aclose()
            return evaluated.success_rate, _played(store, run_id)

    run_rate, run_played = asyncio.run(run_evaluation())

    sft_played = _played_trajectories(sft.trajectories)
    assert len(cli_played) == len(TASKS) * (1 + SAMPLES)
    assert cli_played == sft_played == run_played  # the same actions, episode for episode, sampled ones too
    assert cli["overall"]["success_rate"] == sft.overall.success_rate == run_rate
    assert len({actions for _, actions in cli_played}) > len(TASKS)  # the sampled episodes did not all play alike
    assert len(built) == 3 and len(set(built)) == 1 and built[0][-1]  # the same phones, reset before every episode
