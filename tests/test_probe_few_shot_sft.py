"""scripts/probe_few_shot_sft.py and scripts/probe_copy_sft.py: the warm start fine-tuned on held-out instances."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from darwin.agents.warm_start import load_warm_start
from darwin.envs.sim.templates.chrome import QUERIES
from darwin.models._corpus import corpus
from darwin.run.load import load_experiment
from darwin.task_registry import resolve_tasks
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


def test_the_copy_probe_trains_and_tests_on_disjoint_made_up_strings(tmp_path, monkeypatch, load_script) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "copy"
    argv = ["--experiment", str(EXAMPLE), "--preset", "miniature", "--out", str(out), "--train", "3", "--test", "2"]
    load_script("probe_copy_sft").main([*argv, "--steps", "2"])
    train, test = (resolve_tasks([str(out / f"{name}_tasks.json")]) for name in ("train", "test"))
    assert len(train) == 3 and len(test) == 2 and {t.template for t in train + test} == {"chrome.search"}
    queries = [t.params["query"] for t in train + test]
    assert len(set(queries)) == 5 and not set(queries) & set(QUERIES)  # made up, none a template's
    assert all(str(t.params["query"]) in t.instruction for t in train + test)
    record = json.loads((out / "probe.json").read_text())
    assert record["data"]["oracle"]["episodes"] == 3 and record["test_phrases"] == queries[3:]
    assert load_warm_start(out).observation_size == (168, 364)


def test_the_invented_vocabulary_never_types_a_test_word_in_training(tmp_path, monkeypatch, load_script) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "copy"
    argv = ["--experiment", str(EXAMPLE), "--preset", "miniature", "--out", str(out), "--train", "4", "--test", "3"]
    script = load_script("probe_copy_sft")
    script.main([*argv, "--vocabulary", "invented", "--steps", "1"])
    train, test, human = (resolve_tasks([str(out / f"{name}_tasks.json")]) for name in ("train", "test", "human"))
    assert (
        len(train) == 4 and len(test) == 3 and json.loads((out / "probe.json").read_text())["vocabulary"] == "invented"
    )
    words = {
        name: {w for t in tasks for w in str(t.params["query"]).split()}
        for name, tasks in (("train", train), ("test", test))
    }
    assert len(words["train"]) == 8 and len(words["test"]) == 6 and not words["train"] & words["test"]
    known = {w for text in corpus() for w in text.lower().split()} | {w for q in QUERIES for w in q.lower().split()}
    assert not (words["train"] | words["test"]) & known
    assert sorted(str(t.params["query"]) for t in human) == sorted(QUERIES)  # the template's own strings, one each
    # more phrases than --vocabulary pairs has (360), every word in one phrase only
    phrases = script.invented_phrases(1000, random.Random(0), known={"bada"})
    all_words = [w for p in phrases for w in p.split()]
    assert len(set(all_words)) == 2000 and "bada" not in all_words


def test_the_copy_probe_refuses_a_template_without_one_string_parameter(tmp_path, load_script) -> None:
    argv = ["--experiment", str(EXAMPLE), "--preset", "miniature", "--out", str(tmp_path / "x")]
    with pytest.raises(SystemExit):
        load_script("probe_copy_sft").main([*argv, "--template", "chrome.close_tab"])
    with pytest.raises(SystemExit):
        load_script("probe_copy_sft").main([*argv, "--train", "400"])
