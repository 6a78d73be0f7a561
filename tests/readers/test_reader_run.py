"""A run with a reader, end to end (issue 72): the SFT warm start is trained on prompts with the
marks and pointing targets, RL acts on read screens and re-scores those prompts, and the run logs
the reader's cost with each update."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

SMALL_READING_RUN = """
from darwin import EvaluationConfig, ExperimentConfig, LearnerConfig, PhonesConfig, PolicyConfig, SFTConfig

def build(preset):
    return ExperimentConfig(
        name="reading", tasks=("settings_dark_theme", "amazon_0"), horizon=6,
        phones=PhonesConfig(count=2, seed=3),
        sft=SFTConfig(steps=3, warmup_steps=1, batch_size=4, phones=2, episodes=4, heldout_episodes=0,
                      agent={"reader": {"name": "elements"}}),
        cache_dir=CACHE,
        policy=PolicyConfig(max_batch=2, max_wait=0.01),
        learner=LearnerConfig(critic={"warmup_updates": 1}, ppo_epochs=1, mini_batch_size=8, speed={"micro_batch_size": 4}),
        rollout_steps=12, updates=2, evaluation=EvaluationConfig(samples=1, phones=2),
    )
"""


def test_a_small_run_with_the_elements_reader_trains_acts_and_logs_the_reader(tmp_path: Path) -> None:
    from darwin.cli.main import main

    experiment = tmp_path / "reading.py"
    experiment.write_text(SMALL_READING_RUN.replace("CACHE", repr(str(tmp_path / "cache"))))
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(main, ["run", str(experiment), "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    # the warm start records its reader, so RL and evaluation read as the demonstrations did
    (agent_file,) = (tmp_path / "cache").rglob("darwin_agent.json")
    assert json.loads(agent_file.read_text())["agent"]["reader"]["name"] == "elements"
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    logged = {k for m in metrics for k in _flat(m)}
    assert any(k.endswith("elements(clickable_only=False,max_marks=48)/ms_per_screen") for k in logged), sorted(logged)


def _flat(record: dict, prefix: str = "") -> list[str]:
    keys = []
    for k, v in record.items():
        keys += _flat(v, f"{prefix}{k}/") if isinstance(v, dict) else [f"{prefix}{k}"]
    return keys
