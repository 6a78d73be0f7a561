"""scripts/probe_few_shot_sft.py: the warm start fine-tuned on the held-out apps' few-shot instances."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from darwin.agents.warm_start import load_warm_start
from darwin.run.load import load_experiment
from darwin.templates import few_shot_instances, split_templates

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "probe_few_shot_sft.py"
EXAMPLE = ROOT / "examples" / "self_evolve.py"


def _main():  # noqa: ANN202 - the script's main
    spec = importlib.util.spec_from_file_location("probe_few_shot_sft", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.main


def test_the_probe_fine_tunes_the_warm_start_on_the_few_shot_instances_only(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # the miniature's warm start is cached under ./.darwin-cache
    out = tmp_path / "probe"
    _main()(
        ["--experiment", str(EXAMPLE), "--preset", "miniature", "--out", str(out), "--episodes", "4", "--steps", "2"]
    )
    split = split_templates(load_experiment(EXAMPLE, "miniature").self_evolution.split)  # type: ignore[union-attr]
    record = json.loads((out / "probe.json").read_text())
    shots = [t.id for t in few_shot_instances(split, per_app=8)]
    assert record["few_shot_instances"] == shots and record["data"]["oracle"]["episodes"] == 4
    assert all(t.startswith(("calendar.", "chrome.")) for t in shots)  # the held-out apps' instances
    evaluated = (out / "evaluated_tasks.txt").read_text().split(",")
    assert evaluated == [t.id for t in split.sets["unseen_apps"]] and not set(evaluated) & set(shots)
    assert load_warm_start(out).observation_size == (168, 364)  # loadable as `darwin eval --agent tiny:OUT`


def test_the_probe_refuses_an_experiment_without_self_evolution(tmp_path) -> None:
    with pytest.raises(SystemExit):
        _main()(["--experiment", str(ROOT / "examples" / "spa_bench.py"), "--out", str(tmp_path / "x")])
