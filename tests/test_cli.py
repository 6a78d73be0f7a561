import json
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner

from darwin.cli.main import main


def test_tasks_list_shows_the_registry():
    result = CliRunner().invoke(main, ["tasks", "list", "--set", "base8"])
    assert result.exit_code == 0, result.output
    assert "chrome_clear_tabs" in result.output and "clock_1" in result.output


def test_tasks_list_is_legible_in_80_columns():
    result = CliRunner().invoke(main, ["tasks", "list"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    # An instruction stays on one line when it fits, indented under its task.
    assert "    Set an alarm for 9am on weekdays." in lines
    templates = CliRunner().invoke(main, ["tasks", "list", "--templates", "--app", "Clock"], env={"COLUMNS": "80"})
    assert templates.exit_code == 0, templates.output
    assert "clock.set_alarm" in templates.output and "params: hour: integer 0..23" in templates.output
    assert max(len(line.rstrip()) for line in templates.output.splitlines()) <= 80


def test_tasks_split_writes_task_files_that_load(tmp_path):
    from darwin.task_registry import load_task_file

    args = [
        "tasks",
        "split",
        "--out",
        str(tmp_path / "s"),
        "--seed",
        "1",
        "--train-instances",
        "2",
        "--eval-instances",
        "1",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    sets = {
        name: load_task_file(tmp_path / "s" / f"{name}.yaml")
        for name in ("train", "unseen_instances", "unseen_templates", "unseen_apps")
    }
    assert all(sets.values())
    assert not {t.template for t in sets["train"]} & {
        t.template for t in sets["unseen_templates"] + sets["unseen_apps"]
    }
    again = CliRunner().invoke(main, [*args[:3], str(tmp_path / "t"), *args[4:]])
    assert (
        again.exit_code == 0
        and (tmp_path / "s" / "train.yaml").read_text() == (tmp_path / "t" / "train.yaml").read_text()
    )
    bad = CliRunner().invoke(main, ["tasks", "split", "--out", str(tmp_path / "u"), "--held-out-apps", "Nope"])
    assert bad.exit_code == 2 and "have no templates" in bad.output


def test_eval_oracle_stores_everything(tmp_path):
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(
        main,
        [
            "eval",
            "--agent",
            "oracle",
            "--phones",
            "3",
            "--tasks",
            "amazon_0,settings_dark_theme.cycle,x_3",
            "--samples",
            "1",
            "--run-dir",
            str(run_dir),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "overall" in result.output and "100%" in result.output
    db = sqlite3.connect(run_dir / "run.db")
    assert db.execute("select count(*) from episodes").fetchone()[0] == 3 * 3 * 2  # tasks x phones x (greedy + 1)
    steps = db.execute("select count(*), count(screenshot_path) from steps").fetchone()
    assert steps[0] > 6 and steps[0] == steps[1]
    assert any((run_dir / "screenshots").rglob("*.png"))


def test_eval_as_a_process_leaves_no_process_behind(tmp_path, no_process_left_behind):
    argv = [sys.executable, "-m", "darwin.cli", "eval", "--agent", "oracle", "--phones", "2", "--tasks", "clock_1"]
    done = subprocess.run([*argv, "--run-dir", str(tmp_path / "r")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def test_eval_json_files_compare_paired(tmp_path):
    """Two agents evaluated alike pair episode for episode; `darwin compare` prints the paired
    difference per measure with its interval and whether it is separated from zero."""
    common = ["eval", "--phones", "3", "--tasks", "clock_1,settings_dark_theme", "--samples", "2"]
    for name, agent in (("oracle", "oracle"), ("random", "random")):
        out = CliRunner().invoke(
            main,
            [*common, "--agent", agent, "--run-dir", str(tmp_path / name), "--json", str(tmp_path / f"{name}.json")],
        )
        assert out.exit_code == 0, out.output
        assert "greedy" in out.output and "pass@2" in out.output
    oracle = json.loads((tmp_path / "oracle.json").read_text())
    assert len(oracle["records"]) == 2 * 3 * 3 and oracle["overall"]["greedy_success_rate"] == 1.0
    assert oracle["overall"]["pass_at_k"] == {"1": 1.0, "2": 1.0}

    result = CliRunner().invoke(main, ["compare", str(tmp_path / "oracle.json"), str(tmp_path / "random.json")])
    assert result.exit_code == 0, result.output
    rows = {line.split("|")[1].strip(): line for line in result.output.splitlines() if line.startswith("| ")}
    # the random agent never sets an alarm or the theme in a few steps; the oracle always does
    assert "| -100.0 |" in rows["greedy"] and rows["greedy"].rstrip().endswith("| yes |")
    assert "| 12 |" in rows["sampled"] and "pass@2" in rows

    same = CliRunner().invoke(main, ["compare", str(tmp_path / "oracle.json"), str(tmp_path / "oracle.json")])
    assert same.exit_code == 0 and "| +0.0 | [+0.0, +0.0] |" in same.output

    mixed = CliRunner().invoke(main, ["compare", str(tmp_path / "oracle.json"), str(tmp_path / "oracle")])
    assert mixed.exit_code == 2 and "not both" in mixed.output


def test_eval_random_runs(tmp_path):
    result = CliRunner().invoke(
        main, ["eval", "--agent", "random", "--phones", "2", "--tasks", "amazon_0", "--run-dir", str(tmp_path / "r")]
    )
    assert result.exit_code == 0, result.output


def test_eval_rejects_bad_input_clearly(tmp_path):
    runner = CliRunner()
    result = runner.invoke(main, ["eval", "--agent", "gpt5", "--run-dir", str(tmp_path)])
    assert result.exit_code == 2 and "available: oracle, random" in result.output
    result = runner.invoke(main, ["eval", "--agent", "oracle", "--tasks", "clock1", "--run-dir", str(tmp_path)])
    assert result.exit_code == 2 and "did you mean 'clock_1'" in result.output
    result = runner.invoke(main, ["eval", "--agent", "oracle", "--observation-size", "big", "--run-dir", str(tmp_path)])
    assert result.exit_code == 2 and "WIDTHxHEIGHT" in result.output


@pytest.mark.parametrize("locale", ["en", "zh"])
def test_bench_sim_reports_all_metrics(locale):
    result = CliRunner().invoke(main, ["bench", "sim", "--instances", "4", "--steps", "20", "--locale", locale])
    assert result.exit_code == 0, result.output
    for metric in ("RSS growth", "cold start", "1080x2400 PNG", "252x560", f"locale {locale}"):
        assert metric in result.output


def test_a_missing_judge_key_stops_eval_with_one_line_naming_the_variable(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from darwin.cli.main import main

    monkeypatch.delenv("DARWIN_MISSING_JUDGE_KEY", raising=False)
    judge = (
        'verifier={"name": "llm_judge", "kwargs": {"llm": {"model": "openai/judge", '
        '"api_base": "http://127.0.0.1:9/v1", "api_key_env": "DARWIN_MISSING_JUDGE_KEY"}}}'
    )
    result = CliRunner().invoke(
        main,
        [
            "eval",
            "--agent",
            "oracle",
            "--experiment",
            "examples/spa_bench.py",
            "--set",
            judge,
            "--tasks",
            "settings_dark_theme",
            "--phones",
            "1",
            "--run-dir",
            str(tmp_path / "run"),
        ],
    )
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # a clean click error, not the PolicyAuthError escaping
    assert result.output.startswith("Error: ") or "\nError: " in result.output
    assert "DARWIN_MISSING_JUDGE_KEY" in result.output


def test_model_policy_and_learner_benchmarks_are_darwin_bench_commands():
    import json

    from click.testing import CliRunner

    from darwin.cli.main import main

    runner = CliRunner()
    model = runner.invoke(
        main,
        [
            "bench",
            "model",
            "--family",
            "qwen2_vl",
            "--batch",
            "1",
            "--repeats",
            "1",
            "--new-tokens",
            "2",
            "--screen",
            "56x112",
        ],
    )
    assert model.exit_code == 0, model.output
    row = json.loads(model.output.strip().splitlines()[-1])
    assert row["batch"] == 1 and row["visual_tokens"] == 8 and row["forward_ms"] > 0
    policy = runner.invoke(main, ["bench", "policy", "--batch", "1,2", "--repeats", "1", "--new-tokens", "2"])
    assert policy.exit_code == 0, policy.output
    assert [json.loads(line)["batch"] for line in policy.output.strip().splitlines()] == [1, 2]
    learner = runner.invoke(
        main,
        [
            "bench",
            "learner",
            "--steps",
            "8",
            "--steps-per-episode",
            "4",
            "--screen",
            "56x112",
            "--new-tokens",
            "2",
            "--mini",
            "4",
            "--micro",
            "4",
            "--epochs",
            "1",
        ],
    )
    assert learner.exit_code == 0, learner.output
    lines = [json.loads(line) for line in learner.output.strip().splitlines()]
    assert lines[0]["steps"] == 8 and lines[0]["critic"] == "separate" and "wall_s" in lines[-1]
    bad = runner.invoke(main, ["bench", "learner", "--critic", "shard"])
    assert bad.exit_code == 2 and "--critic takes separate,shared" in bad.output
