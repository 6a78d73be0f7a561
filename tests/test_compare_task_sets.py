"""`darwin compare --per-set` (darwin.run.report.compare_task_sets): arms of one experiment file
compared on the training tasks every run evaluated and on each evaluated task set, whole and per
app. Every number below is worked out by hand from the episodes written here."""

import json

import pytest
from click.testing import CliRunner

from darwin.cli.main import main
from darwin.evaluate import GREEDY, EvalEpisode, EvalResult
from darwin.run.report import compare_task_sets

UNSEEN = ["calendar.x.s1", "chrome.y.s1"]


def _evaluation(label: str, outcomes: dict[str, tuple[bool, bool, bool]]) -> dict:
    """One evaluation on one phone: per task, the greedy episode and two samples."""
    records = [
        EvalEpisode(task, "p0", sample, success, f"{label}-{task}-{sample}", 5)
        for task, results in outcomes.items()
        for sample, success in zip((GREEDY, 0, 1), results, strict=True)
    ]
    return EvalResult(label, 0, 0, 0, 0, {}, 1.0, records=records).to_json()


def _run(root, name: str, tasks: list[str], final: dict[str, tuple[bool, bool, bool]], unseen=UNSEEN):
    run_dir = root / name
    run_dir.mkdir()
    (run_dir / "experiment.json").write_text(
        json.dumps({"tasks": tasks, "evaluation": {"task_sets": {"unseen_apps": unseen}}})
    )
    failed = dict.fromkeys([*tasks, *unseen], (False, False, False))
    (run_dir / "eval.json").write_text(
        json.dumps({"warm_start": _evaluation("warm_start", failed), "final": _evaluation("final", final)})
    )
    return run_dir


def test_each_group_pairs_final_with_warm_start_and_every_run_with_the_first(tmp_path):
    a = _run(
        tmp_path,
        "arm-a",
        ["clock.a.s0"],
        {"clock.a.s0": (True, True, False), "calendar.x.s1": (True, True, True), "chrome.y.s1": (False, False, False)},
    )
    # arm b also trains (and so evaluates) a calendar task: it is left out of the shared training group
    b = _run(
        tmp_path,
        "arm-b",
        ["clock.a.s0", "calendar.shot.s0"],
        {
            "clock.a.s0": (True, True, True),
            "calendar.shot.s0": (True, True, True),
            "calendar.x.s1": (False, False, False),
            "chrome.y.s1": (True, False, False),
        },
    )
    lines = compare_task_sets([a, b]).splitlines()
    # the two sampled pairs differ by 1 and 0: their bootstrap means are 0, 0.5 or 1
    assert (
        "| arm-a | train (every run's) | 1 | 0.0% / 0.0% | 100.0% / 50.0% | +100.0 (+100.0 to +100.0) | +50.0 (+0.0 to +100.0) |"
        in lines
    )
    assert "| arm-a | unseen_apps | 2 | 0.0% / 0.0% | 50.0% / 50.0% |" in "\n".join(lines)
    assert (
        "| arm-a | unseen_apps: calendar | 1 | 0.0% / 0.0% | 100.0% / 100.0% | +100.0 (+100.0 to +100.0) | +100.0 (+100.0 to +100.0) |"
        in lines
    )
    assert (
        "| arm-a | unseen_apps: chrome | 1 | 0.0% / 0.0% | 0.0% / 0.0% | +0.0 (+0.0 to +0.0) | +0.0 (+0.0 to +0.0) |"
        in lines
    )
    assert "| arm-b | train (every run's) | 1 | 0.0% / 0.0% | 100.0% / 100.0% |" in "\n".join(lines)
    # the second table: arm b's final against arm a's
    assert "| arm-b | train (every run's) | +0.0 (+0.0 to +0.0) | +50.0 (+0.0 to +100.0) |" in lines
    assert "| arm-b | unseen_apps: calendar | -100.0 (-100.0 to -100.0) | -100.0 (-100.0 to -100.0) |" in lines
    assert "| arm-b | unseen_apps: chrome | +100.0 (+100.0 to +100.0) | +0.0 (+0.0 to +0.0) |" in lines

    result = CliRunner().invoke(main, ["compare", "--per-set", str(a), str(b)])
    assert result.exit_code == 0, result.output
    assert "unseen_apps: chrome" in result.output


def test_runs_with_other_task_sets_or_no_experiment_are_refused(tmp_path):
    a = _run(tmp_path, "arm-a", ["clock.a.s0"], {"clock.a.s0": (True, True, True)})
    other = _run(tmp_path, "other", ["clock.a.s0"], {"clock.a.s0": (True, True, True)}, unseen=["chrome.y.s1"])
    with pytest.raises(ValueError, match="other task sets"):
        compare_task_sets([a, other])
    not_a_run = tmp_path / "empty"
    not_a_run.mkdir()
    result = CliRunner().invoke(main, ["compare", "--per-set", str(a), str(not_a_run)])
    assert result.exit_code != 0
    assert "no experiment.json" in result.output


def test_pooled_seeds_give_each_arms_mean_with_the_seeds_spread(tmp_path):
    # Arm "fly": seed 1 solves the calendar task on every episode, seed 2 on none; every warm start fails.
    # Per seed the greedy gain on calendar is +100 and +0: the mean is +50, and the two-stage
    # bootstrap draws the seeds {1,1}, {1,2}, {2,2}: its interval runs from +0 to +100 (the
    # within-seed draws are constant). Arm "rl" has one seed, which gains nothing anywhere.
    solved, failed = (True, True, True), (False, False, False)
    none = dict.fromkeys(["clock.a.s0", *UNSEEN], failed)
    fly1 = _run(tmp_path, "fly-s1", ["clock.a.s0"], none | {"calendar.x.s1": solved, "clock.a.s0": solved})
    fly2 = _run(tmp_path, "fly-s2", ["clock.a.s0"], none | {"clock.a.s0": (True, False, True)})
    rl = _run(tmp_path, "rl-s1", ["clock.a.s0"], none)
    text = compare_task_sets([fly1, fly2, rl], pool_seeds=True)
    assert "Mean over seeds" in text
    lines = text.splitlines()
    assert (
        "| fly | 2 | unseen_apps: calendar | 0.0% / 0.0% | 50.0% / 50.0% | +50.0 (+0.0 to +100.0) | +50.0 (+0.0 to +100.0) | +100.0, +0.0 |"
        in lines
    )
    # the training task: both seeds win the greedy pair; sampled 2 of 2 and 1 of 2 (mean 75%)
    assert "| fly | 2 | train (every run's) | 0.0% / 0.0% | 100.0% / 75.0% | +100.0 (+100.0 to +100.0) |" in text
    assert (
        "| rl | 1 | unseen_apps | 0.0% / 0.0% | 0.0% / 0.0% | +0.0 (+0.0 to +0.0) | +0.0 (+0.0 to +0.0) | +0.0 |"
        in lines
    )
    assert "Mean over seeds" not in compare_task_sets([fly1, fly2])

    result = CliRunner().invoke(main, ["compare", "--per-set", "--pool-seeds", str(fly1), str(fly2), str(rl)])
    assert result.exit_code == 0, result.output
    assert "| fly | 2 | unseen_apps: calendar |" in result.output


def test_the_kept_records_print_the_table_in_the_results():
    """docs/results/self-evolution/ keeps the records of issue 45's runs: the mean-over-seeds table
    that docs/results.md quotes is what `darwin compare --per-set --pool-seeds` prints from them."""
    from pathlib import Path

    docs = Path(__file__).resolve().parents[1] / "docs"
    runs = sorted(p for p in (docs / "results" / "self-evolution").iterdir() if p.is_dir())
    printed = compare_task_sets(runs, pool_seeds=True).splitlines()
    section = (docs / "results.md").read_text().split("## Self-evolution: three seeds of the arms")[1].split("\n## ")[0]
    quoted = [line for line in section.splitlines() if line.startswith("| se-")]
    assert len(quoted) == 16
    assert [line for line in quoted if line not in printed] == []
