"""scripts/probe_few_shot_sft.py: the warm start fine-tuned on the held-out apps' few-shot instances."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from darwin.agents.warm_start import load_warm_start
from darwin.run.load import load_experiment
from darwin.templates import few_shot_instances, split_templates

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "self_evolve.py"


def test_the_probe_fine_tunes_the_warm_start_on_the_few_shot_instances_only(tmp_path, monkeypatch, load_script) -> None:
    monkeypatch.chdir(tmp_path)  # the miniature's warm start is cached under ./.darwin-cache
    out = tmp_path / "probe"
    load_script("probe_few_shot_sft").main(
        ["--experiment", str(EXAMPLE), "--preset", "miniature", "--out", str(out), "--episodes", "4", "--steps", "2"]
    )
    split = split_templates(load_experiment(EXAMPLE, "miniature").self_evolution.split)  # type: ignore[union-attr]
    record = json.loads((out / "probe.json").read_text())
    shots = [t.id for t in few_shot_instances(split, per_app=8)]
    assert record["few_shot_instances"] == shots and record["data"]["oracle"]["episodes"] == 4
    assert all(t.startswith(("calendar.", "chrome.")) for t in shots)  # the held-out apps' instances
    evaluated = (out / "evaluated_tasks.txt").read_text().split(",")
    assert evaluated == [t.id for t in split.sets["unseen_apps"]] and not set(evaluated) & set(shots)
    assert (out / "trained_tasks.txt").read_text().split(",") == shots
    assert load_warm_start(out).observation_size == (168, 364)  # loadable as `darwin eval --agent tiny:OUT`


def test_the_probe_refuses_an_experiment_without_self_evolution(tmp_path, load_script) -> None:
    with pytest.raises(SystemExit):
        load_script("probe_few_shot_sft").main(
            ["--experiment", str(ROOT / "examples" / "spa_bench.py"), "--out", str(tmp_path / "x")]
        )
