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
